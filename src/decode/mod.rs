//! Decoding fetched column-chunk bytes into Arrow arrays.
//!
//! [`host`] decodes with arrow-rs on the CPU: the reference the GPU decoder is tested against,
//! and the fallback for what the GPU cannot decode. It never reads the file: it is handed the
//! bytes the I/O stage fetched, exactly the planned chunk ranges.

pub mod chunks;
pub mod decompress;
pub mod gpu_plan;
pub mod host;
pub mod kernels;
pub mod page_header;
pub(crate) mod panic_guard;
pub mod reference;
