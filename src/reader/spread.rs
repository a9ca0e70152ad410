//! Several GPUs: one file's load spread over devices ([`ReaderBuilder::build_spread`],
//! [`SpreadReader`]); the workers and their ordering are [`InOrder`]'s.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::datatypes::SchemaRef;

use super::in_order::InOrder;
use super::{LoadReport, ParquetGpuReader, ReaderBuilder};
use crate::array::LoadedBatch;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::plan::devices::{spread_passes, DeviceBudget, DeviceSpread};

/// A load spread over several devices ([`ReaderBuilder::build_spread`]).
///
/// The load is cut into passes of whole row groups from the footer
/// ([`crate::plan::passes`]), at least two per device where the row groups allow (so that
/// each device has its next pass while the caller takes the last one), each within half the
/// smallest device budget; [`crate::plan::devices::spread_passes`] gives each pass a device.
/// Each device runs its passes on a thread of its own — a pass is a load of its row groups on
/// its device under that device's budget, with every other option of the builder — and the
/// batches come in load order, each on the device that decoded it
/// ([`LoadedBatch::location`]). A device runs at most one pass ahead of the caller: its
/// batches not yet taken hold its memory. A pass that fails ends the stream with an error
/// naming its device and its row groups; nothing after it is yielded.
///
/// Not yet: several files, row selections and access plans (their rows are counted over the
/// whole selection), and row groups larger than half a device's budget (read in pieces by a
/// single device's load): such loads are refused with an error saying so.
#[derive(Clone)]
pub struct SpreadReader {
    builder: ReaderBuilder,
    /// The load as the first device plans it (footer, plan, schema).
    first: ParquetGpuReader,
    /// Its footer, handed to each pass's load.
    meta: Arc<crate::metadata::FileMetadata>,
    devices: Vec<Device>,
    spread: Arc<DeviceSpread>,
}

impl std::fmt::Debug for SpreadReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpreadReader")
            .field("devices", &self.devices)
            .field("spread", &self.spread)
            .finish()
    }
}

/// What one device did in a spread load.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeviceWork {
    /// The device.
    pub device: String,
    /// Passes it loaded.
    pub passes: usize,
    /// Rows of its batches.
    pub rows: u64,
    /// Bytes it read.
    pub bytes_read: u64,
    /// Bytes of its batches' Arrow buffers.
    pub output_bytes: u64,
    /// Its passes' load time, summed.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub time: Duration,
}

/// What [`SpreadReader::load`] produced.
#[derive(Debug, Clone)]
pub struct SpreadLoaded {
    /// The batches, in load order, each on the device that decoded it.
    pub batches: Vec<LoadedBatch>,
    /// Their schema.
    pub schema: SchemaRef,
    /// Per device, in the order given.
    pub devices: Vec<DeviceWork>,
    /// Wall time of the whole load.
    pub wall: Duration,
}

impl ReaderBuilder {
    /// Several GPUs: a reader whose load is spread over the CUDA devices `ordinals` (each named
    /// once), each pass of row groups read, decoded and held by one of them (see
    /// [`SpreadReader`]). Each device's budget is [`with_memory_budget`](Self::with_memory_budget)
    /// (or `CUPARQUET_MEMORY_BUDGET`), else 80% of its free memory. The footer is read and
    /// the load planned here.
    pub fn build_spread(self, ordinals: &[usize]) -> Result<SpreadReader> {
        crate::plan::devices::device_budgets(ordinals, 0)?;
        SpreadReader::open(self, ordinals.iter().map(|&n| Device::Cuda(n)).collect())
    }
}

impl SpreadReader {
    /// `devices` may repeat a device (tests spread a load over host decoders).
    pub(crate) fn open(builder: ReaderBuilder, devices: Vec<Device>) -> Result<Self> {
        let path = builder.path.clone();
        if builder.rows.is_some() {
            return Err(Error::Unsupported {
                path,
                what: "a row selection or an access plan with several devices (not yet: load \
                       on one device)"
                    .into(),
            });
        }
        let first = builder.clone().with_device(devices[0]).build()?;
        let meta = first.metadata();
        let plan = first.plan();
        let mut budgets = Vec::with_capacity(devices.len());
        for (i, d) in devices.iter().enumerate() {
            let budget = match (builder.memory_budget, d) {
                (Some(b), _) => b,
                (None, Device::Cuda(n)) => match std::env::var(super::builder::ENV_MEMORY_BUDGET)
                {
                    Ok(v) => crate::config::parse_size(super::builder::ENV_MEMORY_BUDGET, &v)?,
                    Err(_) => {
                        let (free, _) = crate::device::gpu(*n)?.memory_info()?;
                        (free as f64 * super::builder::DEFAULT_MEMORY_BUDGET_SHARE) as u64
                    }
                },
                (None, _) => u64::MAX / 4,
            };
            budgets.push(DeviceBudget {
                ordinal: match d {
                    Device::Cuda(n) => *n,
                    _ => i,
                },
                budget,
            });
        }
        let smallest = budgets.iter().map(|b| b.budget).min().unwrap_or(0);
        // passes within half the smallest budget, and at least two a device where the row
        // groups allow
        let total: u64 = plan
            .row_groups
            .iter()
            .map(|&rg| crate::plan::passes::row_group_cost(plan, &meta.metadata, rg).device_bytes)
            .sum();
        let share = (total / (2 * devices.len() as u64)).max(1);
        let pass_budget = (smallest / 2).min(share.max(largest_need(plan, meta)));
        let passes = crate::plan::plan_passes(
            &path,
            plan,
            &meta.metadata,
            pass_budget,
            builder.batch_rows as u64,
            builder.keep_dictionaries,
        )?;
        if passes.passes.iter().any(|p| p.piece.is_some()) {
            return Err(Error::Unsupported {
                path,
                what: format!(
                    "a row group larger than half a device's budget ({} bytes) with several \
                     devices (not yet: load on one device, which reads it in pieces)",
                    smallest / 2
                ),
            });
        }
        let spread = spread_passes(&[(path, passes)], &budgets)?;
        let meta = Arc::new(first.metadata().clone());
        Ok(SpreadReader {
            builder,
            meta,
            first,
            devices,
            spread: Arc::new(spread),
        })
    }

    /// Which device takes each pass.
    pub fn spread(&self) -> &DeviceSpread {
        &self.spread
    }

    /// The load's Arrow schema.
    pub fn schema(&self) -> &SchemaRef {
        self.first.schema()
    }

    /// The device of each share of [`spread`](Self::spread), in words (`cuda:N`).
    fn device_names(&self) -> Vec<String> {
        self.devices.iter().map(|d| d.to_string()).collect()
    }

    /// Runs pass `k` on its device: its row groups' load, with its device's budget.
    fn run_pass(&self, k: usize) -> Result<(Vec<LoadedBatch>, LoadReport)> {
        let p = &self.spread.passes[k];
        let share = &self.spread.shares[p.device];
        let device = self.devices[p.device];
        let fail = |e: Error| Error::Device {
            device: device.to_string(),
            reason: format!(
                "pass {k} (row groups {}) of {}: {e}",
                p.row_groups
                    .iter()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                self.builder.path.display()
            ),
        };
        let reader = self
            .builder
            .clone()
            .with_device(device)
            .with_row_groups(p.row_groups.iter().copied())
            .with_memory_budget(share.device.budget)
            .with_metadata(Arc::clone(&self.meta))
            .build()
            .map_err(fail)?;
        let loaded = reader.load().map_err(fail)?;
        Ok((loaded.batches, loaded.report))
    }

    /// The batches in load order, each pass loaded on its device (see [`SpreadReader`]).
    pub fn batches(&self) -> SpreadBatches {
        let worker_of: Vec<usize> = self.spread.passes.iter().map(|p| p.device).collect();
        let me = self.clone();
        let started = Instant::now();
        let passes = InOrder::start(worker_of, self.device_names(), 1, move |_, k| {
            let t = Instant::now();
            me.run_pass(k).map(|(b, r)| (b, r, t.elapsed()))
        });
        SpreadBatches {
            passes,
            pending: Vec::new().into_iter(),
            work: self.empty_work(),
            spread: Arc::clone(&self.spread),
            started,
        }
    }

    fn empty_work(&self) -> Vec<DeviceWork> {
        self.device_names()
            .into_iter()
            .map(|device| DeviceWork {
                device,
                passes: 0,
                rows: 0,
                bytes_read: 0,
                output_bytes: 0,
                time: Duration::ZERO,
            })
            .collect()
    }

    /// Every batch, in load order, and what each device did.
    pub fn load(&self) -> Result<SpreadLoaded> {
        let mut s = self.batches();
        let batches = s.by_ref().collect::<Result<Vec<_>>>()?;
        Ok(SpreadLoaded {
            batches,
            schema: self.schema().clone(),
            devices: s.work.clone(),
            wall: s.started.elapsed(),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.builder.path
    }
}

/// The largest device bytes any one row group of `plan` needs: passes are at least that.
fn largest_need(plan: &crate::plan::ReadPlan, meta: &crate::metadata::FileMetadata) -> u64 {
    plan.row_groups
        .iter()
        .map(|&rg| {
            let c = crate::plan::passes::row_group_cost(plan, &meta.metadata, rg);
            c.device_bytes + c.read_bytes
        })
        .max()
        .unwrap_or(0)
}

/// The stream of [`SpreadReader::batches`].
pub struct SpreadBatches {
    passes: InOrder<(Vec<LoadedBatch>, LoadReport, Duration)>,
    pending: std::vec::IntoIter<LoadedBatch>,
    work: Vec<DeviceWork>,
    spread: Arc<DeviceSpread>,
    started: Instant,
}

impl std::fmt::Debug for SpreadBatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpreadBatches")
            .field("work", &self.work)
            .finish()
    }
}

impl SpreadBatches {
    /// What each device did so far.
    pub fn work(&self) -> &[DeviceWork] {
        &self.work
    }
}

impl Iterator for SpreadBatches {
    type Item = Result<LoadedBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(b) = self.pending.next() {
                return Some(Ok(b));
            }
            let (k, (batches, report, took)) = match self.passes.next()? {
                Ok(v) => v,
                Err(e) => return Some(Err(e)),
            };
            let w = &mut self.work[self.spread.passes[k].device];
            w.passes += 1;
            w.rows += report.rows;
            w.bytes_read += report.bytes_read;
            w.output_bytes += report.output_bytes;
            w.time += took;
            self.pending = batches.into_iter();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/lineitem-sample.parquet")
    }

    /// The spreading over host decoders (the same code as over GPUs, one load per pass on its
    /// "device"): batches in load order, equal to one load, each device's work counted.
    #[test]
    fn a_load_spread_over_decoders_equals_one_load() {
        let one = ParquetGpuReader::builder(sample())
            .with_device(Device::Host)
            .with_batch_rows(3000)
            .build()
            .unwrap()
            .load()
            .unwrap();
        let s = SpreadReader::open(
            ParquetGpuReader::builder(sample())
                .with_batch_rows(3000)
                .with_memory_budget(4 << 20),
            vec![Device::Host, Device::Host],
        )
        .unwrap();
        // 4 row groups, ~1.3 MiB each: passes of one row group, alternating
        let device_of: Vec<usize> = s.spread().passes.iter().map(|p| p.device).collect();
        assert_eq!(device_of, [0, 1, 0, 1]);
        let got = s.load().unwrap();
        let rows = |b: &[LoadedBatch]| -> Vec<(usize, u64, u64)> {
            b.iter()
                .flat_map(|b| b.rows().iter().map(|r| (r.row_group, r.rows.start, r.rows.end)))
                .collect()
        };
        assert_eq!(rows(&got.batches), rows(&one.batches));
        let host = |b: &[LoadedBatch]| -> Vec<arrow::record_batch::RecordBatch> {
            b.iter().map(|b| b.as_host().unwrap().clone()).collect()
        };
        assert_eq!(host(&got.batches), host(&one.batches));
        assert_eq!(got.devices.len(), 2);
        assert_eq!((got.devices[0].passes, got.devices[1].passes), (2, 2));
        assert_eq!(got.devices[0].rows + got.devices[1].rows, 20_000);
        assert!(got.devices.iter().all(|d| d.bytes_read > 0 && d.output_bytes > 0));
    }

    #[test]
    fn a_failing_pass_names_its_device_and_row_groups() {
        let dir = tempfile::tempdir().unwrap();
        // the file vanishes after planning: the first pass fails, naming its device
        let moved = dir.path().join("sample.parquet");
        std::fs::copy(sample(), &moved).unwrap();
        let s2 = SpreadReader::open(
            ParquetGpuReader::builder(&moved).with_memory_budget(4 << 20),
            vec![Device::Host, Device::Host],
        )
        .unwrap();
        std::fs::write(&moved, b"not parquet any more").unwrap();
        let e = s2.load().unwrap_err().to_string();
        assert!(
            e.contains("host") && e.contains("pass 0 (row groups 0)") && e.contains("sample.parquet"),
            "{e}"
        );
        // a row selection is refused for now, saying so
        let sel = crate::plan::RowSelection::from(vec![crate::plan::RowSelector::select(10)]);
        let e = SpreadReader::open(
            ParquetGpuReader::builder(sample()).with_row_selection(sel),
            vec![Device::Host, Device::Host],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("row selection") && e.contains("several devices"), "{e}");
    }
}
