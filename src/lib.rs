//! # cuparquet
//!
//! Load Parquet columns into GPU memory as Arrow arrays — and, on machines without a GPU, into
//! host memory through the very same pipeline.
//!
//! ```text
//!  file ──footer──▶ metadata ──▶ plan ──IoRequests──▶ io ──chunk bytes──▶ decode ──▶ array
//!                   (one tail     (pure: projection,   (RangeReader:      (arrow-rs on   (LoadedBatch,
//!                    read)         row-group pruning,   host pread pool;   the host; GPU  to_host())
//!                                  coalescing)          GPU paths next)    kernels next)
//! ```
//!
//! * [`metadata`] reads the footer with one speculative read of the file's last 64 KiB.
//! * [`plan`] turns the footer and a [`Selection`](plan::Selection) (columns, row groups, a
//!   pruning predicate) into a [`ReadPlan`](plan::ReadPlan): one
//!   [`ColumnChunkPlan`](plan::ColumnChunkPlan) per (row group, leaf column) and the coalesced
//!   [`IoRequest`](plan::IoRequest)s that read them. It does no I/O: `cuparquet plan` prints it.
//! * [`io`] executes the requests through a [`RangeReader`](io::RangeReader); the
//!   [`HostReader`](io::host::HostReader) uses a pool of `pread` threads (optionally
//!   `O_DIRECT`).
//!   [`io::policy`] decides per range between cuFile and pinned staging (a pure function of
//!   settings, machine facts and the range), and [`io::staging`] plans the staged copies.
//! * [`decode`] turns the fetched bytes into Arrow arrays without touching the file again.
//! * [`reader`] is the facade most users want: [`ParquetGpuReader`].
//!
//! ## Which API
//!
//! | you want | use |
//! |---|---|
//! | load columns into memory | [`ParquetGpuReader::builder`] … [`build`](ReaderBuilder::build) → [`load`](ParquetGpuReader::load) |
//! | see which bytes a query needs, without reading them | [`metadata::read_metadata`] + [`plan::plan`] |
//! | read byte ranges into a buffer of your own | [`io::host::HostReader`] (host) or [`io::gpu::GpuReader`] (device, per-range path choice) through [`io::RangeReader`] |
//! | Arrow batches in GPU memory | [`Device::Cuda`] → [`load`](ParquetGpuReader::load): one [`DeviceRecordBatch`](device_array::DeviceRecordBatch) per row group ([`LoadedBatch::as_device`](array::LoadedBatch::as_device)) |
//! | column chunks in GPU memory, still encoded | [`ParquetGpuReader::load_chunks`] ([`reader::DeviceChunks`]), then [`decode_on_gpu`](ParquetGpuReader::decode_on_gpu) |
//! | device memory, pinned memory, kernels of your own | [`device::gpu`] → [`device::Gpu`] (`alloc`, `pinned`, `load_module`) |
//! | Arrow arrays / batches in device memory | [`device_array::DeviceArray`], [`device_array::DeviceRecordBatch`] (`upload`, `to_host`) |
//! | know where batches went and why | [`LoadReport`] (`device`, per-request `io` records) |
//!
//! ## Example
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use arrow::array::{ArrayRef, Int64Array, StringArray};
//! use arrow::record_batch::RecordBatch;
//! use cuparquet::{Device, ParquetGpuReader};
//!
//! // A small file with two row groups.
//! let path = std::env::temp_dir().join(format!("cuparquet-doc-{}.parquet", std::process::id()));
//! let batch = RecordBatch::try_from_iter(vec![
//!     ("id", Arc::new(Int64Array::from_iter_values(0..100)) as ArrayRef),
//!     ("name", Arc::new(StringArray::from_iter_values((0..100).map(|i| format!("n{i}"))))),
//! ])?;
//! let props = parquet::file::properties::WriterProperties::builder()
//!     .set_max_row_group_row_count(Some(50))
//!     .build();
//! let mut w = parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&path)?, batch.schema(), Some(props))?;
//! w.write(&batch)?;
//! w.close()?;
//!
//! let reader = ParquetGpuReader::builder(&path)
//!     .with_columns(["id"])
//!     .with_filter("id >= 60")        // prunes row group 0 by its statistics
//!     .with_device(Device::Host)      // or Device::Auto: a GPU when one can be used
//!     .build()?;
//! assert_eq!(reader.plan().row_groups, vec![1]);
//! let loaded = reader.load()?;
//! let rows: usize = loaded.batches.iter().map(|b| b.num_rows()).sum();
//! assert_eq!(rows, 50);                // the whole row group: rows are not filtered
//! let host = loaded.batches[0].to_host()?;
//! assert_eq!(host.num_columns(), 1);
//! # std::fs::remove_file(&path)?;
//! # Ok(())
//! # }
//! ```
//!
//! ## Devices
//!
//! [`Device::Host`] loads into host memory. [`Device::Cuda`] moves the planned column chunks
//! into one device allocation through the GPU range reader ([`io::gpu::GpuReader`]: pinned
//! staging or cuFile per range, the path of every byte in [`LoadReport::io`]) and decodes them
//! there with the kernels of [`decode::gpu`] into one device batch per row group; fields the
//! kernels do not decode yet are decoded on the host by arrow-rs and uploaded, and
//! [`LoadReport::gpu_decode`] names each with its reason. [`Device::Auto`] (the default) picks
//! `cuda:0` when a device is present and NVRTC can compile the kernels, else the host, and
//! [`LoadReport::device`] says what it chose and why.
//! Nothing CUDA is needed to build: libcuda, libcufile and libnvrtc are loaded at run time;
//! the `cuda-13000` feature (default) picks the CUDA 13.0 bindings (driver r580+, libcufile
//! 1.15), `cuda-12090`/`cuda-12080` the 12.x ones.
//!
//! ## Settings
//!
//! | variable | builder | default |
//! |---|---|---|
//! | `CUPARQUET_NTHREADS` | [`with_nthreads`](ReaderBuilder::with_nthreads) | available cores |
//! | `CUPARQUET_TASK_SIZE` | [`with_task_size`](ReaderBuilder::with_task_size) | 4 MiB |
//! | `CUPARQUET_DIRECT_IO` | [`with_direct_io`](ReaderBuilder::with_direct_io) | false |
//! | `CUPARQUET_COMPAT_MODE` | [`with_compat_mode`](ReaderBuilder::with_compat_mode) | `auto` (device targets) |
//! | `CUPARQUET_GDS_THRESHOLD` | [`with_gds_threshold`](ReaderBuilder::with_gds_threshold) | 16 KiB |
//! | `CUPARQUET_BOUNCE_BUFFER_SIZE`, `_COUNT` | [`with_bounce_buffers`](ReaderBuilder::with_bounce_buffers) | 4 MiB × 2 per thread |
//! | `CUPARQUET_STAGING` | [`with_staging`](ReaderBuilder::with_staging) | `bounce` (`mapped`: mmap + register, measured slower) |
//! | `CUPARQUET_KERNEL_CACHE` | — | `$XDG_CACHE_HOME/cuparquet/kernels` |
//!
//! Sizes take a suffix (`64KiB`, `4MiB`, `1GiB`); an invalid value is an error naming the
//! variable.
//!
//! ## Memory
//!
//! A load reads its plan in units of about 2 MiB ([`plan::UNIT_TARGET_BYTES`]), each into a
//! buffer that is recycled once the unit is decoded; up to [`reader::RETAINED_BUFFER_BYTES`] of
//! such buffers stay cached for later loads ([`reader::release_cached_buffers`] frees them).
//! Readers share one thread pool per thread count.
//!
//! ## Features
//!
//! | feature | default | what |
//! |---|---|---|
//! | `cli` | yes | the `cuparquet` binary (clap, indicatif) |
//! | `cuda-13000` | yes | CUDA 13.0 bindings (exactly one `cuda-*` feature) |
//! | `cuda-12090`, `cuda-12080` | no | CUDA 12.9 / 12.8 bindings |
//!
//! ## Errors
//!
//! One [`Error`] type; every variant names the file and, where it applies, the byte range,
//! row group and column. Corrupt input gives an error, never a panic: offsets are validated
//! against the file before arrow-rs sees them, and panics inside arrow-rs are contained.
#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod array;
pub mod config;
pub mod decode;
#[allow(unsafe_code)] // the CUDA driver and NVRTC (see the module docs)
pub mod device;
pub mod doctor;
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
