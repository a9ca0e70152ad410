//! Decoded batches finished as the scan yields them ([`Finish`]): the exact row filter
//! ([`ScanBuilder::with_row_filter`](super::ScanBuilder::with_row_filter)) — host batches by
//! arrow-rs, device batches by the GPU's predicate and compaction kernels, batches left with no
//! row dropped (each wave's as it is decoded, [`Finish::apply`]); then, the file's batches in
//! order, consecutive ones gathered into batches of about `batch_rows` kept rows (never more,
//! unless one batch alone is; device batches joined on their device; [`Finish::in_order`]) —
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

    /// A wave's `batches` finished as far as they can be before the waves are put in order:
    /// under a row filter, the rows it keeps (gathered and given their views later, in order:
    /// [`Self::in_order`]); without one, a device's string and binary columns as views where
    /// they were asked for.
    pub(super) fn apply(&self, batches: Vec<LoadedBatch>) -> Result<Vec<LoadedBatch>> {
        match self.row_filter {
            Some(_) => self.filter_rows(batches),
            None => self.with_views(batches),
        }
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
        Ok(out)
    }

    /// The file's batches, in order, as [`Self::apply`] left them, finished: under a row
    /// filter, consecutive batches joined into batches of about `batch_rows` kept rows (a
    /// filter's batches are as large as asked, not as the rows read), then given their views.
    /// `held` are batches of the file's that came before `batches`, not joined yet; unless
    /// this is the file's `end`, the last batches, fewer than `batch_rows` rows together, are
    /// left there to be joined with the next ones. The batches are joined as one sequence, so
    /// a load and a stream, whatever their waves, yield the same batches. Without a row filter,
    /// `batches` unchanged.
    pub(super) fn in_order(
        &self,
        held: &mut Vec<LoadedBatch>,
        batches: Vec<LoadedBatch>,
        end: bool,
    ) -> Result<Vec<LoadedBatch>> {
        if self.row_filter.is_none() {
            return Ok(batches);
        }
        // device batches joined on the calling thread's own stream: its waits are not for the
        // next waves decoding meanwhile
        crate::device::with_own_stream(|| self.join_in_order(held, batches, end))
    }

    fn join_in_order(
        &self,
        held: &mut Vec<LoadedBatch>,
        batches: Vec<LoadedBatch>,
        end: bool,
    ) -> Result<Vec<LoadedBatch>> {
        let mut out = Vec::with_capacity(batches.len() / 2 + 1);
        let mut pending = std::mem::take(held);
        let mut rows: usize = pending.iter().map(|b| b.num_rows()).sum();
        let mut pending_kind = pending.first().map_or(Kind::Apart, Kind::of);
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
        match end {
            true => self.flush(pending_kind, &mut pending, &mut out)?,
            false => *held = pending,
        }
        self.with_views(out)
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

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use arrow::array::{Array, Int32Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::Finish;
    use crate::array::{LoadedBatch, RowSpan};
    use crate::decode::filter::BatchFilter;
    use crate::plan::predicate::{parse_predicate, row_filter};

    /// A row filter's batches are joined as one sequence: whatever waves the pieces came in
    /// (a load's one, a stream's many, pieces held from one to the next), the same batches,
    /// each at most `batch_rows` rows and all but the last more than `batch_rows` less the
    /// largest piece.
    #[test]
    fn filtered_batches_join_the_same_over_any_waves() {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int32, false)]));
        let descr = parquet::arrow::ArrowSchemaConverter::new()
            .convert(&schema)
            .unwrap();
        let rf = row_filter(&parse_predicate("x > 0").unwrap(), "x > 0", &descr).unwrap();
        let path = Path::new("t.parquet");
        let filter = BatchFilter::new(path, &rf, &[0], &[0], &schema).unwrap();
        let finish = Finish {
            row_filter: Some(&filter),
            views: None,
            path,
            batch_rows: 100,
            keep_dictionaries: false,
        };
        // pieces of 1 to 60 rows, numbered on
        let file: Arc<Path> = Arc::from(path);
        let (mut pieces, mut next) = (Vec::new(), 0i32);
        for k in 0..40u64 {
            let n = (k * 37 % 60 + 1) as i32;
            let values = Int32Array::from_iter_values(next..next + n);
            next += n;
            let b = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(values)]).unwrap();
            let rows = vec![RowSpan {
                row_group: (k / 7) as usize,
                rows: k * 100..k * 100 + n as u64,
            }];
            pieces.push(LoadedBatch::host(b, Arc::clone(&file), rows));
        }
        let values = |batches: &[LoadedBatch]| -> Vec<Vec<i32>> {
            (batches.iter())
                .map(|b| {
                    let c = b.as_host().unwrap().column(0);
                    let c = c.as_any().downcast_ref::<Int32Array>().unwrap();
                    c.values().to_vec()
                })
                .collect()
        };
        let whole = finish
            .in_order(&mut Vec::new(), pieces.clone(), true)
            .unwrap();
        let sizes: Vec<usize> = whole.iter().map(|b| b.num_rows()).collect();
        assert_eq!(sizes.iter().sum::<usize>(), next as usize);
        assert!(sizes.iter().all(|&n| n <= 100), "{sizes:?}");
        assert!(sizes[..sizes.len() - 1].iter().all(|&n| n > 40), "{sizes:?}");
        // every value once, in order
        let flat: Vec<i32> = values(&whole).concat();
        assert_eq!(flat, (0..next).collect::<Vec<_>>());
        // each batch's spans are its pieces'
        for b in &whole {
            let spans: u64 = b.rows().iter().map(|r| r.rows.end - r.rows.start).sum();
            assert_eq!(spans, b.num_rows() as u64);
        }
        // the same in waves of 1, 2, 3, 5 and 13 pieces
        for wave in [1, 2, 3, 5, 13] {
            let (mut held, mut got) = (Vec::new(), Vec::new());
            let waves: Vec<&[LoadedBatch]> = pieces.chunks(wave).collect();
            for (i, w) in waves.iter().enumerate() {
                let end = i + 1 == waves.len();
                got.extend(finish.in_order(&mut held, w.to_vec(), end).unwrap());
            }
            assert!(held.is_empty());
            assert_eq!(values(&got), values(&whole), "waves of {wave}");
        }
        // kept dictionaries: no batch across row groups
        let kept = Finish {
            keep_dictionaries: true,
            ..finish
        };
        let cut = kept.in_order(&mut Vec::new(), pieces, true).unwrap();
        for b in &cut {
            let first = b.rows()[0].row_group;
            assert!(b.rows().iter().all(|r| r.row_group == first));
        }
        assert!(cut.len() > whole.len());
    }
}
