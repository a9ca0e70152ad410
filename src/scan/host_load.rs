//! Host loads: the plan's units read and decoded in parallel by arrow-rs, each into a buffer
//! of its own that is recycled once decoded; and the host decode of chunks loaded into device
//! memory (a cross-check).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use bytes::Bytes;
use rayon::prelude::*;

use super::device::Sink;
use super::file::{FileLoaded, ReaderState};
use super::waves::{Wave, WaveOut};
use crate::array::{LoadedBatch, RowSpan};
use crate::decode::gpu::{DeviceChunks, GpuDecodeReport};
use crate::error::{Error, Result};
use crate::io::{Dest, IoReport, RangeReader};
use crate::plan::{IoRequest, ReadUnit};

/// Unit buffers kept for reuse, across units, loads and readers, up to this many bytes in all:
/// 256 MiB. On a warm page cache, faulting in fresh pages for every unit costs more than the
/// reads themselves.
pub const RETAINED_BUFFER_BYTES: usize = 256 << 20;

static BUFFERS: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// A buffer of `len` bytes, recycled when one is free. Its contents are arbitrary: every byte is
/// overwritten by the unit's requests, which cover it end to end.
fn take_buffer(len: usize) -> Vec<u8> {
    let recycled = BUFFERS.lock().ok().and_then(|mut pool| {
        // the smallest that fits, so that large buffers stay for large units
        let i = (0..pool.len())
            .filter(|&i| pool[i].capacity() >= len)
            .min_by_key(|&i| pool[i].capacity())?;
        Some(pool.swap_remove(i))
    });
    match recycled {
        Some(mut b) => {
            b.resize(len, 0);
            b
        }
        None => vec![0u8; len],
    }
}

/// Frees the unit buffers kept for reuse (at most [`RETAINED_BUFFER_BYTES`]); returns the bytes
/// freed. Long-running processes may call it after a burst of loads.
pub fn release_cached_buffers() -> usize {
    let mut pool = BUFFERS.lock().unwrap_or_else(|p| p.into_inner());
    let n = pool.iter().map(Vec::capacity).sum();
    pool.clear();
    pool.shrink_to_fit();
    n
}

/// Returns a buffer for reuse, unless that would keep more than [`RETAINED_BUFFER_BYTES`].
fn give_buffer(b: Vec<u8>) {
    if let Ok(mut pool) = BUFFERS.lock() {
        let kept: usize = pool.iter().map(Vec::capacity).sum();
        if kept + b.capacity() <= RETAINED_BUFFER_BYTES {
            pool.push(b);
        }
    }
}

/// Decoded batches of one row group, for some of its fields.
type RowGroupPart = (usize, Vec<RecordBatch>);

pub(super) struct UnitResult {
    /// Decoded batches per row group, for the unit's fields of that row group.
    pub(super) parts: Vec<(usize, Vec<RecordBatch>)>,
    pub(super) io: IoReport,
    pub(super) decode_time: Duration,
}

impl ReaderState {
    /// Reads one unit's requests into a buffer of its own and decodes its row groups.
    pub(super) fn load_unit(
        &self,
        reader: &dyn RangeReader,
        unit: &ReadUnit,
    ) -> Result<UnitResult> {
        let plan = &self.plan;
        // The unit's requests are laid end to end from the first one's destination offset.
        let base = plan
            .requests
            .get(unit.requests.start)
            .map_or(0, |q| q.dest_offset);
        let local: Vec<IoRequest> = plan.requests[unit.requests.clone()]
            .iter()
            .map(|q| IoRequest {
                range: q.range.clone(),
                dest_offset: q.dest_offset - base,
                chunks: q.chunks.clone(),
            })
            .collect();
        let mut buf = take_buffer(unit.bytes as usize);
        let mut io = reader.read(&self.file, &local, Dest::Host(&mut buf))?;
        for (rec, k) in io.requests.iter_mut().zip(unit.requests.clone()) {
            rec.index = k;
        }
        let t = Instant::now();
        let data = Bytes::from(buf);
        let parts = self.decode_unit(unit, data.clone())?;
        // Recycle the buffer unless decoded arrays still point into it (view types do).
        if let Ok(m) = data.try_into_mut() {
            give_buffer(Vec::from(m));
        }
        Ok(UnitResult {
            parts,
            io,
            decode_time: t.elapsed(),
        })
    }

    /// Decodes one unit from `data`, its requests' bytes laid end to end (as the plan lays
    /// them from the unit's first destination offset).
    fn decode_unit(&self, unit: &ReadUnit, data: Bytes) -> Result<Vec<RowGroupPart>> {
        let plan = &self.plan;
        let base = plan
            .requests
            .get(unit.requests.start)
            .map_or(0, |q| q.dest_offset);
        let mut parts = Vec::new();
        let unit_chunks = &plan.chunks[unit.chunks.clone()];
        for &rg in &unit.row_groups {
            let mut leaves = Vec::new();
            let mut chunks = Vec::new();
            for c in unit_chunks.iter().filter(|c| c.row_group == rg) {
                leaves.push(c.column);
                if c.is_empty() {
                    continue;
                }
                let d = c
                    .dest_offset
                    .checked_sub(base)
                    .filter(|d| d + c.dest_len() <= data.len() as u64)
                    .ok_or_else(|| Error::BadColumnChunk {
                        path: self.file.path().to_path_buf(),
                        row_group: rg,
                        column: c.path.clone(),
                        range: Some(c.range.clone()),
                        reason: "the chunk is not covered by the planned requests".into(),
                    })? as usize;
                // the parts read, each at its place in the chunk's slice
                for p in c.read_parts() {
                    let at = d + p.dest as usize;
                    let len = (p.file.end - p.file.start) as usize;
                    chunks.push((p.file, data.slice(at..at + len)));
                }
            }
            let rows = self.rows_decoded(rg);
            let decoded = self.decoder.decode_leaves(rg, &leaves, &chunks, rows)?;
            parts.push((rg, decoded));
        }
        Ok(parts)
    }

    /// The rows of row group `rg` the plan reads, where not all: arrow-rs decodes only those
    /// (and reads only their pages where the plan does).
    fn rows_decoded(&self, rg: usize) -> Option<&[std::ops::Range<u64>]> {
        let all = self.meta.metadata.row_group(rg).num_rows().max(0) as u64;
        crate::plan::rows_restricted(self.plan.rows.as_ref(), rg, all)
    }

    /// Where the rows `rows` of row group `rg` lie among the rows decoded of it.
    fn decoded_position(&self, rg: usize, rows: &std::ops::Range<u64>) -> std::ops::Range<u64> {
        match self.rows_decoded(rg) {
            Some(read) => crate::plan::position_among(read, rows),
            None => rows.clone(),
        }
    }

    /// Joins the fields of each row group, decoded in different units, into batches of the
    /// projected schema, then cuts and gathers those into the reader's batches
    /// ([`Self::shape`]). `parts` are in unit order, so a row group's parts come in field
    /// order.
    pub(super) fn join_fields(
        &self,
        parts: Vec<(usize, Vec<RecordBatch>)>,
    ) -> Result<Vec<LoadedBatch>> {
        let mut per_rg: Vec<RowGroupPart> = Vec::new();
        let schema = self.decoder.schema();
        let mut i = 0;
        while i < parts.len() {
            let rg = parts[i].0;
            let n = parts[i..].iter().take_while(|(r, _)| *r == rg).count();
            let group = &parts[i..i + n];
            i += n;
            if n == 1 {
                per_rg.push((rg, group[0].1.clone()));
                continue;
            }
            let mismatch = |what: String| Error::Decode {
                path: self.file.path().to_path_buf(),
                row_group: Some(rg),
                column: None,
                reason: format!("fields decoded apart do not line up: {what}"),
            };
            let batches = group[0].1.len();
            for (_, p) in group {
                if p.len() != batches {
                    return Err(mismatch(format!("{} vs {batches} batches", p.len())));
                }
            }
            let mut joined = Vec::with_capacity(batches);
            for k in 0..batches {
                let rows = group[0].1[k].num_rows();
                let mut columns = Vec::with_capacity(schema.fields().len());
                for (_, p) in group {
                    if p[k].num_rows() != rows {
                        return Err(mismatch(format!(
                            "batch {k}: {} vs {rows} rows",
                            p[k].num_rows()
                        )));
                    }
                    columns.extend(p[k].columns().iter().cloned());
                }
                let opts = RecordBatchOptions::new().with_row_count(Some(rows));
                let b = RecordBatch::try_new_with_options(schema.clone(), columns, &opts)
                    .map_err(|e| mismatch(e.to_string()))?;
                joined.push(b);
            }
            per_rg.push((rg, joined));
        }
        self.shape(per_rg)
    }

    /// The reader's batches ([`crate::plan::batches_of`]: about `batch_rows` rows, gathered
    /// across row groups or cut from one) from each row group's decoded batches, in row-group order: a
    /// batch that is one slice of a decoded batch is that slice, others are joined (copied).
    fn shape(&self, per_rg: Vec<RowGroupPart>) -> Result<Vec<LoadedBatch>> {
        let schema = self.decoder.schema();
        let row_groups: Vec<usize> = per_rg.iter().map(|(rg, _)| *rg).collect();
        let by_rg: std::collections::HashMap<usize, Vec<RecordBatch>> =
            per_rg.into_iter().collect();
        let spans = self.spans_of(&row_groups);
        let mut out = Vec::with_capacity(spans.len());
        for span in spans {
            let mut pieces: Vec<RecordBatch> = Vec::new();
            let mut rows = Vec::with_capacity(span.parts.len());
            for part in &span.parts {
                let decoded = by_rg.get(&part.row_group).map_or(&[][..], |v| &v[..]);
                // the rows arrow-rs returned (fewer than the footer's only where its counts
                // disagree: arrow-rs caps them by the file's rows)
                let mut at = 0u64;
                let mut kept = part.rows.start..part.rows.start;
                let want = self.decoded_position(part.row_group, &part.rows);
                for b in decoded {
                    let n = b.num_rows() as u64;
                    let (lo, hi) = (want.start.max(at), want.end.min(at + n));
                    if lo < hi {
                        pieces.push(b.slice((lo - at) as usize, (hi - lo) as usize));
                        kept.end = part.rows.start + (hi - want.start);
                    }
                    at += n;
                }
                if !kept.is_empty() {
                    rows.push(RowSpan {
                        row_group: part.row_group,
                        rows: kept,
                    });
                }
            }
            let batch = match pieces.len() {
                0 => continue,
                1 => pieces.remove(0),
                _ => {
                    crate::decode::host::join_batches(schema, &pieces).map_err(|e| Error::Decode {
                        path: self.file.path().to_path_buf(),
                        row_group: span.parts.first().map(|p| p.row_group),
                        column: None,
                        reason: format!("joining the row groups of a batch: {e}"),
                    })?
                }
            };
            out.push(LoadedBatch::host(batch, Arc::clone(&self.path), rows));
        }
        Ok(out)
    }

    /// Reads and decodes the plan into host memory through `reader` (see
    /// [`FileScan::load_with`](super::FileScan::load_with)).
    pub(super) fn load_to_host(&self, reader: &dyn RangeReader, t0: Instant) -> Result<FileLoaded> {
        let plan = &self.plan;
        let total = plan.request_bytes();
        let n_rg = plan.row_groups.len();
        self.notify(0, 0);
        let units = &plan.units;
        let read_so_far = AtomicU64::new(0);
        let done_so_far = AtomicUsize::new(0);
        // A row group is done when the last of the units holding its fields is.
        let units_left: Vec<AtomicUsize> = plan
            .row_groups
            .iter()
            .map(|_| AtomicUsize::new(0))
            .collect();
        for u in units.iter() {
            for rg in &u.row_groups {
                if let Ok(i) = plan.row_groups.binary_search(rg) {
                    units_left[i].fetch_add(1, Relaxed);
                }
            }
        }
        let per_unit: Vec<Result<UnitResult>> = self.host_reader.pool().install(|| {
            units
                .par_iter()
                .map(|unit| {
                    let r = self.load_unit(reader, unit)?;
                    let b = read_so_far.fetch_add(unit.bytes, Relaxed) + unit.bytes;
                    let finished = unit
                        .row_groups
                        .iter()
                        .filter_map(|rg| plan.row_groups.binary_search(rg).ok())
                        .filter(|&i| units_left[i].fetch_sub(1, Relaxed) == 1)
                        .count();
                    let d = done_so_far.fetch_add(finished, Relaxed) + finished;
                    self.notify(b, d);
                    Ok(r)
                })
                .collect()
        });
        let mut parts: Vec<(usize, Vec<RecordBatch>)> = Vec::new();
        let mut records = Vec::with_capacity(plan.requests.len());
        let (mut io_time, mut decode_time) = (Duration::ZERO, Duration::ZERO);
        let mut remote: Option<crate::io::RemoteCounters> = None;
        for r in per_unit {
            let r = r?;
            parts.extend(r.parts);
            records.extend(r.io.requests);
            if let Some(c) = r.io.remote {
                // the units' reads ran side by side: the earliest first byte
                match &mut remote {
                    Some(m) => m.add_beside(&c),
                    None => remote = Some(c),
                }
            }
            io_time += r.io.wall;
            decode_time += r.decode_time;
        }
        let t_join = Instant::now();
        let batches = if units.is_empty() {
            // No leaf selected: batches carry row counts only; there is nothing to read.
            self.row_counts_only()?
        } else {
            self.finisher().filter_rows(self.join_fields(parts)?)?
        };
        decode_time += t_join.elapsed();
        if units.is_empty() {
            self.notify(total, n_rg);
        }
        records.sort_by_key(|q| q.index);
        let io = IoReport {
            requests: records,
            wall: io_time,
            threads: self.settings.nthreads,
            direct_io: self.settings.direct_io,
            remote,
            ..IoReport::default()
        };
        Ok(self.loaded(batches, io, decode_time, t0, None))
    }

    /// A host stream's waves ([`ReaderState::produce`](super::stream)): read and decoded one
    /// after the other, each wave's units in parallel, each wave's finished batches handed to
    /// `sink` (false: no more wanted).
    pub(super) fn host_waves(
        &self,
        reader: &dyn RangeReader,
        waves: &[Wave],
        sink: &Sink<'_>,
    ) -> Result<()> {
        let plan = &self.plan;
        let finish = self.finisher();
        let sink = |i: usize, r: Result<WaveOut>| {
            let r = r.and_then(|(b, g, io, d)| {
                let t = Instant::now();
                let b = finish.apply(b)?;
                Ok((b, g, io, d + t.elapsed()))
            });
            sink(i, r)
        };
        if plan.units.is_empty() {
            // no leaf selected: row counts only, nothing to read
            let r = self.row_counts_only().map(|b| {
                (
                    b,
                    GpuDecodeReport::default(),
                    IoReport::default(),
                    Duration::ZERO,
                )
            });
            sink(0, r);
            return Ok(());
        }
        let (mut bytes, mut rgs) = (0u64, 0usize);
        for (i, w) in waves.iter().enumerate() {
            let r = self.host_wave(reader, w);
            let failed = r.is_err();
            if !failed {
                bytes += w.bytes;
                rgs += w.row_groups.len();
                self.notify(bytes, rgs);
            }
            if !sink(i, r) || failed {
                break;
            }
        }
        Ok(())
    }

    /// One wave of a host stream: its units read and decoded in parallel, joined and cut into
    /// batches.
    fn host_wave(&self, reader: &dyn RangeReader, w: &Wave) -> Result<WaveOut> {
        let units: Vec<_> = self
            .plan
            .units
            .iter()
            .filter(|u| u.requests.start >= w.requests.start && u.requests.end <= w.requests.end)
            .collect();
        let results: Vec<Result<_>> = self.host_reader.pool().install(|| {
            units
                .par_iter()
                .map(|u| self.load_unit(reader, u))
                .collect()
        });
        let mut parts = Vec::new();
        let mut io = IoReport::default();
        let mut decode = Duration::ZERO;
        for res in results {
            let res = res?;
            parts.extend(res.parts);
            io.absorb(res.io);
            decode += res.decode_time;
        }
        let t = Instant::now();
        let batches = self.join_fields(parts)?;
        Ok((
            batches,
            GpuDecodeReport::default(),
            io,
            decode + t.elapsed(),
        ))
    }

    /// [`FileScan::decode_on_host`](super::FileScan::decode_on_host).
    pub(super) fn decode_on_host(&self, chunks: &DeviceChunks) -> Result<Vec<LoadedBatch>> {
        super::device::check_chunks(&self.plan, self.file.path(), chunks)?;
        let plan = &self.plan;
        let mut host = take_buffer(chunks.buffer().len());
        chunks.buffer().copy_into(0, &mut host)?;
        let data = Bytes::from(host);
        let parts: Vec<Result<Vec<RowGroupPart>>> = self.host_reader.pool().install(|| {
            plan.units
                .par_iter()
                .map(|unit| {
                    let base = plan
                        .requests
                        .get(unit.requests.start)
                        .map_or(0, |q| q.dest_offset) as usize;
                    let end = (base + unit.bytes as usize).min(data.len());
                    self.decode_unit(unit, data.slice(base.min(end)..end))
                })
                .collect()
        });
        let mut all = Vec::new();
        for p in parts {
            all.extend(p?);
        }
        if plan.units.is_empty() {
            return self.row_counts_only();
        }
        self.join_fields(all)
    }

    /// The batches of a plan with no leaf selected: row counts only.
    pub(super) fn row_counts_only(&self) -> Result<Vec<LoadedBatch>> {
        let mut per_rg = Vec::with_capacity(self.plan.row_groups.len());
        for &rg in &self.plan.row_groups {
            per_rg.push((
                rg,
                self.decoder
                    .decode_leaves(rg, &[], &[], self.rows_decoded(rg))?,
            ));
        }
        self.shape(per_rg)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::device::Device;
    use crate::plan::CoalesceConfig;
    use crate::scan::tests::int_file;
    use crate::scan::Scan;

    #[test]
    fn unit_buffers_are_kept_and_released() {
        let f = int_file(&["x"], 10_000, 1 << 20);
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        let reader = Scan::builder(f.path())
            .with_device(Device::Host)
            .with_progress(move |p| sink.lock().unwrap().push(p))
            .build_file()
            .unwrap();
        for _ in 0..3 {
            assert_eq!(reader.load().unwrap().report.rows, 10_000);
        }
        // the loads recycled their buffer, which stays cached until released
        let kept = release_cached_buffers();
        assert!(kept >= reader.plan().request_bytes() as usize, "{kept}");
        assert_eq!(release_cached_buffers(), 0);
        // progress starts at zero and ends with everything read and decoded
        let ev = events.lock().unwrap().clone();
        assert_eq!(ev.len(), 6, "{ev:?}");
        assert_eq!((ev[0].bytes_read, ev[0].row_groups_done), (0, 0));
        let last = ev[1];
        assert_eq!(last.bytes_read, last.bytes_total);
        assert_eq!(last.row_groups_done, last.row_groups_total);
        assert_eq!(last.row_groups_total, 1);
    }

    #[test]
    fn progress_counts_row_groups_whose_fields_span_units() {
        let f = int_file(&["a", "b", "c"], 1000, 250);
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        let reader = Scan::builder(f.path())
            .with_device(Device::Host)
            .with_coalescing(CoalesceConfig {
                unit_target_bytes: 1,
                ..Default::default()
            })
            .with_progress(move |p| sink.lock().unwrap().push(p))
            .build_file()
            .unwrap();
        assert_eq!(reader.plan().units.len(), 12, "one unit per field");
        let loaded = reader.load().unwrap();
        assert_eq!(loaded.report.rows, 1000);
        let ev = events.lock().unwrap().clone();
        assert_eq!(ev.len(), 13);
        let mut done: Vec<usize> = ev.iter().map(|p| p.row_groups_done).collect();
        assert!(done.iter().all(|&d| d <= 4), "{done:?}");
        done.sort();
        assert_eq!(done.last(), Some(&4));
        // the four row groups of 250 rows, their fields joined, gathered into one batch
        let batch: Vec<_> = (loaded.batches.iter().map(LoadedBatch::to_host))
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(batch.len(), 1);
        assert_eq!((batch[0].num_columns(), batch[0].num_rows()), (3, 1000));
        let rows: Vec<(usize, std::ops::Range<u64>)> = loaded.batches[0]
            .rows()
            .iter()
            .map(|r| (r.row_group, r.rows.clone()))
            .collect();
        assert_eq!(rows, (0..4).map(|rg| (rg, 0..250)).collect::<Vec<_>>());
    }

    #[test]
    fn batches_say_which_rows_of_which_row_groups_they_hold() {
        let f = int_file(&["a", "b"], 1000, 250);
        for tiny_units in [false, true] {
            let mut b = Scan::builder(f.path())
                .with_device(Device::Host)
                .with_batch_rows(100);
            if tiny_units {
                // every field in a unit of its own: batches joined column-wise
                b = b.with_coalescing(CoalesceConfig {
                    unit_target_bytes: 1,
                    ..Default::default()
                });
            }
            let loaded = b.build_file().unwrap().load().unwrap();
            let spans: Vec<(usize, std::ops::Range<u64>)> = loaded
                .batches
                .iter()
                .flat_map(|b| b.rows().iter().map(|r| (r.row_group, r.rows.clone())))
                .collect();
            let want: Vec<(usize, std::ops::Range<u64>)> = (0..4)
                .flat_map(|rg| [(rg, 0..100), (rg, 100..200), (rg, 200..250)])
                .collect();
            assert_eq!(spans, want, "tiny units: {tiny_units}");
            for b in &loaded.batches {
                assert_eq!(b.file(), f.path());
                let n: u64 = b.rows().iter().map(|r| r.rows.end - r.rows.start).sum();
                assert_eq!(n, b.num_rows() as u64);
            }
        }
    }
}
