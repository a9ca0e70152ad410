//! Decoded batches finished as the scan yields them ([`Finish`]): the exact row filter
//! ([`ScanBuilder::with_row_filter`](super::ScanBuilder::with_row_filter)) — host batches by
//! arrow-rs, device batches by the GPU's predicate and compaction kernels, batches left with no
//! row dropped, consecutive batches of a wave gathered into batches of about `batch_rows`
//! kept rows (never more, unless one batch alone is; device batches joined on their device) —
//! then string and binary columns as views where they were asked for
//! ([`ScanBuilder::with_string_views`](super::ScanBuilder::with_string_views): the host
//! decodes them as views; a device builds them after the filter, from offsets).

use std::path::Path;

use arrow::datatypes::SchemaRef;

use crate::array::{LoadedBatch, Location};
use crate::decode::filter::BatchFilter;
use crate::decode::gpu::DeviceKept;
use crate::error::{Error, Result};

/// What finishes a file's decoded batches: its row filter and its views' schema, if any.
#[derive(Clone, Copy)]
pub(super) struct Finish<'a> {
    pub(super) row_filter: Option<&'a BatchFilter>,
    pub(super) views: Option<&'a SchemaRef>,
    /// The file, named by a failed view's error.
    pub(super) path: &'a Path,
    /// Rows per batch asked: what filtered host batches are gathered up to.
    pub(super) batch_rows: usize,
    /// Kept dictionaries: no batch spans row groups (one dictionary each).
    pub(super) keep_dictionaries: bool,
}

impl Finish<'_> {
    /// Whether decoded batches need finishing ([`Self::apply`]).
    pub(super) fn needed(&self) -> bool {
        self.row_filter.is_some() || self.views.is_some()
    }

    /// `batches` as the scan yields them: the rows the row filter keeps, and a device's
    /// string and binary columns as views where they were asked for.
    pub(super) fn apply(&self, batches: Vec<LoadedBatch>) -> Result<Vec<LoadedBatch>> {
        self.with_views(self.filter_rows(batches)?)
    }

    /// `batches` with only the rows the row filter keeps (unchanged without one).
    pub(super) fn filter_rows(&self, batches: Vec<LoadedBatch>) -> Result<Vec<LoadedBatch>> {
        let Some(f) = self.row_filter else {
            return Ok(batches);
        };
        let mut out = Vec::with_capacity(batches.len());
        for b in batches {
            let at = b.rows().first().map(|r| r.row_group);
            let kept = match (b.as_host(), b.as_device(), b.location()) {
                (Some(h), ..) => f.apply(h).map(|h| b.replace_host(h)),
                (None, Some(d), Location::Cuda(ordinal)) => {
                    match crate::decode::gpu::filter_device(f, d, ordinal) {
                        Ok(DeviceKept::Nothing) => continue,
                        Ok(DeviceKept::All) => Ok(b),
                        Ok(DeviceKept::Some(d)) => Ok(b.replace_device(d)),
                        Err(e) => Err(e),
                    }
                }
                _ => Ok(b),
            }
            .map_err(|e| match e {
                Error::Decode {
                    path,
                    row_group: None,
                    column,
                    reason,
                } => Error::Decode {
                    path,
                    row_group: at,
                    column,
                    reason,
                },
                e => e,
            })?;
            if kept.num_rows() > 0 {
                out.push(kept);
            }
        }
        self.gather(out)
    }

    /// `batches` (the file's, in order, each wave's gathered already) gathered across waves
    /// where a row filter left them small; unchanged without one.
    pub(super) fn across_waves(&self, batches: Vec<LoadedBatch>) -> Result<Vec<LoadedBatch>> {
        match self.row_filter {
            Some(_) if batches.len() > 1 => self.gather(batches),
            _ => Ok(batches),
        }
    }

    /// Whether the stream holds `b`, the last batch it has, to join it with the next wave's:
    /// under a row filter, a batch of fewer than `batch_rows` rows.
    pub(super) fn holds(&self, b: &LoadedBatch) -> bool {
        self.row_filter.is_some() && b.num_rows() < self.batch_rows
    }

    /// Consecutive batches of `batches` (a wave's, in order) joined into batches of about
    /// `batch_rows` rows: a filter's batches are as large as asked, not as the rows read.
    /// Host batches are concatenated by arrow-rs, device batches on their device
    /// ([`crate::decode::gpu::concat_device`]; a batch with a column it does not join stays as
    /// it is).
    fn gather(&self, batches: Vec<LoadedBatch>) -> Result<Vec<LoadedBatch>> {
        let mut out = Vec::with_capacity(batches.len());
        let mut pending: Vec<LoadedBatch> = Vec::new();
        // what the pending batches are, and their rows
        let (mut pending_kind, mut rows) = (Kind::Apart, 0usize);
        for b in batches {
            let kind = Kind::of(&b);
            if kind == Kind::Apart {
                self.flush(pending_kind, &mut pending, &mut out)?;
                rows = 0;
                out.push(b);
                continue;
            }
            // kept dictionaries stay one per row group
            let last = pending.last().and_then(|p| p.rows().last()).map(|r| r.row_group);
            let first = b.rows().first().map(|r| r.row_group);
            let cut = self.keep_dictionaries && last.is_some() && last != first;
            let other = !pending.is_empty() && pending_kind != kind;
            if other || rows + b.num_rows() > self.batch_rows || cut {
                self.flush(pending_kind, &mut pending, &mut out)?;
                rows = 0;
            }
            rows += b.num_rows();
            pending_kind = kind;
            pending.push(b);
        }
        self.flush(pending_kind, &mut pending, &mut out)?;
        Ok(out)
    }

    /// `pending` (batches of one [`Kind`], `kind`) joined into one batch at the end of `out`.
    fn flush(
        &self,
        kind: Kind,
        pending: &mut Vec<LoadedBatch>,
        out: &mut Vec<LoadedBatch>,
    ) -> Result<()> {
        if pending.len() < 2 {
            out.append(pending);
            return Ok(());
        }
        let spans = pending.iter().flat_map(|b| b.rows().iter().cloned()).collect();
        let failed = |reason: String| Error::Decode {
            path: self.path.to_path_buf(),
            row_group: pending[0].rows().first().map(|r| r.row_group),
            column: None,
            reason: format!("gathering the filtered batches: {reason}"),
        };
        match kind {
            Kind::Host => {
                let hosts: Vec<arrow::array::RecordBatch> =
                    pending.iter().filter_map(|b| b.as_host().cloned()).collect();
                // (dictionaries of several row groups whose values outgrow their keys: joined
                // as arrow-rs reads a batch spanning them)
                let merged = crate::decode::host::join_batches(&hosts[0].schema(), &hosts)
                    .map_err(|e| failed(e.to_string()))?;
                out.push(pending[0].replace_host_rows(merged, spans));
            }
            Kind::Device(ordinal) => {
                let parts: Vec<&crate::array::DeviceRecordBatch> =
                    pending.iter().filter_map(|b| b.as_device().map(|d| d.as_ref())).collect();
                match crate::decode::gpu::concat_device(&parts, ordinal)
                    .map_err(|e| e.in_file(self.path))?
                {
                    Some(merged) => out.push(pending[0].replace_device_rows(merged, spans)),
                    None => {
                        out.append(pending);
                        return Ok(());
                    }
                }
            }
            Kind::Apart => {
                out.append(pending);
                return Ok(());
            }
        }
        pending.clear();
        Ok(())
    }

    /// A device's `batches` with their string and binary columns as views where they were
    /// asked for; unchanged otherwise.
    pub(super) fn with_views(&self, batches: Vec<LoadedBatch>) -> Result<Vec<LoadedBatch>> {
        match self.views {
            None => Ok(batches),
            Some(schema) => batches
                .into_iter()
                .map(|b| {
                    b.map_device(|d, ordinal| crate::decode::gpu::to_views(d, schema, ordinal))
                        .map_err(|e| e.in_file(self.path))
                })
                .collect(),
        }
    }
}

/// What a batch is joined with when gathered: host batches with host batches, device batches
/// with those of the same device whose columns it joins; anything else stays apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Host,
    Device(usize),
    Apart,
}

impl Kind {
    fn of(b: &LoadedBatch) -> Kind {
        match (b.as_host(), b.as_device(), b.location()) {
            (Some(_), ..) => Kind::Host,
            (None, Some(d), Location::Cuda(n))
                if d.schema.fields().iter().all(|f| crate::decode::gpu::joinable(f.data_type())) =>
            {
                Kind::Device(n)
            }
            _ => Kind::Apart,
        }
    }
}
