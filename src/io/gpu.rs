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
use crate::io::policy::{decide, MachineFacts, PlannedPath, Target};
use crate::io::staged::StagedReader;
use crate::io::{check_destinations, Dest, IoPath, IoReport, RangeReader};
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
    /// A reader for device `ordinal`, with the machine facts probed (cuFile library, driver,
    /// nvidia-fs).
    pub fn new(settings: IoSettings, ordinal: usize) -> Result<Self> {
        let g = gpu(ordinal)?;
        Ok(GpuReader {
            staged: StagedReader::new(settings.clone(), ordinal)?,
            cufile: CufileReader::new(settings.clone(), ordinal)?,
            facts: cufile::machine_facts(),
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

impl RangeReader for GpuReader {
    fn read(&self, file: &ParquetFile, requests: &[IoRequest], dest: Dest<'_>) -> Result<IoReport> {
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

        // Decide every range; register the file when any range wants cuFile, then decide again
        // with the registration's outcome.
        let mut facts = self.facts.clone();
        let decide_all = |facts: &MachineFacts| -> Result<Vec<_>> {
            requests
                .iter()
                .map(|q| {
                    decide(
                        &self.settings,
                        facts,
                        Target::Device,
                        file.path(),
                        q.range.clone(),
                    )
                })
                .collect()
        };
        let mut decisions = decide_all(&facts)?;
        let mut handle = None;
        if decisions.iter().any(|d| d.path == PlannedPath::CuFile) {
            match cufile::register(file) {
                Ok(h) => {
                    facts.registration = Some(crate::io::policy::Fact::yes(format!(
                        "registered with cuFile ({})",
                        if h.direct() { "O_DIRECT" } else { "buffered" }
                    )));
                    handle = Some(h);
                }
                Err(f) => facts.registration = Some(f),
            }
            decisions = decide_all(&facts)?;
        }
        let (to_cufile, to_stage): (Vec<usize>, Vec<usize>) =
            (0..requests.len()).partition(|&i| decisions[i].path == PlannedPath::CuFile);

        let before = if to_cufile.is_empty() {
            None
        } else {
            cufile::counters()
        };
        let (staged, cufiled) = self.staged.pool().install(|| {
            rayon::join(
                || self.staged.read_selected(file, requests, &to_stage, buf),
                || match &handle {
                    Some(h) if !to_cufile.is_empty() => self.cufile.read_selected(
                        file,
                        h,
                        requests,
                        &to_cufile,
                        buf,
                        IoPath::CufilePosix,
                    ),
                    _ => Ok(Vec::new()),
                },
            )
        });
        let mut records = staged?;
        let mut cufiled = cufiled?;
        let mut report = IoReport {
            threads: self.settings.nthreads,
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

    fn name(&self) -> &'static str {
        "gpu"
    }
}
