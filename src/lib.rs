//! placeholder
#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod array;
pub mod config;
pub mod decode;
#[allow(unsafe_code)]
pub mod device;
pub mod error;
pub mod io;
pub mod metadata;
pub mod plan;
pub mod reader;
pub mod source;

pub use array::{LoadedBatch, Location};
pub use device::Device;
pub use error::{Error, Result};
pub use reader::{LoadReport, Loaded, ParquetGpuReader, ReaderBuilder};
