//! Several GPUs: a scan spread over devices
//! ([`ScanBuilder::with_devices`](super::ScanBuilder::with_devices)), each pass of row groups
//! loaded by one device; the workers and their ordering are [`InOrder`]'s. The builder opens
//! the files and hands them over ([`SpreadInput`]) with the way to open one pass's file.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::datatypes::SchemaRef;

use super::in_order::InOrder;
use super::{FileScan, LoadReport, Scan};
use crate::array::{LoadedBatch, Location};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::io::{IoReport, RangeReader};
use crate::plan::devices::{spread_passes, DeviceBudget, DeviceSpread};

/// How a scan over several devices loads: its passes, each given a device
/// ([`crate::plan::devices::spread_passes`]), and what each pass reads. See
/// [`Scan`](super::Scan).
pub(crate) struct Spread {
    open_pass: OpenPass,
    /// The files, each with its footer (handed to each of its passes' loads).
    files: Vec<(PathBuf, Arc<crate::metadata::FileMetadata>)>,
    /// The schema of the batches (the files' merged).
    schema: SchemaRef,
    devices: Vec<Device>,
    spread: DeviceSpread,
    /// Per pass of [`spread`](Self::spread): the rows of each of its row groups it reads,
    /// where not every row (a piece, or a load with a row selection or access plan).
    pass_rows: Vec<Option<crate::plan::RowRanges>>,
}

impl std::fmt::Debug for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spread")
            .field("devices", &self.devices)
            .field("spread", &self.spread)
            .finish()
    }
}

/// What one device did in a scan spread over several.
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

/// Opens the file scan of one pass of a spread (the scan's options, for `PassFile`).
pub(super) type OpenPass = Arc<dyn Fn(PassFile<'_>) -> Result<FileScan> + Send + Sync>;

/// One pass of a spread, as a file scan of its own: the file, its footer, the device, the row
/// groups, the device's budget, and the rows of each row group it reads where not all.
pub(super) struct PassFile<'a> {
    pub(super) path: &'a std::path::Path,
    pub(super) metadata: Arc<crate::metadata::FileMetadata>,
    pub(super) device: Device,
    pub(super) row_groups: &'a [usize],
    pub(super) budget: u64,
    pub(super) rows: Option<crate::plan::RowRanges>,
}

/// What a spread is opened from: the scan's files, opened (footers read, plans made) on the
/// first device, their merged schema, the devices with their memory budgets, and how passes
/// are cut and opened.
pub(super) struct SpreadInput {
    pub(super) files: Vec<PathBuf>,
    pub(super) opened: Vec<FileScan>,
    pub(super) schema: SchemaRef,
    /// Per file: whether a row selection or an access plan chose its rows (each pass then
    /// reads the selection's rows of its row groups).
    pub(super) selected: Vec<bool>,
    pub(super) devices: Vec<Device>,
    /// Each device's memory budget.
    pub(super) budgets: Vec<u64>,
    pub(super) batch_rows: u64,
    pub(super) keep_dictionaries: bool,
    /// Whether the page index was read (a row group too large for a pass is cut by it).
    pub(super) page_index: bool,
    pub(super) open_pass: OpenPass,
}

/// A spread opened, or the page index needed to cut a row group too large for a pass (the
/// builder reads it and opens again).
pub(super) enum Opened {
    Scan(Scan),
    NeedsPageIndex,
    /// With the page index read, row groups `row_groups` of file `file` (footer `meta`, the
    /// load reading leaves `leaves`) have none: an offset index built from their page headers cuts them, or `error` stands.
    NeedsHeaderIndex {
        file: usize,
        row_groups: Vec<usize>,
        leaves: Vec<usize>,
        meta: Arc<crate::metadata::FileMetadata>,
        error: Error,
    },
}

impl Spread {
    /// The scan of `input.files` spread over `input.devices` (which may repeat a device: tests
    /// spread a load over host decoders): passes planned within a share of the smallest
    /// budget, and given to the devices.
    pub(super) fn open(input: SpreadInput) -> Result<Opened> {
        let SpreadInput {
            files,
            opened: readers,
            schema,
            selected,
            devices,
            budgets,
            batch_rows,
            keep_dictionaries,
            page_index,
            open_pass,
        } = input;
        let budgets: Vec<DeviceBudget> = (devices.iter().zip(budgets).enumerate())
            .map(|(i, (d, budget))| DeviceBudget {
                ordinal: match d {
                    Device::Cuda(n) => *n,
                    _ => i,
                },
                budget,
            })
            .collect();
        let smallest = budgets.iter().map(|b| b.budget).min().unwrap_or(0);
        // passes within half the smallest budget, and at least two a device where the row
        // groups allow
        let (mut total, mut largest) = (0u64, 0u64);
        for r in &readers {
            let (plan, meta) = (r.plan(), &r.metadata().metadata);
            for &rg in &plan.row_groups {
                let c = crate::plan::passes::row_group_cost(plan, meta, rg);
                total += c.device_bytes;
                largest = largest.max(c.device_bytes + c.read_bytes);
            }
        }
        let share = (total / (2 * devices.len() as u64)).max(1);
        let pass_budget = (smallest / 2).min(share.max(largest));
        let mut plans = Vec::with_capacity(files.len());
        let mut pass_rows = Vec::new();
        for (i, ((path, r), &selected)) in files.iter().zip(&readers).zip(&selected).enumerate() {
            let passes = match crate::plan::plan_passes(
                path,
                r.plan(),
                &r.metadata().metadata,
                pass_budget,
                batch_rows,
                keep_dictionaries,
            ) {
                // a row group too large for a pass: cut into pieces by pages, with the page
                // index (read now when it was not asked for)
                Err(Error::MemoryBudget { .. }) if !page_index => {
                    return Ok(Opened::NeedsPageIndex);
                }
                // ... and where the file has none, by one built from the page headers
                Err(Error::MemoryBudget {
                    path,
                    row_group,
                    needed,
                    ..
                }) if !crate::plan::has_offset_index(&r.metadata().metadata, row_group) => {
                    let row_groups = crate::plan::unindexed_for_budget(
                        r.plan(),
                        &r.metadata().metadata,
                        row_group,
                        pass_budget,
                    );
                    let scaled = (needed as u128 * smallest as u128)
                        .div_ceil(pass_budget.max(1) as u128);
                    return Ok(Opened::NeedsHeaderIndex {
                        file: i,
                        row_groups,
                        leaves: r.plan().leaves.clone(),
                        meta: Arc::new(r.metadata().clone()),
                        error: Error::MemoryBudget {
                            path,
                            row_group,
                            needed: u64::try_from(scaled).unwrap_or(u64::MAX),
                            budget: smallest,
                        },
                    });
                }
                // passes are planned within a share of the smallest budget: the error names
                // the budget asked for, and the one whose share would hold the pass
                Err(Error::MemoryBudget {
                    path,
                    row_group,
                    needed,
                    ..
                }) => {
                    let scaled = (needed as u128 * smallest as u128)
                        .div_ceil(pass_budget.max(1) as u128);
                    return Err(Error::MemoryBudget {
                        path,
                        row_group,
                        needed: u64::try_from(scaled).unwrap_or(u64::MAX),
                        budget: smallest,
                    });
                }
                other => other?,
            };
            for p in &passes.passes {
                pass_rows.push(match (&p.piece, &r.plan().rows) {
                    (Some(piece), _) => piece.rows.clone(),
                    // the selection's rows of the pass's row groups (a filter's page pruning
                    // alone is left to each pass's own plan)
                    (None, Some(rows)) if selected => Some(
                        (p.row_groups.iter())
                            .filter_map(|rg| rows.get(rg).map(|v| (*rg, v.clone())))
                            .collect(),
                    ),
                    (None, _) => None,
                });
            }
            plans.push((path.clone(), passes));
        }
        let spread = spread_passes(&plans, &budgets)?;
        let metas = files
            .into_iter()
            .zip(&readers)
            .map(|(p, r)| (p, Arc::new(r.metadata().clone())))
            .collect();
        let me = Spread {
            open_pass,
            files: metas,
            schema: schema.clone(),
            devices,
            spread,
            pass_rows,
        };
        Ok(Opened::Scan(Scan {
            files: readers,
            file_schema: schema.clone(),
            schema,
            spread: Some(Arc::new(me)),
            partitions: None,
        }))
    }

    /// Which device takes each pass.
    pub(super) fn passes(&self) -> &DeviceSpread {
        &self.spread
    }

    /// Where the first device's batches land.
    pub(super) fn location(&self) -> Location {
        match self.devices.first() {
            Some(Device::Cuda(n)) => Location::Cuda(*n),
            _ => Location::Host,
        }
    }

    /// The device of each share of [`spread`](Self::spread), in words (`cuda:N`).
    fn device_names(&self) -> Vec<String> {
        self.devices.iter().map(|d| d.to_string()).collect()
    }

    /// Runs pass `k` on its device: its row groups' load, with its device's budget.
    fn run_pass(
        &self,
        k: usize,
        reader: Option<&dyn RangeReader>,
    ) -> Result<(Vec<LoadedBatch>, LoadReport)> {
        let p = &self.spread.passes[k];
        let share = &self.spread.shares[p.device];
        let device = self.devices[p.device];
        let (path, meta) = &self.files[p.file];
        let fail = |e: Error| Error::Device {
            device: device.to_string(),
            reason: format!(
                "pass {k} (row groups {}) of {}: {e}",
                p.row_groups
                    .iter()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                path.display()
            ),
        };
        let file = (self.open_pass)(PassFile {
            path,
            metadata: Arc::clone(meta),
            device,
            row_groups: &p.row_groups,
            budget: share.device.budget,
            rows: self.pass_rows[k].clone(),
        })
        .map_err(fail)?;
        let loaded = match reader {
            Some(r) => file.load_with(r),
            None => file.load(),
        }
        .map_err(fail)?;
        let batches = if self.files.len() > 1 {
            loaded
                .batches
                .into_iter()
                .map(|b| b.with_schema(&self.schema))
                .collect()
        } else {
            loaded.batches
        };
        Ok((batches, loaded.report))
    }

    /// The batches in load order, each pass loaded on its device by a thread of that device,
    /// reading through `reader` where given.
    pub(super) fn batches(self: &Arc<Self>, reader: Option<Arc<dyn RangeReader>>) -> SpreadBatches {
        let worker_of: Vec<usize> = self.spread.passes.iter().map(|p| p.device).collect();
        let me = Arc::clone(self);
        let passes = InOrder::start(worker_of, self.device_names(), 1, move |_, k| {
            let t = Instant::now();
            me.run_pass(k, reader.as_deref())
                .map(|(b, r)| (b, r, t.elapsed()))
        });
        SpreadBatches {
            passes,
            pending: Vec::new().into_iter(),
            work: self.empty_work(),
            reports: Vec::new(),
            spread: Arc::clone(self),
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

    /// Every batch, in load order, each pass's report and what each device did. Through a
    /// borrowed `reader`, the passes are loaded one after another on this thread.
    pub(super) fn load(
        self: &Arc<Self>,
        reader: Option<&dyn RangeReader>,
    ) -> Result<(Vec<LoadedBatch>, Vec<LoadReport>, Vec<DeviceWork>)> {
        let Some(reader) = reader else {
            let mut s = self.batches(None);
            let batches = s.by_ref().collect::<Result<Vec<_>>>()?;
            return Ok((batches, std::mem::take(&mut s.reports), s.work.clone()));
        };
        let mut work = self.empty_work();
        let (mut batches, mut reports) = (Vec::new(), Vec::new());
        for k in 0..self.spread.passes.len() {
            let t = Instant::now();
            let (b, r) = self.run_pass(k, Some(reader))?;
            count(&mut work[self.spread.passes[k].device], &r, t.elapsed());
            batches.extend(b);
            reports.push(r);
        }
        Ok((batches, reports, work))
    }
}

/// Counts a pass's load into its device's work.
fn count(w: &mut DeviceWork, report: &LoadReport, took: Duration) {
    w.passes += 1;
    w.rows += report.rows;
    w.bytes_read += report.bytes_read;
    w.output_bytes += report.output_bytes;
    w.time += took;
}

/// The stream of a spread scan: its passes' batches in load order.
pub(crate) struct SpreadBatches {
    passes: InOrder<(Vec<LoadedBatch>, LoadReport, Duration)>,
    pending: std::vec::IntoIter<LoadedBatch>,
    work: Vec<DeviceWork>,
    /// The reports of the passes handed over so far.
    reports: Vec<LoadReport>,
    spread: Arc<Spread>,
}

impl std::fmt::Debug for SpreadBatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpreadBatches")
            .field("work", &self.work)
            .finish_non_exhaustive()
    }
}

impl SpreadBatches {
    /// What each device did so far.
    pub(super) fn work(&self) -> &[DeviceWork] {
        &self.work
    }

    /// What the passes handed over so far read.
    pub(super) fn io_report(&self) -> IoReport {
        let mut io = IoReport::default();
        for r in &self.reports {
            io.absorb(r.io.clone());
        }
        io
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
            count(&mut self.work[self.spread.spread.passes[k].device], &report, took);
            self.reports.push(report);
            self.pending = batches.into_iter();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    use crate::device::parse_device_list;
    use crate::scan::{Scan, ScanBuilder};

    /// A scan of `files` spread over `n` host decoders (the same code as over GPUs).
    fn over_hosts(b: ScanBuilder, files: Vec<PathBuf>, n: usize) -> Result<Scan> {
        let access = vec![None; files.len()];
        crate::scan::builder::open_spread(b, files, access, vec![None; n], vec![Device::Host; n])
    }

    #[test]
    fn device_lists_parse_as_users_write_them() {
        assert_eq!(parse_device_list("cuda:1, gpu:0").unwrap(), [1, 0]);
        assert_eq!(parse_device_list("0,2").unwrap(), [0, 2]);
        assert_eq!(parse_device_list("cuda").unwrap(), [0]);
        for (bad, why) in [
            ("cuda:0,0", "named twice"),
            ("cuda:0,host", "CUDA devices"),
            ("tpu:1", "expected"),
            ("", "expected"),
        ] {
            let e = parse_device_list(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        if crate::device::probe_cuda().devices == 0 {
            assert!(parse_device_list("ALL").is_err());
        }
    }

    fn sample() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/lineitem-sample.parquet")
    }

    /// The spreading over host decoders (the same code as over GPUs, one load per pass on its
    /// "device"): batches in load order, equal to one load, each device's work counted.
    #[test]
    fn a_load_spread_over_decoders_equals_one_load() {
        let one = Scan::builder(sample())
            .with_device(Device::Host)
            .with_batch_rows(3000)
            .build()
            .unwrap()
            .load()
            .unwrap();
        let s = over_hosts(Scan::builder(sample())
                .with_batch_rows(3000)
                .with_memory_budget(4 << 20),
            vec![sample()], 2)
        .unwrap();
        // 4 row groups, ~1.3 MiB each: passes of one row group, alternating
        let device_of: Vec<usize> = s.spread().unwrap().passes.iter().map(|p| p.device).collect();
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
        assert_eq!(got.report.devices.len(), 2);
        assert_eq!((got.report.devices[0].passes, got.report.devices[1].passes), (2, 2));
        assert_eq!(got.report.devices[0].rows + got.report.devices[1].rows, 20_000);
        assert!(got.report.devices.iter().all(|d| d.bytes_read > 0 && d.output_bytes > 0));
    }

    #[test]
    fn a_budget_too_small_for_the_spread_names_the_budget_asked_for() {
        // passes are planned within half of each device's budget (the next one is read while
        // one decodes): the error names the budget the caller gave, and what it would need
        let budget = 1 << 20;
        let e = over_hosts(Scan::builder(sample()).with_memory_budget(budget),
            vec![sample()], 2)
        .unwrap_err();
        let Error::MemoryBudget {
            budget: b, needed, ..
        } = &e
        else {
            panic!("{e}");
        };
        assert_eq!(*b, budget, "{e}");
        assert!(*needed > budget, "{e}");
        assert!(e.to_string().contains("budget of 1.0 MiB"), "{e}");
        // and that much is enough
        let s = over_hosts(Scan::builder(sample()).with_memory_budget(*needed),
            vec![sample()], 2);
        assert!(s.is_ok(), "{needed}: {:?}", s.err());
    }

    #[test]
    fn the_passes_of_several_files_are_spread_as_one_load() {
        // the sample three times: 12 row groups, passes spread over three decoders, batches
        // in file order, each file's rows complete
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<PathBuf> = (0..3)
            .map(|i| {
                let p = dir.path().join(format!("part-{i}.parquet"));
                std::fs::copy(sample(), &p).unwrap();
                p
            })
            .collect();
        let s = over_hosts(Scan::builder(Vec::<PathBuf>::new()).with_memory_budget(4 << 20),
            files.clone(), 3)
        .unwrap();
        assert_eq!(s.files().len(), 3);
        let got = s.load().unwrap();
        let order: Vec<(PathBuf, usize)> = got
            .batches
            .iter()
            .map(|b| (b.file().to_path_buf(), b.rows()[0].row_group))
            .collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted, "batches out of file and row-group order");
        assert_eq!(got.batches.iter().map(|b| b.num_rows() as u64).sum::<u64>(), 60_000);
        assert!(got.report.devices.iter().all(|d| d.passes >= 2), "{:?}", got.report.devices);
        assert!(got.batches.iter().all(|b| b.schema() == *s.schema()));
    }

    #[test]
    fn a_load_that_selects_nothing_is_empty() {
        let s = over_hosts(Scan::builder(sample())
                .with_filter("l_orderkey < 0")
                .with_memory_budget(4 << 20),
            vec![sample()], 2)
        .unwrap();
        assert!(s.spread().unwrap().passes.is_empty());
        let got = s.load().unwrap();
        assert!(got.batches.is_empty());
        assert!(got.report.devices.iter().all(|d| d.passes == 0));
    }

    #[test]
    fn a_failing_pass_names_its_device_and_row_groups() {
        let dir = tempfile::tempdir().unwrap();
        // the file vanishes after planning: the first pass fails, naming its device
        let moved = dir.path().join("sample.parquet");
        std::fs::copy(sample(), &moved).unwrap();
        let s2 = over_hosts(Scan::builder(&moved).with_memory_budget(4 << 20),
            vec![moved.clone()], 2)
        .unwrap();
        std::fs::write(&moved, b"not parquet any more").unwrap();
        let e = s2.load().unwrap_err().to_string();
        assert!(
            e.contains("host") && e.contains("pass 0 (row groups 0)") && e.contains("sample.parquet"),
            "{e}"
        );
    }

    /// Every batch of a load, as one host batch, and the rows each came from, merged.
    fn concat(b: &[LoadedBatch]) -> (arrow::record_batch::RecordBatch, Vec<(usize, u64, u64)>) {
        let host: Vec<_> = b.iter().map(|b| b.as_host().unwrap().clone()).collect();
        let mut rows: Vec<(usize, u64, u64)> = Vec::new();
        for r in b.iter().flat_map(|b| b.rows().iter()) {
            match rows.last_mut() {
                Some(last) if last.0 == r.row_group && last.2 == r.rows.start => last.2 = r.rows.end,
                _ => rows.push((r.row_group, r.rows.start, r.rows.end)),
            }
        }
        let schema = host[0].schema();
        (arrow::compute::concat_batches(&schema, &host).unwrap(), rows)
    }

    fn one_host_load(b: ScanBuilder) -> Vec<LoadedBatch> {
        b.with_device(Device::Host).build().unwrap().load().unwrap().batches
    }

    #[test]
    fn row_selections_and_access_plans_are_spread_with_their_rows() {
        use crate::plan::{RowGroupAccess, RowSelection, RowSelector};
        let sel = || {
            RowSelection::from(vec![
                RowSelector::skip(1500),
                RowSelector::select(7000),
                RowSelector::skip(5000),
                RowSelector::select(3),
                RowSelector::skip(1),
                RowSelector::select(1200),
            ])
        };
        let access = || {
            vec![
                RowGroupAccess::Skip,
                RowGroupAccess::Scan,
                RowGroupAccess::Selection(RowSelection::from(vec![
                    RowSelector::skip(10),
                    RowSelector::select(20),
                ])),
                RowGroupAccess::Scan,
            ]
        };
        type Make<'a> = Box<dyn Fn() -> ScanBuilder + 'a>;
        let builders: [(&str, Make<'_>); 5] = [
            (
                "selection",
                Box::new(|| Scan::builder(sample()).with_row_selection(sel())),
            ),
            (
                "selection over row groups 1..4",
                Box::new(|| {
                    Scan::builder(sample())
                        .with_row_groups([1, 2, 3])
                        .with_row_selection(sel())
                }),
            ),
            (
                "access plan",
                Box::new(|| Scan::builder(sample()).with_access_plan(access())),
            ),
            (
                "row filter",
                Box::new(|| {
                    Scan::builder(sample()).with_row_filter("l_quantity < 10")
                }),
            ),
            (
                "row filter over a selection",
                Box::new(|| {
                    Scan::builder(sample())
                        .with_row_selection(sel())
                        .with_row_filter("l_quantity < 10")
                }),
            ),
        ];
        for (what, b) in builders {
            let one = one_host_load(b().with_batch_rows(2000));
            let s = over_hosts(b().with_batch_rows(2000).with_memory_budget(4 << 20),
                vec![sample()], 2)
            .unwrap();
            assert!(s.spread().unwrap().passes.len() >= 2, "{what}: {:?}", s.spread().unwrap());
            let got = s.load().unwrap();
            assert_eq!(concat(&got.batches), concat(&one), "{what}");
            let rows: u64 = got.report.devices.iter().map(|d| d.rows).sum();
            assert_eq!(rows, one.iter().map(|b| b.num_rows() as u64).sum::<u64>(), "{what}");
        }
    }

    /// A file of one row group of `rows` rows, pages of about 1000 rows, with or without the
    /// page index.
    fn one_big_row_group_with(rows: i64, page_index: bool) -> tempfile::NamedTempFile {
        use arrow::array::{ArrayRef, Int64Array, StringArray};
        let f = tempfile::NamedTempFile::new().unwrap();
        let batch = arrow::record_batch::RecordBatch::try_from_iter([
            ("a", Arc::new(Int64Array::from_iter_values(0..rows)) as ArrayRef),
            (
                "s",
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| format!("row {}", i * 7919 % 100_003)),
                )) as ArrayRef,
            ),
        ])
        .unwrap();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(rows as usize))
            .set_data_page_row_count_limit(1000)
            .set_write_batch_size(500)
            .set_dictionary_enabled(false);
        let props = if page_index {
            props
        } else {
            props
                .set_statistics_enabled(parquet::file::properties::EnabledStatistics::Chunk)
                .set_offset_index_disabled(true)
        };
        crate::scan::tests::written(f, &batch, props.build())
    }

    #[test]
    fn a_row_group_too_large_for_a_pass_is_spread_in_pieces() {
        for page_index in [true, false] {
            row_group_spread_in_pieces(page_index);
        }
    }

    /// Without a page index, the pieces are cut by the page headers.
    fn row_group_spread_in_pieces(page_index: bool) {
        let f = one_big_row_group_with(60_000, page_index);
        let path = f.path().to_path_buf();
        let md = crate::metadata::read_metadata(&crate::source::ParquetFile::open(&path).unwrap(), true)
            .unwrap();
        assert_eq!(md.metadata.offset_index().is_some(), page_index);
        let sel = || {
            crate::plan::RowSelection::from(vec![
                crate::plan::RowSelector::skip(2500),
                crate::plan::RowSelector::select(40_000),
            ])
        };
        for with_selection in [false, true] {
            let b = || {
                let b = Scan::builder(&path).with_batch_rows(4096);
                if with_selection {
                    b.with_row_selection(sel())
                } else {
                    b
                }
            };
            let one = one_host_load(b());
            // the footer read without the page index: read again with it, to cut the pieces
            let s = over_hosts(b().with_memory_budget(1 << 20),
                vec![path.clone()], 2)
            .unwrap();
            let passes = &s.spread().unwrap().passes;
            assert!(passes.len() >= 4, "{:?}", s.spread().unwrap());
            assert!(passes.iter().all(|p| p.row_groups == [0]));
            assert!(s.spread().unwrap().shares.iter().all(|d| d.passes.len() >= 2));
            let got = s.load().unwrap();
            let (batch, rows) = concat(&got.batches);
            assert_eq!((&batch, &rows), (&concat(&one).0, &concat(&one).1));
            let want = if with_selection { (0, 2500, 42_500) } else { (0, 0, 60_000) };
            assert_eq!(rows, [want]);
            // each piece read only its own pages (aligned reads round them up): about the
            // file once over, not the row group once a pass
            let read: u64 = got.report.devices.iter().map(|d| d.bytes_read).sum();
            let file = std::fs::metadata(&path).unwrap().len();
            assert!(read < 2 * file, "read {read} of a {file}-byte file in {} passes", passes.len());
        }
    }

    #[test]
    fn a_row_group_whose_pages_cannot_say_their_rows_keeps_the_budget_error() {
        // a list column of v1 pages: its headers count values, not rows
        use arrow::array::{ArrayRef, Int64Array, ListArray};
        use arrow::datatypes::Int64Type;
        let f = tempfile::NamedTempFile::new().unwrap();
        let rows = 40_000i64;
        let lists = ListArray::from_iter_primitive::<Int64Type, _, _>(
            (0..rows).map(|i| Some(vec![Some(i), Some(i + 1)])),
        );
        let batch = arrow::record_batch::RecordBatch::try_from_iter([
            ("a", Arc::new(Int64Array::from_iter_values(0..rows)) as ArrayRef),
            ("l", Arc::new(lists) as ArrayRef),
        ])
        .unwrap();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(rows as usize))
            .set_data_page_row_count_limit(1000)
            .set_write_batch_size(500)
            .set_dictionary_enabled(false)
            .set_statistics_enabled(parquet::file::properties::EnabledStatistics::Chunk)
            .set_offset_index_disabled(true)
            .build();
        let f = crate::scan::tests::written(f, &batch, props);
        let e = over_hosts(
            Scan::builder(f.path()).with_memory_budget(1 << 20),
            vec![f.path().to_path_buf()],
            2,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("row group 0 needs about"), "{e}");
        // the flat column alone has pages that say their rows: cut by them
        let one = one_host_load(Scan::builder(f.path()).with_columns(["a"]));
        let s = over_hosts(
            Scan::builder(f.path()).with_columns(["a"]).with_memory_budget(1 << 18),
            vec![f.path().to_path_buf()],
            2,
        )
        .unwrap();
        assert!(s.spread().unwrap().passes.len() >= 2, "{:?}", s.spread().unwrap());
        let got = s.load().unwrap();
        assert_eq!(concat(&got.batches), concat(&one));
    }
}
