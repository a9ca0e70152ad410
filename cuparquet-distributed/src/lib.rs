//! # cuparquet-distributed
//!
//! cuparquet's DataFusion scan ([`cuparquet_datafusion`]) under
//! [datafusion-distributed](https://github.com/datafusion-contrib/datafusion-distributed):
//! one coordinator plans a query, its stages run as tasks on workers, and each worker decodes
//! the Parquet files of its tasks on its own GPU — or on its CPU where it has none, with the
//! same results.
//!
//! ```text
//!  coordinator (no GPU needed)                     worker 1 (cuda:0)          worker 2 (no GPU)
//!  SQL ─▶ plan: footers, pruning ─▶ stages ─gRPC─▶ cuparquet scan ─▶ partial ─▶ …
//!         GpuScanCodec encodes the scan            decodes on its GPU,         decodes on its CPU
//!         (files, options, filters)                copies back to host Arrow
//!  ◀──────────────────────── Arrow IPC (Flight) between stages ────────────────────────────
//! ```
//!
//! - [`GpuScanCodec`] ships the scan: its files, schema, projection and limit (DataFusion's own
//!   protobuf), its options (device, batch rows, page index, pruning, memory budget), the
//!   pushed predicate and the filters it applies to the rows. A worker rebuilds exactly that
//!   scan. A scan that cannot be encoded fails planning with the reason; it never falls back
//!   to DataFusion's own scan.
//! - [`coordinator_state`] is a coordinator's session: datafusion-distributed's planner, the
//!   codec, a scan's files dealt whole to tasks (each file one pipelined load, as on one
//!   machine) and at most one task per file. It reads footers only: no GPU is needed there.
//! - [`worker`] and [`serve`] run a worker; [`WorkerOptions`] are its own settings (its device,
//!   its memory budget: workers sharing a GPU each take their share). `Device::Auto` is
//!   resolved on the worker. The scan's metrics say where each batch was decoded
//!   (`cuparquet_device_batches`, `cuparquet_host_batches`).
//! - [`LocalCluster`] starts workers on 127.0.0.1 inside one process (tests, examples).
//!
//! Batches leave a worker only as host Arrow: device batches are copied back to the host by the
//! scan (pinned staging, several streams) and travel between stages as Arrow IPC over
//! datafusion-distributed's Flight service. GPU operators on a worker
//! ([`cuparquet_datafusion::device_batches`]) are not shipped.
//!
//! ## Example
//!
//! ```no_run
//! # async fn f() -> datafusion::error::Result<()> {
//! use cuparquet_datafusion::{register_gpu_parquet, GpuScanOptions};
//! use cuparquet_distributed::{coordinator_state, LocalCluster, WorkerOptions};
//! use datafusion::prelude::{SessionConfig, SessionContext};
//!
//! // two workers in this process (on other machines: `worker` + `serve` there, and
//! // `StaticWorkers::parse(&["host1:7000", "host2:7000"])` here)
//! let cluster = LocalCluster::start(2, WorkerOptions::default(), 4)?;
//! let ctx = SessionContext::from(coordinator_state(SessionConfig::new(), cluster.resolver()));
//! register_gpu_parquet(&ctx, "lineitem", "data/lineitem/", GpuScanOptions::default()).await?;
//! ctx.sql("SELECT l_returnflag, sum(l_quantity) FROM lineitem GROUP BY 1").await?.show().await?;
//! # Ok(())
//! # }
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

mod cluster;
mod codec;
mod tasks;

pub use cluster::{coordinator_state, serve, worker, LocalCluster, StaticWorkers};
pub use codec::{GpuScanCodec, WorkerOptions};
