//! The device-target reader: every range on the path the policy picks, and the truth about
//! which path its bytes took.
//!
//! For each request [`decide`] picks `staged` or `cufile` from the settings, the machine facts
//! and the range. When any range goes to cuFile, the file is registered first and the decision
//! taken again with the outcome (auto: a failed registration means staging, with cuFile's
//! reason; off: an error). The cuFile and staged parts run concurrently on the same thread
//! pool. cuFile's Level-3 counters, read before and after, attribute the cuFile reads to `gds`
//! (nvidia-fs) or `cufile-posix` (cuFile's compat path).

use std::sync::Arc;
use std::time::Instant;

use crate::config::IoSettings;
use crate::device::{gpu, Gpu};
use crate::error::{Error, Result};
use crate::io::cufile::{self, CufileReader};
use crate::io::policy::{decide, Fact, MachineFacts, PathDecision, PlannedPath, Target};
use crate::io::staged::{stream_threads, StagedReader};
use crate::io::{check_destinations, Dest, IoPath, IoReport, RangeReader, StreamDest};
use crate::plan::IoRequest;
use crate::source::ParquetFile;

/// Reads requests into the memory of one CUDA device, per-range path choice included.
#[derive(Debug, Clone)]
pub struct GpuReader {
    settings: IoSettings,
    gpu: Arc<Gpu>,
    facts: MachineFacts,
    staged: StagedReader,
    cufile: CufileReader,
}

impl GpuReader {
    /// A reader for device `ordinal`, with the machine facts probed (nvidia-fs; the cuFile
    /// library and driver where the settings may use them: [`cufile::machine_facts_for`]).
    pub fn new(settings: IoSettings, ordinal: usize) -> Result<Self> {
        let g = gpu(ordinal)?;
        Ok(GpuReader {
            staged: StagedReader::new(settings.clone(), ordinal)?,
            cufile: CufileReader::new(settings.clone(), ordinal)?,
            facts: cufile::machine_facts_for(&settings),
            settings,
            gpu: g,
        })
    }

    /// Replaces the probed machine facts (tests inject e.g. "nvidia-fs loaded" on a machine
    /// without it, to exercise the registration-failure fallback).
    pub fn with_facts(mut self, facts: MachineFacts) -> Self {
        self.facts = facts;
        self
    }

    /// The machine facts decisions are made from.
    pub fn facts(&self) -> &MachineFacts {
        &self.facts
    }

    /// The device.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// The settings.
    pub fn settings(&self) -> &IoSettings {
        &self.settings
    }
}

/// Where every request goes, and why.
#[derive(Debug)]
pub(crate) struct PathPlan<H> {
    /// One decision per request.
    pub decisions: Vec<PathDecision>,
    /// Requests read with cuFile (then `handle` is set).
    pub to_cufile: Vec<usize>,
    /// Requests staged.
    pub to_stage: Vec<usize>,
    /// The registered file, when any request goes to cuFile.
    pub handle: Option<H>,
    /// The facts the decisions were made from, registration included when tried.
    pub facts: MachineFacts,
}

/// Decides the path of every request (pure but for `register`, called at most once and only
/// when some request would use cuFile): decides, registers the file when a range wants cuFile,
/// then decides again with the registration's outcome — in auto mode a failed registration
/// stages those ranges with cuFile's reason, in off mode it is an error.
pub(crate) fn plan_paths<H>(
    settings: &IoSettings,
    facts: &MachineFacts,
    file: &std::path::Path,
    requests: &[IoRequest],
    register: impl FnOnce() -> std::result::Result<(H, String), Fact>,
) -> Result<PathPlan<H>> {
    let mut facts = facts.clone();
    let decide_all = |facts: &MachineFacts| -> Result<Vec<PathDecision>> {
        requests
            .iter()
            .map(|q| decide(settings, facts, Target::Device, file, q.range.clone()))
            .collect()
    };
    let mut decisions = decide_all(&facts)?;
    let mut handle = None;
    if decisions.iter().any(|d| d.path == PlannedPath::CuFile) {
        match register() {
            Ok((h, how)) => {
                facts.registration = Some(Fact::yes(how));
                handle = Some(h);
            }
            Err(f) => facts.registration = Some(f),
        }
        decisions = decide_all(&facts)?;
    }
    let (to_cufile, to_stage): (Vec<usize>, Vec<usize>) =
        (0..requests.len()).partition(|&i| decisions[i].path == PlannedPath::CuFile);
    if !to_cufile.is_empty() && handle.is_none() {
        return Err(Error::CuFile {
            path: file.to_path_buf(),
            range: None,
            reason: "cuFile was chosen without a registered file handle".into(),
        });
    }
    if to_cufile.is_empty() {
        handle = None;
    }
    Ok(PathPlan {
        decisions,
        to_cufile,
        to_stage,
        handle,
        facts,
    })
}

impl GpuReader {
    /// [`RangeReader::read`], the staged reads on the smaller pool when `beside`.
    fn read_on(
        &self,
        file: &ParquetFile,
        requests: &[IoRequest],
        dest: Dest<'_>,
        beside: bool,
    ) -> Result<IoReport> {
        let t0 = Instant::now();
        let Dest::Device(buf) = dest else {
            return Err(Error::Device {
                device: format!("cuda:{}", self.gpu.ordinal()),
                reason: "the GPU reader writes device memory; use the host reader for host memory"
                    .into(),
            });
        };
        if buf.gpu().ordinal() != self.gpu.ordinal() {
            return Err(Error::Device {
                device: format!("cuda:{}", self.gpu.ordinal()),
                reason: format!("the destination buffer is on cuda:{}", buf.gpu().ordinal()),
            });
        }
        check_destinations(file, requests, buf.len() as u64)?;
        #[cfg(feature = "object-store")]
        if let Some(r) = file.remote() {
            // GETs into host memory, each piece copied to the device as it comes in
            return r.read(requests, Dest::Device(buf));
        }

        let PathPlan {
            decisions,
            to_cufile,
            to_stage,
            handle,
            facts,
        } = plan_paths(&self.settings, &self.facts, file.path(), requests, || {
            cufile::register(file).map(|h| {
                let how = if h.direct() { "O_DIRECT" } else { "buffered" };
                (h, format!("registered with cuFile ({how})"))
            })
        })?;
        let before = if to_cufile.is_empty() {
            None
        } else {
            cufile::counters()
        };
        let (staged, cufiled) = self.staged.pool_for(beside).install(|| {
            rayon::join(
                || {
                    self.staged
                        .read_selected(file, requests, &to_stage, buf, beside)
                },
                || match &handle {
                    Some(h) => self.cufile.read_selected(
                        file,
                        h,
                        requests,
                        &to_cufile,
                        buf,
                        IoPath::CufilePosix,
                    ),
                    None => Ok(Vec::new()), // plan_paths: no handle means no cuFile request
                },
            )
        });
        let mut records = staged?;
        let mut cufiled = cufiled?;
        let mut report = IoReport {
            threads: if beside {
                stream_threads(self.settings.nthreads)
            } else {
                self.settings.nthreads
            },
            direct_io: self.settings.direct_io,
            ..IoReport::default()
        };
        let mut evidence = String::new();
        if !to_cufile.is_empty() {
            let after = cufile::counters();
            let delta = match (&before, &after) {
                (Some(b), Some(a)) => Some(cufile::counters_delta(b, a)),
                _ => None,
            };
            let (path, why) = cufile::attribute(delta.as_ref(), facts.nvidia_fs.ok);
            for r in &mut cufiled {
                r.path = path;
            }
            evidence = why;
            report.cufile = delta;
        }
        records.append(&mut cufiled);
        records.sort_by_key(|r| r.index);
        for r in &records {
            let d = &decisions[r.index];
            let reason = if r.path == IoPath::Staged {
                d.reason.clone()
            } else {
                format!("{}; {evidence}", d.reason)
            };
            report.note_decision(r.path, &reason, r.range.end - r.range.start);
        }
        report.requests = records;
        report.wall = t0.elapsed();
        Ok(report)
    }
}

impl RangeReader for GpuReader {
    fn read(&self, file: &ParquetFile, requests: &[IoRequest], dest: Dest<'_>) -> Result<IoReport> {
        self.read_on(file, requests, dest, false)
    }

    /// The staged reads on all threads but 3/8 of them, as a streamed read leaves the other
    /// cores to the decoders (measured on the H200, benches/RESULTS.md: the uncompressed
    /// lineitem file streamed under a 2 GiB budget in 54.5 ms, 64–65 ms with every core
    /// reading).
    fn read_beside(
        &self,
        file: &ParquetFile,
        requests: &[IoRequest],
        dest: Dest<'_>,
    ) -> Result<IoReport> {
        self.read_on(file, requests, dest, true)
    }

    fn name(&self) -> &'static str {
        "gpu"
    }

    /// Streams when every request is staged (the path policy sends none to cuFile, as on
    /// machines without nvidia-fs): the staged reader's streamed read.
    fn read_stream(
        &self,
        file: &ParquetFile,
        requests: &[IoRequest],
        parts: &[Vec<usize>],
        dest: StreamDest<'_>,
        done: &(dyn Fn(usize, IoReport) + Sync),
    ) -> Option<Result<()>> {
        if dest.ordinal() != self.gpu.ordinal() || file.is_remote() {
            return None;
        }
        // (a part's own allocation is checked as it is opened)
        if let StreamDest::One(buf) = dest {
            if let Err(e) = check_destinations(file, requests, buf.len() as u64) {
                return Some(Err(e));
            }
        }
        // a plan that would register the file with cuFile is not streamed
        let wants_cufile = std::cell::Cell::new(false);
        let plan = plan_paths(&self.settings, &self.facts, file.path(), requests, || {
            wants_cufile.set(true);
            Err::<((), String), _>(Fact::no("streamed reads are staged"))
        });
        if wants_cufile.get() {
            return None;
        }
        let decisions = match plan {
            Ok(p) if p.to_cufile.is_empty() => p.decisions,
            Ok(_) => return None,
            Err(e) => return Some(Err(e)),
        };
        let last_done = std::sync::Mutex::new(Instant::now());
        Some(
            self.staged
                .read_stream(file, requests, parts, dest, &|i, records| {
                    let mut report = IoReport {
                        threads: stream_threads(self.settings.nthreads),
                        direct_io: self.settings.direct_io,
                        ..IoReport::default()
                    };
                    for r in &records {
                        let reason = &decisions[r.index].reason;
                        report.note_decision(r.path, reason, r.range.end - r.range.start);
                    }
                    report.requests = records
                        .into_iter()
                        .enumerate()
                        .map(|(k, mut r)| {
                            r.index = k;
                            r
                        })
                        .collect();
                    let mut last = last_done.lock().unwrap_or_else(|p| p.into_inner());
                    report.wall = last.elapsed();
                    *last = Instant::now();
                    drop(last);
                    done(i, report);
                }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CompatMode;
    use std::path::Path;

    fn facts(nvfs: bool) -> MachineFacts {
        MachineFacts {
            libcufile: Fact::yes("libcufile ok"),
            driver_open: Fact::yes("driver open"),
            nvidia_fs: if nvfs {
                Fact::yes("nvidia-fs loaded")
            } else {
                Fact::no("nvidia-fs not loaded")
            },
            registration: None,
        }
    }

    fn reqs(lens: &[u64]) -> Vec<IoRequest> {
        let mut off = 0;
        lens.iter()
            .map(|&n| {
                let q = IoRequest {
                    range: off..off + n,
                    dest_offset: off,
                    chunks: vec![],
                };
                off += n;
                q
            })
            .collect()
    }

    fn settings(mode: CompatMode) -> IoSettings {
        IoSettings {
            compat_mode: mode,
            ..IoSettings::default()
        }
    }

    const BIG: u64 = 1 << 20;

    #[test]
    fn registration_only_when_a_range_wants_cufile() {
        let r = reqs(&[BIG, 100, BIG]);
        let f = Path::new("f.parquet");
        // no nvidia-fs in auto: everything staged, registration never tried
        let p = plan_paths(&settings(CompatMode::Auto), &facts(false), f, &r, || {
            panic!("must not register")
        })
        .map(|p: PathPlan<u8>| p)
        .unwrap();
        assert_eq!(p.to_stage, vec![0, 1, 2]);
        assert!(p.handle.is_none() && p.facts.registration.is_none());
        // nvidia-fs and registration works: large ranges to cuFile, the small one staged
        let p = plan_paths(&settings(CompatMode::Auto), &facts(true), f, &r, || {
            Ok((7u8, "registered".into()))
        })
        .unwrap();
        assert_eq!(
            (p.to_cufile.clone(), p.to_stage.clone()),
            (vec![0, 2], vec![1])
        );
        assert_eq!(p.handle, Some(7));
        assert!(p.decisions[1].reason.contains("below gds_threshold"));
        // registration fails: staged, with cuFile's reason on the large ranges
        let p: PathPlan<u8> = plan_paths(&settings(CompatMode::Auto), &facts(true), f, &r, || {
            Err(Fact::no("cuFileHandleRegister failed: udev"))
        })
        .unwrap();
        assert_eq!(p.to_stage, vec![0, 1, 2]);
        assert!(p.handle.is_none());
        assert!(p.decisions[0]
            .reason
            .contains("cuFileHandleRegister failed: udev"));
        // off: the failure is an error naming the file and range
        let e = plan_paths::<u8>(&settings(CompatMode::Off), &facts(false), f, &r, || {
            Err(Fact::no("cuFileHandleRegister failed: udev"))
        })
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("f.parquet: cuFile (bytes 0..1048576)"), "{e}");
        // off without nvidia-fs but registered: cuFile, small range still staged
        let p = plan_paths(&settings(CompatMode::Off), &facts(false), f, &r, || {
            Ok((1u8, "registered".into()))
        })
        .unwrap();
        assert_eq!(p.to_cufile, vec![0, 2]);
        assert!(p.decisions[0].reason.contains("POSIX compat path"));
        // on: never cuFile
        let p = plan_paths(&settings(CompatMode::On), &facts(true), f, &r, || {
            panic!("must not register")
        })
        .map(|p: PathPlan<u8>| p)
        .unwrap();
        assert_eq!(p.to_stage, vec![0, 1, 2]);
    }
}
