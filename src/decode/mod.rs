//! Decoding fetched column-chunk bytes into Arrow arrays (crate-private: users see the report
//! types, which the reader re-exports).
//!
//! [`host`] decodes with arrow-rs on the CPU: the oracle, and the fallback for what the GPU
//! cannot decode. It never reads the file: it is handed the bytes the I/O stage fetched,
//! exactly the planned chunk ranges.
//!
//! The GPU decoder is built from parts that are each checked on the host first:
//! [`page_header`] (the host twin of the device page-header parser), [`decompress`] (host
//! decompression of the codecs the GPU does not decode), [`gpu_plan`] (which columns the GPU
//! takes, with arrow-rs's exact conversions) and [`gpu`] (the CUDA kernels, their launches and
//! the decoding of a wave that runs them). The CPU twin of the kernels, the test oracle they
//! are checked against page by page, lives with the tests (`tests/reference_decoder`).

pub(crate) mod chunks;
pub(crate) mod claims;
pub mod decompress;
pub(crate) mod filter;
#[allow(unsafe_code)] // kernel launches (see the module docs)
pub(crate) mod gpu;
pub mod gpu_plan;
pub(crate) mod host;
pub(crate) mod levels;
pub use crate::metadata::page_header;
pub(crate) mod prefix;
pub(crate) mod snappy_host;
