//! # cuparquet
//!
//! Load Parquet columns into GPU memory as Arrow arrays — and, on machines without a GPU, into
//! host memory through the very same pipeline.
//!
//! ```text
//!  file ─footer─▶ metadata ─▶ plan ─IoRequests─▶ io ─chunk bytes─▶ decode ─▶ array ─▶ reader
//!                 (one tail   (pure: projection,  (RangeReader:    (GPU kernels  (LoadedBatch,  (builder, host
//!                  read)       row-group pruning,  host pread,      or arrow-rs)  DeviceArray)   and device load
//!                              coalescing)         staged, cuFile)                               drivers, report)
//!                                      device: contexts, streams, memory, NVRTC (used by io, decode, array)
//! ```
//!
//! * [`metadata`] reads the footer with one speculative read of the file's last 64 KiB.
//! * [`plan`] turns the footer and a [`Selection`](plan::Selection) (columns, row groups, a
//!   pruning predicate) into a [`ReadPlan`](plan::ReadPlan): one
//!   [`ColumnChunkPlan`](plan::ColumnChunkPlan) per (row group, leaf column) and the coalesced
//!   [`IoRequest`](plan::IoRequest)s that read them. It does no I/O: `cuparquet plan` prints it.
//! * [`io`] executes the requests through a [`RangeReader`](io::RangeReader): the
//!   [`HostReader`](io::host::HostReader) (a pool of `pread` threads, optionally `O_DIRECT`) or
//!   the [`GpuReader`](io::gpu::GpuReader), which decides per range between cuFile and pinned
//!   staging ([`io::policy`], a pure function of settings, machine facts and the range) and
//!   reports the path every byte really took.
//! * The decoder (crate-private) turns the fetched bytes into Arrow arrays without touching the
//!   file again: our CUDA kernels on the device, arrow-rs on the host.
//! * [`array`](mod@array) holds the results: [`LoadedBatch`] (host or device), [`DeviceArray`] and
//!   [`DeviceRecordBatch`] (Arrow layout in device memory).
//! * [`scan`](mod@scan) is the facade most users want: one [`Scan`] of a file, a directory or a
//!   list of files, on the host, a GPU or several, and its one stream of batches, [`Batches`].
//! * [`device`] is the only module that touches CUDA: devices, memory, streams, kernels.
//! * [`capi`] is the C API over the reader: a file or directory as an Arrow C Device Data
//!   Interface stream.
//!
//! ## Which API
//!
//! | you want | use |
//! |---|---|
//! | load columns into memory | [`Scan::builder`] … [`build`](ScanBuilder::build) → [`load`](Scan::load) → [`Loaded`] |
//! | a stream of batches (under a device-memory budget) | [`Scan::batches`] ([`Batches`]: `'static`, `Send`); [`ScanBuilder::with_memory_budget`] |
//! | several files or a directory as one | [`Scan::builder`] with a directory or a list of files: the same [`Scan`], one schema |
//! | several GPUs | [`ScanBuilder::with_devices`]: the same [`Scan`], its passes spread over the devices |
//! | see which bytes a query needs, without reading them | [`metadata::read_metadata`] + [`plan::plan`], or a built scan's [`FileScan::plan`] ([`Scan::files`]) |
//! | read byte ranges into a buffer of your own | [`io::host::HostReader`] (host) or [`io::gpu::GpuReader`] (device, per-range path choice) through [`io::RangeReader`]; [`io::recording::RecordingReader`] logs the ranges asked for ([`Scan::batches_with`], [`Scan::load_with`]) |
//! | Arrow batches in GPU memory | [`Device::Cuda`] → [`load`](Scan::load): batches of about `with_batch_rows` rows ([`LoadedBatch::as_device`]), or as a stream ([`batches`](Scan::batches)) |
//! | only the rows matching a predicate (SQL's `WHERE`; on the GPU for device loads) | [`ScanBuilder::with_row_filter`] (text), [`ScanBuilder::with_row_predicate`] ([`plan::Predicate`]); [`ScanBuilder::with_filter`] prunes row groups only |
//! | some rows only (arrow-rs's `RowSelection`, DataFusion's access plan shape) | [`ScanBuilder::with_row_selection`], [`ScanBuilder::with_access_plan`] (one per file: [`ScanBuilder::with_access_plans`]); with [`ScanBuilder::with_page_index`], only the pages holding those rows are read |
//! | column chunks in GPU memory, still encoded | [`FileScan::load_chunks`] ([`scan::DeviceChunks`]), then [`decode_on_gpu`](FileScan::decode_on_gpu) |
//! | device memory, pinned memory, kernels of your own | [`device::gpu`] → [`device::Gpu`] (`alloc`, `pinned`, `load_module`) |
//! | Arrow arrays / batches in device memory | [`DeviceArray`], [`DeviceRecordBatch`] (`upload`, `to_host`) |
//! | hand batches to other GPU code (cuDF, nanoarrow, Arrow C++) without a copy | [`LoadedBatch::to_c_device`], [`Scan::c_device_stream`]: the Arrow C Device Data Interface ([`array::c_device`]) |
//! | read Parquet from C, C++ or Python | the C API ([`capi`], `include/cuparquet.h`; a shared library with the `capi` feature) |
//! | know where batches went and why | [`ScanReport`]: a [`LoadReport`] per file (`device`, per-request `io` records, `gpu_decode`) |
//! | what this machine offers, which path a range would take | `cuparquet doctor`, [`io::cufile::machine_facts`] |
//! | settings | [`config::IoSettings`], [`config::Tuning`], [`config::env`] |
//!
//! ## Example
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! // Arrow types through cuparquet's re-export: the versions its batches hold
//! use cuparquet::arrow::array::{ArrayRef, Int64Array, StringArray};
//! use cuparquet::arrow::record_batch::RecordBatch;
//! use cuparquet::{Device, Scan};
//!
//! // A small file with two row groups.
//! let path = std::env::temp_dir().join(format!("cuparquet-doc-{}.parquet", std::process::id()));
//! let batch = RecordBatch::try_from_iter(vec![
//!     ("id", Arc::new(Int64Array::from_iter_values(0..100)) as ArrayRef),
//!     ("name", Arc::new(StringArray::from_iter_values((0..100).map(|i| format!("n{i}"))))),
//! ])?;
//! let props = cuparquet::parquet::file::properties::WriterProperties::builder()
//!     .set_max_row_group_row_count(Some(50))
//!     .build();
//! let file = std::fs::File::create(&path)?;
//! let mut w = cuparquet::parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(props))?;
//! w.write(&batch)?;
//! w.close()?;
//!
//! let scan = Scan::builder(&path)    // a file, a directory, or a list of files
//!     .with_columns(["id"])
//!     .with_filter("id >= 60")        // prunes row group 0 by its statistics
//!     .with_device(Device::Host)      // or Device::Auto: a GPU when one can be used
//!     .build()?;
//! assert_eq!(scan.files()[0].plan().row_groups, vec![1]);
//! let loaded = scan.load()?;
//! let rows: usize = loaded.batches.iter().map(|b| b.num_rows()).sum();
//! assert_eq!(rows, 50);                // the whole row group: rows are not filtered
//! // a row filter keeps only the rows where it is true
//! let exact = Scan::builder(&path)
//!     .with_columns(["name"])
//!     .with_row_filter("id >= 60 AND id < 65")
//!     .with_device(Device::Host)
//!     .build()?
//!     .load()?;
//! assert_eq!(exact.batches.iter().map(|b| b.num_rows()).sum::<usize>(), 5);
//! let host = loaded.batches[0].to_host()?;
//! assert_eq!(host.num_columns(), 1);
//! # std::fs::remove_file(&path)?;
//! # Ok(())
//! # }
//! ```
//!
//! ## Depending on it
//!
//! ```toml
//! [dependencies]
//! # not on crates.io yet: a path or git dependency; pick the CUDA bindings your libcufile
//! # matches (cuda-13000, cuda-12090 or cuda-12080; without one the build stops with an error
//! # naming them); leave out the CLI
//! cuparquet = { path = "../cuparquet", default-features = false, features = ["cuda-13000"] }
//! # optional: "encryption" (on by default) recognises encrypted column chunks in files with a
//! # plaintext footer, to refuse them naming the column (it brings in `ring`); "cli" the binary
//! ```
//!
//! Arrow and Parquet types come through [`arrow`](mod@arrow) and [`parquet`](mod@parquet)
//! (`cuparquet::arrow::array::Int64Array`): the versions the batches hold, with no second
//! `arrow = "…"` line to keep in step.
//!
//! ## Devices
//!
//! [`Device::Host`] loads into host memory. [`Device::Cuda`] moves the planned column chunks
//! into one device allocation through the GPU range reader ([`io::gpu::GpuReader`]: pinned
//! staging or cuFile per range, the path of every byte in [`LoadReport::io`]) and decodes them
//! there with our CUDA kernels into batches of about `with_batch_rows` rows; fields the
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
//! Every environment variable cuparquet reads, all read in [`config`] ([`config::env`]); a
//! builder method overrides its variable for one scan.
//!
//! | variable | builder | default |
//! |---|---|---|
//! | `CUPARQUET_NTHREADS` | [`with_nthreads`](ScanBuilder::with_nthreads) | available cores |
//! | `CUPARQUET_TASK_SIZE` | [`with_task_size`](ScanBuilder::with_task_size) | 4 MiB |
//! | `CUPARQUET_DIRECT_IO` | [`with_direct_io`](ScanBuilder::with_direct_io) | false |
//! | `CUPARQUET_COMPAT_MODE` | [`with_compat_mode`](ScanBuilder::with_compat_mode) | `auto` (device targets) |
//! | `CUPARQUET_GDS_THRESHOLD` | [`with_gds_threshold`](ScanBuilder::with_gds_threshold) | 16 KiB |
//! | `CUPARQUET_BOUNCE_BUFFER_SIZE` | [`with_bounce_buffer_size`](ScanBuilder::with_bounce_buffer_size) | 4 MiB |
//! | `CUPARQUET_MEMORY_BUDGET` | [`with_memory_budget`](ScanBuilder::with_memory_budget) | 80% of the device's free memory (none for loads the footer puts at 1 GiB or less) |
//! | `CUPARQUET_MAX_PAGE_SIZE` | [`with_max_page_size`](ScanBuilder::with_max_page_size) | 1 GiB ([`config::MAX_PAGE_BYTES`]): larger page claims are refused |
//! | `CUPARQUET_TUNING` | [`with_tuning`](ScanBuilder::with_tuning) | `bounce_buffer_count=2`; `wave_bytes` and `host_share` by the load and the host (see [`config::Tuning`]) |
//! | `CUPARQUET_NVCOMP` | — | `auto`: search for nvCOMP (`off`, or the path of the library or its directory, which must then load) |
//! | `CUPARQUET_KERNEL_CACHE` | — | `$XDG_CACHE_HOME/cuparquet/kernels`, else `~/.cache/cuparquet/kernels` |
//! | `CUPARQUET_PROFILE` | — | off (`1`/`true`/`on`: stage times of the GPU decoder in the report) |
//! | `CUPARQUET_FAULTS` | — ([`error::fault::arm`]) | none (tests: `site=n`, e.g. `device-alloc=3`) |
//!
//! Sizes take a suffix (`64KiB`, `4MiB`, `1GiB`); an invalid value — of any of them, the
//! diagnostics included — is an error naming the variable, raised where the scan is built.
//!
//! [`config::Tuning`] holds what a user may tune for their machine (bounce buffers per reader
//! thread, device waves, the host's share of nvCOMP's pages), all from one variable:
//! `CUPARQUET_TUNING=wave_bytes=0,host_share=40`. Their defaults are the measured best
//! (`benches/RESULTS.md`). Keys whose alternatives measured no faster were removed and their
//! defaults made constants ([`config::RETIRED_KEYS`]: `cuda_wait`, `snappy`, `decode_threads`,
//! `device_pool`, `device_pool_retain`); setting one is an error saying so, and so is a
//! variable that used to set a key one by one.
//!
//! ## Memory
//!
//! A load reads its plan in units of about 2 MiB ([`plan::UNIT_TARGET_BYTES`]), each into a
//! buffer that is recycled once the unit is decoded; up to [`scan::RETAINED_BUFFER_BYTES`] of
//! such buffers stay cached for later loads ([`scan::release_cached_buffers`] frees them).
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

// Every item needs the CUDA bindings of one `cuda-*` feature; without one, only this error is
// compiled (not a cascade of missing `cudarc` paths after it).
#[cfg(not(any(feature = "cuda-13000", feature = "cuda-12090", feature = "cuda-12080")))]
compile_error!(
    "cuparquet needs one of its CUDA features, for the CUDA version whose libcufile is installed: \
     `cuda-13000` (CUDA 13.0, libcufile 1.15, driver r580 or newer; the default), `cuda-12090` \
     or `cuda-12080`. With `default-features = false`, add one, e.g. \
     cuparquet = { ..., default-features = false, features = [\"cuda-13000\"] }"
);

/// The crate's items, each behind a `cuda-*` feature (see the error above).
macro_rules! with_cuda_bindings {
    ($($item:item)*) => {
        $(
            #[cfg(any(feature = "cuda-13000", feature = "cuda-12090", feature = "cuda-12080"))]
            $item
        )*
    };
}

with_cuda_bindings! {
    pub mod array;
    #[allow(unsafe_code)] // the C API: raw pointers from C callers (see the module docs)
    pub mod capi;
    pub mod compute;
    pub mod config;
    mod decode;
    #[allow(unsafe_code)] // the CUDA driver and NVRTC (see the module docs)
    pub mod device;
    pub mod doctor;
    pub mod error;
    pub mod io;
    pub mod metadata;
    pub mod plan;
    pub mod scan;
    pub mod source;

    /// Not part of the API: the crate's own tests and benchmarks reach the decoder's parts here
    /// (page headers, host decompression, the GPU placement, the kernel stages). Anything in it
    /// may change or go at any time.
    #[doc(hidden)]
    pub mod internals {
        pub use crate::decode::{decompress, gpu_plan, page_header};

        /// The GPU decoder's stages, for the kernel tests.
        pub mod gpu {
            pub use crate::decode::gpu::kernels::{conversion_code, physical_code, PageInfo};
            pub use crate::decode::gpu::{
                decode_bytes_columns, decode_fixed_columns, keys_fallback, page_tables,
                segments_of, snappy_fragments_of, DeviceColumn, WaveDecode, SnappyPlacement,
            };
        }
    }

    /// The `arrow` crate cuparquet is built on (the major version DataFusion uses): name Arrow
    /// types through `cuparquet::arrow` and they are the ones the batches hold.
    pub use arrow;
    /// The `parquet` crate cuparquet is built on (`RowSelection`, footers, statistics).
    pub use parquet;

    pub use array::{DeviceArray, DeviceRecordBatch, LoadedBatch, Location, RowSpan};
    pub use device::{cuda_devices, Device};
    pub use error::{Error, Result};
    pub use scan::{
        Batches, FileScan, IntoSources, LoadReport, Loaded, Progress, Scan, ScanBuilder,
        ScanReport,
    };
}
