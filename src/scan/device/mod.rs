//! A device load, top to bottom. Everything it needs comes in one [`DeviceLoad`] (the file,
//! its footer and plan, the batches, the settings, the memory budget, the finish), and
//! [`DeviceLoad::run`] is the whole of it:
//!
//! ```text
//! DeviceLoad::waves         1. the plan's passes under a memory budget it does not fit at
//!                              once, else waves of whole batches sized so that reads overlap
//!                              decoding (scan::waves)
//! DeviceLoad::run           2. read into device memory (read.rs): one streamed allocation,
//!   pipeline.rs                wave by wave, or each wave as the budget admits it (budget.rs),
//!                              one reader thread beside the decoders
//!                           3. decoded on the device, each wave on a decode slot of its own
//!                              (decode.rs → decode::gpu::decode_wave)
//!                           4. finished (the row filter, views: scan::finish) and handed to
//!                              the sink as it is done
//! DeviceLoad::collect          a load: every wave's batches, in order
//! ```
//!
//! A stream ([`super::stream`]) hands the waves over in order itself, as the caller takes them.
//! With `CUPARQUET_PROFILE` set, a pipelined load prints when each wave was read and decoded
//! (timeline.rs).

mod budget;
mod decode;
mod pipeline;
mod read;
mod timeline;

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use parquet::file::metadata::ParquetMetaData;

pub(super) use budget::Handed;
pub(super) use decode::check_chunks;
use budget::Budgeted;

use super::finish::Finish;
use super::waves::{
    stream_waves, wave_target, waves, Wave, WaveCost, WaveOut, FIRST_STEP_BYTES,
};
use super::report::{Progress, ProgressFn};
use crate::array::LoadedBatch;
use crate::config::Tuning;
use crate::decode::gpu::{GpuDecodeReport, SnappyPlacement};
use crate::decode::host::HostDecoder;
use crate::error::{Error, Result};
use crate::io::{IoReport, RangeReader};
use crate::plan::{BatchSpan, ReadPlan};
use crate::source::ParquetFile;

/// The input of a device load: what it reads, where, into which batches, and how.
pub(super) struct DeviceLoad<'a> {
    /// The CUDA device.
    pub(super) ordinal: usize,
    pub(super) file: &'a ParquetFile,
    /// The file's path, shared by the batches.
    pub(super) path: &'a Arc<Path>,
    pub(super) metadata: &'a ParquetMetaData,
    pub(super) plan: &'a ReadPlan,
    /// Decodes on the host what the kernels do not.
    pub(super) decoder: &'a HostDecoder,
    /// The plan's batches, in order.
    pub(super) spans: &'a [BatchSpan],
    /// The row groups after which no batch goes on (where waves may be cut).
    pub(super) cuts: &'a HashSet<usize>,
    pub(super) tuning: &'a Tuning,
    /// Where SNAPPY pages are decompressed.
    pub(super) snappy: SnappyPlacement,
    /// A memory budget the load does not fit at once: its passes as waves.
    pub(super) budget: Option<Budget<'a>>,
    pub(super) finish: Finish<'a>,
    pub(super) progress: Option<&'a ProgressFn>,
}

/// A memory budget's passes, as waves, with what each costs.
#[derive(Clone, Copy)]
pub(super) struct Budget<'a> {
    pub(super) waves: &'a [Wave],
    pub(super) costs: &'a [WaveCost],
    pub(super) bytes: u64,
}

/// What a device load produced, in order: its batches, its reads, its decoding time (summed
/// over waves), and where its fields were decoded.
pub(super) struct Collected {
    pub(super) batches: Vec<LoadedBatch>,
    pub(super) io: IoReport,
    pub(super) decode_time: Duration,
    pub(super) gpu_decode: GpuDecodeReport,
}

/// Where a wave's result goes as it is done (not in order); false when no more are wanted.
pub(super) type Sink<'s> = dyn Fn(usize, Result<WaveOut>) -> bool + Sync + 's;

impl DeviceLoad<'_> {
    /// 1. The waves: the passes of a memory budget the load does not fit at once; else of
    ///    [`wave_target`] bytes for a load (`first_small`: false), with a small first one for a
    ///    stream; one wave of everything when the plan cannot be cut, or (unless the tuning
    ///    sets the wave size) for an object read by URL.
    pub(super) fn waves(&self, first_small: bool) -> Vec<Wave> {
        if let Some(b) = &self.budget {
            return b.waves.to_vec();
        }
        let plan = self.plan;
        // chunks decompressed by the device (SNAPPY unless sent to the host; GZIP; ZSTD and
        // LZ4 where nvCOMP is installed): their waves overlap reads with kernels;
        // host-decompressed codecs keep the cores busy that the reads need, and measured
        // slower in waves
        let (mut device_compressed, mut host_compressed) = (0u64, 0u64);
        for c in &plan.chunks {
            let codec = (self.metadata.row_group(c.row_group))
                .column(c.column)
                .compression();
            if codec == parquet::basic::Compression::UNCOMPRESSED {
                continue;
            }
            if crate::decode::gpu::device_decompresses(codec) {
                device_compressed += c.len();
            } else {
                host_compressed += c.len();
            }
        }
        let target = if self.file.is_remote() && self.tuning.wave_bytes.is_none() {
            // an object store's waves, read one after another, each waited a round trip and
            // had fewer GETs in flight than the whole file: read at once, decoded after
            // (benches/RESULTS.md, remote_device)
            u64::MAX
        } else {
            wave_target(
                plan.request_bytes(),
                device_compressed,
                host_compressed,
                self.tuning.wave_bytes,
            )
        };
        let ends = |rg| self.cuts.contains(&rg);
        let w = if first_small {
            stream_waves(plan, FIRST_STEP_BYTES, target, &ends)
        } else {
            waves(plan, target, &ends)
        };
        if w.is_empty() {
            vec![Wave::whole(plan)]
        } else {
            w
        }
    }

    /// 2–4. Reads and decodes `waves` through `reader`, finishes each wave's batches and hands
    /// them to `sink` as the wave is done (not in order). Several waves are pipelined
    /// ([`Self::pipelined`]); under a memory budget the load does not fit at once, a wave is
    /// read only once `handed` admits it (its estimated device bytes fit beside those of the
    /// waves read and not yet in the caller's hands).
    pub(super) fn run(
        &self,
        reader: &dyn RangeReader,
        waves: &[Wave],
        sink: &Sink<'_>,
        handed: &Handed,
    ) -> Result<()> {
        // the load's own decode streams: loads decoding at once (an engine's partitions)
        // neither queue behind nor wait for each other's kernels
        let held = crate::device::gpu(self.ordinal)?.decode_set();
        let set = held.index();
        // 4. the row filter and the views, applied as each wave is decoded (on the decoding
        // thread's own stream: the wave's kernels were waited for)
        let finished = |i: usize, r: Result<WaveOut>| {
            sink(
                i,
                r.and_then(|(b, g, io, d)| {
                    let t = Instant::now();
                    let b = crate::device::with_own_stream(|| self.finish.apply(b))?;
                    Ok((b, g, io, d + t.elapsed()))
                }),
            )
        };
        let sink: &Sink<'_> = match self.finish.needed() {
            true => &finished,
            false => sink,
        };
        if let Some(b) = &self.budget {
            if timeline::profile_requested() {
                let mb: Vec<String> = (b.costs.iter())
                    .map(|c| format!("{}+{}", c.read / 1_000_000, c.decode / 1_000_000))
                    .collect();
                eprintln!(
                    "passes under a budget of {} MB, estimated MB each (read+decode): {}",
                    b.bytes / 1_000_000,
                    mb.join(", ")
                );
            }
            let budgeted = Budgeted {
                handed,
                costs: b.costs,
                budget: b.bytes,
            };
            // a decoded wave holds only its batches until it is handed over
            // (a failed wave holds nothing)
            let decoded = |i: usize, r: Result<WaveOut>| {
                let bytes = match &r {
                    Ok((batches, ..)) => (batches.iter().filter_map(|b| b.as_device()))
                        .map(|b| b.device_bytes() as u64)
                        .sum(),
                    Err(_) => 0,
                };
                handed.decoded(i, bytes);
                sink(i, r)
            };
            return self.pipelined(reader, waves, &decoded, Some(&budgeted), set);
        }
        if waves.len() > 1 {
            return self.pipelined(reader, waves, sink, None, set);
        }
        // one wave: read, then decoded (on the load's streams, its chunks freed after)
        let r = self.read_chunks(reader).and_then(|(chunks, io)| {
            let t = Instant::now();
            let (b, g) = crate::device::with_decode_slot(set, 0, move || {
                let d = self.decode_part(&chunks, &self.plan.row_groups);
                drop(chunks);
                d
            })?;
            Ok((b, g, io, t.elapsed()))
        });
        sink(0, r);
        Ok(())
    }

    /// A load: [`Self::run`] over the waves of [`Self::waves`], every wave's result put in
    /// order. Large loads are pipelined: `io.wall` then sums the reads and `decode_time` the
    /// decoding of every wave; they overlap, so together they can exceed the load's time.
    pub(super) fn collect(&self, reader: &dyn RangeReader) -> Result<Collected> {
        let waves = self.waves(false);
        let results: Mutex<Vec<Option<Result<WaveOut>>>> =
            Mutex::new((0..waves.len()).map(|_| None).collect());
        self.notify(0, 0);
        // a load collects every wave as it is decoded: handed over then (the caller gets them
        // all, so its memory is the whole output)
        let handed = Handed::default();
        let sink = |i: usize, r: Result<WaveOut>| {
            let ok = r.is_ok();
            if let Some(slot) = results.lock().unwrap_or_else(|p| p.into_inner()).get_mut(i) {
                *slot = Some(r);
            }
            handed.release(i);
            ok
        };
        self.run(reader, &waves, &sink, &handed)?;
        let mut out = Collected {
            batches: Vec::new(),
            io: IoReport::default(),
            decode_time: Duration::ZERO,
            gpu_decode: GpuDecodeReport::default(),
        };
        let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
        // the first error in wave order, else the first wave missing
        for (i, r) in results.into_iter().enumerate() {
            let (b, g, x, d) = r.unwrap_or_else(|| {
                Err(Error::Decode {
                    path: self.file.path().to_path_buf(),
                    row_group: waves[i].row_groups.first().copied(),
                    column: None,
                    reason: "a wave of the pipelined device load was neither read nor decoded"
                        .into(),
                })
            })?;
            out.batches.extend(b);
            out.gpu_decode.absorb(g);
            out.io.absorb(x);
            out.decode_time += d;
        }
        self.notify(self.plan.request_bytes(), self.plan.row_groups.len());
        Ok(out)
    }

    /// Reports progress to the callback, if one was set.
    fn notify(&self, bytes_read: u64, row_groups_done: usize) {
        if let Some(f) = self.progress {
            f(Progress::of(self.plan, bytes_read, row_groups_done))
        }
    }
}
