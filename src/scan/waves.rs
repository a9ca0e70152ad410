//! A plan cut into waves: whole row groups (and whole batches) read and decoded together —
//! by a stream, a small first wave and then steps ([`stream_waves`]); by a device load, waves
//! sized so that reading the next overlaps decoding the last ([`waves`], [`wave_target`]);
//! under a memory budget, the plan's passes ([`pass_waves`]).

use std::sync::Arc;
use std::time::Duration;

use crate::array::LoadedBatch;
use crate::decode::gpu::GpuDecodeReport;
use crate::io::IoReport;
use crate::plan::ReadPlan;

/// Bytes read by the first wave of a stream at least: one, so the first wave holds the row
/// groups of the first batch and no more, and the first batch is in the caller's hands as
/// early as its own reads and decoding allow. Measured on the H200 (benches/RESULTS.md, with
/// the streamed reads' 10 readers of 16): the 24M-row SNAPPY lineitem file's first batch in
/// 10–12 ms (best of 5) from a first wave of one row group, 15 ms from one of 32 MiB (two).
pub(super) const FIRST_STEP_BYTES: u64 = 1;

/// Bytes per wave of a host stream.
pub(super) const HOST_STEP_BYTES: u64 = 256 << 20;

/// What a wave needs, from the footer ([`crate::plan::passes::row_group_cost`] summed): its
/// read bytes, and its decode working set beyond them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct WaveCost {
    pub(super) read: u64,
    pub(super) decode: u64,
}

impl WaveCost {
    /// A pass's cost: its read bytes, and the rest of its estimate.
    pub(super) fn of(p: &crate::plan::PlannedPass) -> Self {
        WaveCost {
            read: p.read_bytes,
            decode: p.device_bytes.saturating_sub(p.read_bytes),
        }
    }
}

/// What a decoded wave hands over: its batches, where its fields were decoded, what its reads
/// did and the time its decoding took.
pub(super) type WaveOut = (Vec<LoadedBatch>, GpuDecodeReport, IoReport, Duration);

/// Whole row groups read and decoded together, with the consecutive
/// units ([`ReadPlan::units`]) that carry their chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Wave {
    /// Row groups, ascending.
    pub(super) row_groups: Vec<usize>,
    /// Indices into the plan's chunks.
    pub(super) chunks: std::ops::Range<usize>,
    /// Indices into the plan's requests (laid end to end in the destination).
    pub(super) requests: std::ops::Range<usize>,
    /// Bytes of the requests.
    pub(super) bytes: u64,
    /// A piece of a row group too large for the memory budget: its own plan and batches;
    /// `chunks` and `requests` then index the piece's plan.
    pub(super) piece: Option<Arc<RowGroupPiece>>,
}

/// A piece of a row group ([`crate::plan::passes::split_row_group`]): its plan, which reads only the pages
/// holding its rows, and its batches.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct RowGroupPiece {
    pub(super) plan: Arc<ReadPlan>,
    pub(super) spans: Vec<crate::plan::BatchSpan>,
    /// The row group's last piece: with it, the row group is done.
    pub(super) last: bool,
}

impl Wave {
    /// The plan the wave's chunks and requests index: the piece's, or the load's.
    pub(super) fn plan<'a>(&'a self, load: &'a ReadPlan) -> &'a ReadPlan {
        self.piece.as_ref().map_or(load, |p| &p.plan)
    }

    /// The row groups done once this wave is decoded (for progress): a piece's row group only
    /// with its last piece.
    pub(super) fn row_groups_done(&self) -> usize {
        match &self.piece {
            Some(p) if !p.last => 0,
            _ => self.row_groups.len(),
        }
    }
}

impl Wave {
    /// The whole of `plan` as one wave.
    pub(super) fn whole(plan: &ReadPlan) -> Wave {
        Wave {
            row_groups: plan.row_groups.clone(),
            chunks: 0..plan.chunks.len(),
            requests: 0..plan.requests.len(),
            bytes: plan.request_bytes(),
            piece: None,
        }
    }
}

/// The passes of `passes` as waves of `plan` (each pass's chunks and the requests that read
/// them), with their estimated reads and decode working sets; None when a request reads chunks of two passes
/// (coalescing across row groups).
pub(super) fn pass_waves(
    plan: &ReadPlan,
    passes: &crate::plan::PassPlan,
) -> Option<(Vec<Wave>, Vec<WaveCost>)> {
    let mut out: Vec<Wave> = Vec::with_capacity(passes.passes.len());
    let mut costs: Vec<WaveCost> = Vec::with_capacity(passes.passes.len());
    let mut at = 0usize; // the next request
    for (k, p) in passes.passes.iter().enumerate() {
        if let Some(piece) = &p.piece {
            // the load plan's reads of the row group are not made: skip them
            let rg = p.row_groups.first().copied().unwrap_or(0);
            let theirs = plan.chunk_range_of(rg);
            while at < plan.requests.len()
                && plan.requests[at].chunks.iter().all(|c| theirs.contains(c))
            {
                at += 1;
            }
            let next = passes.passes.get(k + 1);
            let last = next.is_none_or(|n| n.piece.is_none() || n.row_groups != p.row_groups);
            out.push(Wave {
                row_groups: p.row_groups.clone(),
                chunks: 0..piece.chunks.len(),
                requests: 0..piece.requests.len(),
                bytes: piece.request_bytes(),
                piece: Some(Arc::new(RowGroupPiece {
                    plan: Arc::clone(piece),
                    spans: p.batches.clone(),
                    last,
                })),
            });
            costs.push(WaveCost::of(p));
            continue;
        }
        let start = at;
        let mut bytes = 0;
        while at < plan.requests.len()
            && plan.requests[at]
                .chunks
                .iter()
                .all(|c| p.chunks.contains(c))
        {
            bytes += plan.requests[at].len();
            at += 1;
        }
        let covered: usize = plan.requests[start..at]
            .iter()
            .map(|r| r.chunks.len())
            .sum();
        let non_empty = plan.chunks[p.chunks.clone()]
            .iter()
            .filter(|c| !c.is_empty())
            .count();
        if covered < non_empty {
            return None;
        }
        match out.last_mut() {
            // a pass with nothing to read (empty chunks only) joins the wave before it
            Some(w) if at == start => {
                w.row_groups.extend_from_slice(&p.row_groups);
                w.chunks.end = p.chunks.end;
                if let Some(c) = costs.last_mut() {
                    c.decode += WaveCost::of(p).decode;
                }
            }
            _ => {
                out.push(Wave {
                    row_groups: p.row_groups.clone(),
                    chunks: p.chunks.clone(),
                    requests: start..at,
                    bytes,
                    piece: None,
                });
                costs.push(WaveCost::of(p));
            }
        }
    }
    let readable = out.iter().all(|w| !w.requests.is_empty());
    (at == plan.requests.len() && readable).then_some((out, costs))
}

/// Bytes per wave of a device load of mostly uncompressed chunks ([`wave_target`]).
const UNCOMPRESSED_WAVE_BYTES: u64 = 250 << 20;

/// Bytes per wave of a device load that reads `total` bytes, `device_compressed` of them in
/// chunks the device decompresses (SNAPPY) and `host_compressed` in chunks the host
/// decompresses: `set` ([`Tuning::wave_bytes`](crate::config::Tuning::wave_bytes); 0: never pipeline);
/// else waves of 1 GiB above 4 GiB (which also bounds the device memory a huge load holds in
/// still-encoded chunks); else one wave below 128 MiB or when mostly host-decompressed; else
/// two waves when mostly decompressed by the device, and waves of
/// [`UNCOMPRESSED_WAVE_BYTES`] otherwise, each handed to a decoder as soon as the streamed
/// read has it. Measured on the H200 (benches/RESULTS.md): the SNAPPY lineitem file (550 MB)
/// loads 13 % faster in two waves than in one; the ZSTD file (host-decompressed) 4–10 %
/// slower, its decompression keeping busy the cores the reads need; the uncompressed file
/// (1.87 GB) 15–30 % faster in 250 MiB waves of a streamed read than in one wave.
pub(super) fn wave_target(
    total: u64,
    device_compressed: u64,
    host_compressed: u64,
    set: Option<u64>,
) -> u64 {
    if let Some(v) = set {
        return if v == 0 { u64::MAX } else { v };
    }
    if total > 4 << 30 {
        1 << 30
    } else if total < 128 << 20 || host_compressed.saturating_mul(2) >= total {
        u64::MAX
    } else if device_compressed.saturating_mul(2) >= total {
        total.div_ceil(2)
    } else {
        UNCOMPRESSED_WAVE_BYTES
    }
}

/// The plan's units grouped into waves of about `target` bytes that hold whole row groups and
/// whole batches (`ends(rg)`: a batch ends with row group `rg`); one wave (or none, with no
/// units) when the plan cannot be split.
pub(super) fn waves(plan: &ReadPlan, target: u64, ends: &dyn Fn(usize) -> bool) -> Vec<Wave> {
    let mut out: Vec<Wave> = Vec::new();
    let mut cur: Option<Wave> = None;
    for (k, u) in plan.units.iter().enumerate() {
        let w = cur.get_or_insert_with(|| Wave {
            row_groups: Vec::new(),
            chunks: u.chunks.start..u.chunks.start,
            requests: u.requests.start..u.requests.start,
            bytes: 0,
            piece: None,
        });
        if u.chunks.start != w.chunks.end || u.requests.start != w.requests.end {
            // not consecutive: no pipelining
            return vec![];
        }
        w.chunks.end = u.chunks.end;
        w.requests.end = u.requests.end;
        w.bytes += u.bytes;
        for &rg in &u.row_groups {
            if w.row_groups.last() != Some(&rg) {
                w.row_groups.push(rg);
            }
        }
        let next_first = plan.units.get(k + 1).and_then(|n| n.row_groups.first());
        let whole = match (next_first, u.row_groups.last()) {
            (Some(n), Some(l)) => n > l,
            _ => true,
        };
        if whole && w.bytes >= target && u.row_groups.last().is_some_and(|&rg| ends(rg)) {
            out.extend(cur.take());
        }
    }
    out.extend(cur.take());
    // every planned row group exactly once, and requests that exist, or no pipelining
    let rgs: Vec<usize> = out
        .iter()
        .flat_map(|w| w.row_groups.iter().copied())
        .collect();
    if rgs != plan.row_groups || out.iter().any(|w| w.requests.is_empty()) {
        return vec![];
    }
    out
}

/// The waves of a stream over `plan`: a first wave of about `first` bytes
/// ([`FIRST_STEP_BYTES`]), then waves of about `step` bytes, all of whole row groups and whole batches (`ends(rg)`: no batch goes
/// on after row group `rg`); one wave of everything when the plan's units cannot be cut
/// between row groups.
pub(super) fn stream_waves(
    plan: &ReadPlan,
    first: u64,
    step: u64,
    ends: &dyn Fn(usize) -> bool,
) -> Vec<Wave> {
    let small = waves(plan, first.min(step), ends);
    let Some(first) = small.first() else {
        return vec![Wave::whole(plan)];
    };
    let mut out = vec![first.clone()];
    // the rest, regrouped into waves of `step` bytes
    let mut cur: Option<Wave> = None;
    for w in &small[1..] {
        let c = cur.get_or_insert_with(|| Wave {
            row_groups: Vec::new(),
            chunks: w.chunks.start..w.chunks.start,
            requests: w.requests.start..w.requests.start,
            bytes: 0,
            piece: None,
        });
        c.row_groups.extend_from_slice(&w.row_groups);
        c.chunks.end = w.chunks.end;
        c.requests.end = w.requests.end;
        c.bytes += w.bytes;
        if c.bytes >= step {
            out.extend(cur.take());
        }
    }
    out.extend(cur);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;
    use crate::scan::tests::int_file;
    use crate::scan::{FileScan, Scan};

    /// A host reader of `path` whose reads are coalesced as a device load's (within row
    /// groups), with the page index where `page_index`.
    fn device_like(path: &std::path::Path, page_index: bool) -> FileScan {
        let coalescing = crate::plan::CoalesceConfig {
            unit_target_bytes: crate::plan::coalesce::MAX_REQUEST_SIZE,
            units_within_row_groups: true,
            ..Default::default()
        };
        Scan::builder(path)
            .with_device(Device::Host)
            .with_page_index(page_index)
            .with_coalescing(coalescing)
            .build_file()
            .unwrap()
    }

    #[test]
    fn passes_become_waves_when_reads_stay_within_row_groups() {
        let f = int_file(&["a", "b"], 40_000, 2_500); // 16 row groups
        let reader = device_like(f.path(), false);
        let plan = reader.plan();
        let md = &reader.metadata().metadata;
        let one = crate::plan::passes::row_group_cost(plan, md, 0).device_bytes;
        let passes = crate::plan::plan_passes(f.path(), plan, md, 3 * one, 1 << 20, false).unwrap();
        assert!(passes.passes.len() > 3, "{passes}");
        let (w, costs) = pass_waves(plan, &passes).expect("reads within row groups");
        let want: Vec<(u64, u64)> = (passes.passes.iter())
            .map(|p| (p.read_bytes, p.device_bytes - p.read_bytes))
            .collect();
        let got: Vec<(u64, u64)> = costs.iter().map(|c| (c.read, c.decode)).collect();
        assert_eq!(got, want);
        assert!(want.iter().all(|&(r, d)| r > 0 && d > r), "{want:?}");
        assert_eq!(w.len(), passes.passes.len());
        let mut at = 0;
        for (x, p) in w.iter().zip(&passes.passes) {
            assert_eq!((&x.row_groups, &x.chunks), (&p.row_groups, &p.chunks));
            assert_eq!(x.requests.start, at, "requests end to end");
            at = x.requests.end;
            for r in &plan.requests[x.requests.clone()] {
                assert!(r.chunks.iter().all(|c| x.chunks.contains(c)));
            }
            let bytes: u64 = plan.requests[x.requests.clone()]
                .iter()
                .map(|r| r.len())
                .sum();
            assert_eq!(x.bytes, bytes);
        }
        assert_eq!(at, plan.requests.len());
        // reads merged across row groups cannot be cut into these passes
        let merged = Scan::builder(f.path())
            .with_device(Device::Host)
            .build_file()
            .unwrap();
        let plan = merged.plan();
        assert!(plan.requests.iter().any(|r| {
            let rgs: std::collections::BTreeSet<usize> =
                r.chunks.iter().map(|&c| plan.chunks[c].row_group).collect();
            rgs.len() > 1
        }));
        let passes = crate::plan::plan_passes(f.path(), plan, md, 3 * one, 1 << 20, false).unwrap();
        assert!(pass_waves(plan, &passes).is_none());
    }

    #[test]
    fn a_row_group_in_pieces_is_done_with_its_last_piece() {
        // 2 row groups of 100,000 rows in arrow-rs's default pages, a budget of 9/10 of one
        let f = int_file(&["a", "b"], 200_000, 100_000);
        let reader = device_like(f.path(), true);
        let (plan, md) = (reader.plan(), &reader.metadata().metadata);
        let one = crate::plan::passes::row_group_cost(plan, md, 0).device_bytes;
        let passes = crate::plan::plan_passes(f.path(), plan, md, one * 9 / 10, 20_480, false).unwrap();
        let (w, _) = pass_waves(plan, &passes).expect("reads within row groups");
        assert!(w.len() > 2 && w.iter().all(|x| x.piece.is_some()), "{passes}");
        let done: Vec<usize> = w.iter().map(|x| x.row_groups_done()).collect();
        assert_eq!(done.iter().sum::<usize>(), 2, "{done:?}");
        for rg in 0..2 {
            let last = w.iter().rposition(|x| x.row_groups == [rg]).unwrap();
            assert_eq!(done[last], 1, "row group {rg}: {done:?}");
        }
    }

    #[test]
    fn waves_hold_whole_row_groups_and_cover_the_plan() {
        let f = int_file(&["a", "b", "c"], 40_000, 2_500); // 16 row groups
        for (unit, within) in [(1u64, false), (2 << 20, false), (32 << 20, true)] {
            let cfg = crate::plan::CoalesceConfig {
                unit_target_bytes: unit,
                units_within_row_groups: within,
                ..Default::default()
            };
            let reader = Scan::builder(f.path())
                .with_device(Device::Host)
                .with_coalescing(cfg)
                .build_file()
                .unwrap();
            let plan = reader.plan();
            let total = plan.request_bytes();
            // one wave when the target is the whole load
            let one = waves(plan, u64::MAX, &|_| true);
            assert_eq!(one.len(), 1);
            assert_eq!(one[0].row_groups, plan.row_groups);
            assert_eq!(one[0].bytes, total);
            for target in [1, total / 5, total / 2] {
                let w = waves(plan, target, &|_| true);
                // a unit is never split: with 2 MiB units this file is one unit, one wave
                assert!(
                    w.len() > 1 || plan.units.len() == 1,
                    "{unit}, {target}: {w:?}"
                );
                let rgs: Vec<usize> = w.iter().flat_map(|w| w.row_groups.clone()).collect();
                assert_eq!(rgs, plan.row_groups);
                assert_eq!(w.iter().map(|w| w.bytes).sum::<u64>(), total);
                for (a, b) in w.iter().zip(w.iter().skip(1)) {
                    assert_eq!(a.chunks.end, b.chunks.start);
                    assert_eq!(a.requests.end, b.requests.start);
                    assert!(a.bytes >= target, "only the last wave may be short");
                }
                for x in &w {
                    // the wave's chunks are exactly those of its row groups
                    assert!(plan.chunks[x.chunks.clone()]
                        .iter()
                        .all(|c| x.row_groups.contains(&c.row_group)));
                    let n: usize = x
                        .row_groups
                        .iter()
                        .map(|&rg| plan.chunks_of_row_group(rg).count())
                        .sum();
                    assert_eq!(n, x.chunks.len());
                }
            }
        }
        const MIB: u64 = 1 << 20;
        let wave = UNCOMPRESSED_WAVE_BYTES;
        // uncompressed loads: one wave below 128 MiB, streamed waves up to 4 GiB, then 1 GiB
        assert_eq!(wave_target(100 * MIB, 0, 0, None), u64::MAX);
        assert_eq!(wave_target(2 << 30, 0, 0, None), wave);
        assert_eq!(wave_target(16 << 30, 0, 0, None), 1 << 30);
        // loads mostly decompressed by the device: two waves from 128 MiB, below it one
        assert_eq!(wave_target(550 * MIB, 550 * MIB, 0, None), 275 * MIB);
        assert_eq!(wave_target(550 * MIB, 275 * MIB, 0, None), 275 * MIB);
        assert_eq!(wave_target(100 * MIB, 100 * MIB, 0, None), u64::MAX);
        assert_eq!(wave_target(16 << 30, 16 << 30, 0, None), 1 << 30);
        // loads mostly decompressed by the host: one wave up to 4 GiB
        assert_eq!(wave_target(550 * MIB, 0, 300 * MIB, None), u64::MAX);
        assert_eq!(wave_target(550 * MIB, 0, 275 * MIB, None), u64::MAX);
        assert_eq!(wave_target(550 * MIB, 100 * MIB, 200 * MIB, None), wave);
        assert_eq!(wave_target(16 << 30, 0, 16 << 30, None), 1 << 30);
        // a setting wins; 0 never pipelines
        assert_eq!(wave_target(550 * MIB, 550 * MIB, 0, Some(0)), u64::MAX);
        assert_eq!(wave_target(2 << 30, 2 << 30, 0, Some(MIB)), MIB);
    }
}
