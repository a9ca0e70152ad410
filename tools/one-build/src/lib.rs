//! Nothing: this crate only names the workspace's dependencies with their features (see its Cargo.toml).
