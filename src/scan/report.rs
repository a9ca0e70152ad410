//! [`ScanReport`]: what a scan's load did; [`LoadReport`]: what the load of one file (over
//! several devices, one pass) did — where, how many bytes, by which path, how long.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::IoSettings;
use crate::decode::gpu::GpuDecodeReport;
use crate::device::DeviceChoice;
use crate::io::IoReport;

/// What a scan's [`load`](super::Scan::load) did: each file's load (over several devices, each
/// pass's), and over several devices what each did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ScanReport {
    /// One report per file, in the order read; over several devices one per pass, in load
    /// order.
    pub loads: Vec<LoadReport>,
    /// Over several devices ([`ScanBuilder::with_devices`](super::ScanBuilder::with_devices)):
    /// what each device did, in the order given; empty otherwise.
    pub devices: Vec<super::DeviceWork>,
    /// Wall time of the whole load.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub wall: Duration,
}

impl ScanReport {
    /// Rows loaded.
    pub fn rows(&self) -> u64 {
        self.loads.iter().map(|l| l.rows).sum()
    }

    /// Bytes read.
    pub fn bytes_read(&self) -> u64 {
        self.loads.iter().map(|l| l.bytes_read).sum()
    }

    /// Bytes of the resulting Arrow buffers.
    pub fn output_bytes(&self) -> u64 {
        self.loads.iter().map(|l| l.output_bytes).sum()
    }
}

/// What the load of one file (over several devices, of one pass) did: where, how many bytes,
/// by which path, how long.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadReport {
    /// The file.
    pub path: PathBuf,
    /// The device chosen and why.
    pub device: DeviceChoice,
    /// Rows loaded.
    pub rows: u64,
    /// Top-level columns in the result.
    pub columns: usize,
    /// Leaf columns read.
    pub leaf_columns: usize,
    /// Row groups read.
    pub row_groups: usize,
    /// Bytes of the selected column chunks.
    pub bytes_planned: u64,
    /// Bytes read (chunks plus alignment padding and coalesced gaps).
    pub bytes_read: u64,
    /// Footer bytes read.
    pub footer_bytes: u64,
    /// Footer reads.
    pub footer_reads: usize,
    /// Bytes of the resulting Arrow buffers, each counted once ([`crate::array::memory_held`]).
    pub output_bytes: u64,
    /// I/O settings in use.
    pub settings: IoSettings,
    /// Per-request I/O record (its `wall`, like `io_time`, is summed over the units read in
    /// parallel).
    pub io: IoReport,
    /// Time in `build()`: [`setup`](Self::setup)'s parts and the rest (settings, the file
    /// opened).
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub setup_time: Duration,
    /// Where `build()`'s time went.
    pub setup: SetupTimes,
    /// Time this load spent making GPU kernel modules ready (the disk cache read or NVRTC run,
    /// and the module loaded into the context): once per module and process, so a process's
    /// first device load pays it and later ones do not ([`crate::device::nvrtc::module_load_time`]).
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub kernel_load_time: Duration,
    /// Time in I/O, summed over the units read in parallel.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub io_time: Duration,
    /// Time decoding, summed over the units decoded in parallel.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub decode_time: Duration,
    /// Wall time of `load` (I/O + decode).
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub load_time: Duration,
    /// For a device load: where each field was decoded and why, pages decompressed on the host.
    pub gpu_decode: Option<GpuDecodeReport>,
}

impl LoadReport {
    /// Bytes read per second of load time.
    pub fn read_throughput(&self) -> f64 {
        self.bytes_read as f64 / self.load_time.as_secs_f64().max(1e-9)
    }
}

/// Where a reader's `build()` spent its time: the fixed cost of a load in a fresh process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SetupTimes {
    /// Initialising the CUDA driver (`cuInit`) and creating the device's primary context:
    /// paid by a process's first device reader, about zero for later ones.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub cuda: Duration,
    /// Reading and parsing the footer (and the page index where asked for).
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub footer: Duration,
    /// Planning: projection, pruning, row selections, the memory budget's passes.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub plan: Duration,
    /// Setting up the range readers: pinned staging buffers, and the cuFile driver where the
    /// path policy may read through it.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub readers: Duration,
}

/// Progress of a load, passed to the callback set with
/// [`ScanBuilder::with_progress`](super::ScanBuilder::with_progress): the counts of the file being loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes read so far.
    pub bytes_read: u64,
    /// Bytes the plan reads in all.
    pub bytes_total: u64,
    /// Row groups decoded so far.
    pub row_groups_done: usize,
    /// Row groups to decode.
    pub row_groups_total: usize,
}

impl Progress {
    /// Progress through `plan`: `bytes_read` and `row_groups_done` so far.
    pub(super) fn of(plan: &crate::plan::ReadPlan, bytes_read: u64, row_groups_done: usize) -> Self {
        Progress {
            bytes_read,
            bytes_total: plan.request_bytes(),
            row_groups_done,
            row_groups_total: plan.row_groups.len(),
        }
    }
}

pub(super) type ProgressFn = Arc<dyn Fn(Progress) + Send + Sync>;
