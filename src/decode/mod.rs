//! Decoding fetched column-chunk bytes into Arrow arrays.
//!
//! [`host`] decodes with arrow-rs on the CPU: the oracle, and the fallback for what the GPU
//! cannot decode. It never reads the file: it is handed the bytes the I/O stage fetched,
//! exactly the planned chunk ranges.
//!
//! The GPU decoder is being built from parts that are each checked on the host first:
//! [`page_header`] (the host twin of the device page-header parser), [`decompress`] (host
//! decompression of the codecs the GPU does not decode), [`gpu_plan`] (which columns the GPU
//! takes, with arrow-rs's exact conversions), [`reference`] (the CPU twin of the kernels,
//! equal to arrow-rs) and [`gpu`] (the CUDA kernels and their launches).

pub mod chunks;
pub mod decompress;
#[allow(unsafe_code)] // kernel launches (see the module docs)
pub mod gpu;
pub mod gpu_plan;
pub mod host;
pub mod page_header;
pub(crate) mod panic_guard;
pub mod reference;
pub mod snappy_host;
