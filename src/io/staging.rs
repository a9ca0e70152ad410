//! Planning staged copies: which file bytes go into which bounce buffer, and which single copy
//! moves each filled buffer to the device. Pure; the staged reader executes it.
//!
//! Requests whose destinations are contiguous (the plan lays a unit's requests end to end) share
//! a bounce buffer and move with one copy, so many small ranges cost one copy instead of one
//! synchronous bounce-and-copy each — the cost that makes small reads slow in KvikIO. A request
//! larger than a bounce buffer spans several, each one copy.

use std::ops::Range;

use crate::plan::IoRequest;

/// A file read into a bounce buffer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct StagedRead {
    /// Index of the request the bytes belong to.
    pub(crate) request: usize,
    /// File bytes.
    pub(crate) file: Range<u64>,
    /// Where they land in the bounce buffer.
    pub(crate) bounce_offset: u64,
}

/// One fill of a bounce buffer and the one copy that empties it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct StagingSlot {
    /// Destination bytes the copy writes (bounce bytes `0..dest.len()`).
    pub(crate) dest: Range<u64>,
    /// Reads that fill the buffer, end to end from offset 0.
    pub(crate) reads: Vec<StagedRead>,
}

/// Plans the staging of `selected` requests (indices into `requests`) through bounce buffers of
/// `bounce_size` bytes.
pub(crate) fn plan_staging(
    requests: &[IoRequest],
    selected: &[usize],
    bounce_size: u64,
) -> Vec<StagingSlot> {
    let bounce = bounce_size.max(1);
    let mut order: Vec<usize> = selected.to_vec();
    order.sort_by_key(|&i| requests[i].dest_offset);
    let mut slots: Vec<StagingSlot> = Vec::new();
    for i in order {
        let q = &requests[i];
        let mut file = q.range.start;
        let mut dest = q.dest_offset;
        while file < q.range.end {
            let joinable = slots
                .last()
                .is_some_and(|s| s.dest.end == dest && s.dest.end - s.dest.start < bounce);
            if !joinable {
                slots.push(StagingSlot {
                    dest: dest..dest,
                    reads: Vec::new(),
                });
            }
            let Some(slot) = slots.last_mut() else { break };
            let room = bounce - (slot.dest.end - slot.dest.start);
            let n = room.min(q.range.end - file);
            slot.reads.push(StagedRead {
                request: i,
                file: file..file + n,
                bounce_offset: slot.dest.end - slot.dest.start,
            });
            slot.dest.end += n;
            file += n;
            dest += n;
        }
    }
    slots
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reqs(spec: &[(u64, u64, u64)]) -> Vec<IoRequest> {
        spec.iter()
            .map(|&(start, len, dest)| IoRequest {
                range: start..start + len,
                dest_offset: dest,
                chunks: vec![],
            })
            .collect()
    }

    fn check(requests: &[IoRequest], selected: &[usize], bounce: u64) -> Vec<StagingSlot> {
        let slots = plan_staging(requests, selected, bounce);
        let mut covered: Vec<(u64, u64)> = Vec::new(); // (dest, file) pairs, sampled per read
        let mut total = 0;
        for s in &slots {
            assert!(s.dest.end - s.dest.start <= bounce, "slot too large: {s:?}");
            let mut off = 0;
            for r in &s.reads {
                assert_eq!(r.bounce_offset, off, "reads not end to end: {s:?}");
                let q = &requests[r.request];
                // the bytes land where the request wants them
                assert_eq!(
                    s.dest.start + r.bounce_offset,
                    q.dest_offset + (r.file.start - q.range.start)
                );
                off += r.file.end - r.file.start;
                covered.push((s.dest.start + r.bounce_offset, r.file.end - r.file.start));
            }
            assert_eq!(off, s.dest.end - s.dest.start);
            total += off;
        }
        let want: u64 = selected.iter().map(|&i| requests[i].len()).sum();
        assert_eq!(total, want, "every byte exactly once");
        covered.sort();
        for w in covered.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "overlap");
        }
        slots
    }

    #[test]
    fn small_contiguous_ranges_share_one_copy() {
        // 64 ranges of 4 KiB, laid end to end in the destination, scattered in the file
        let spec: Vec<(u64, u64, u64)> = (0..64).map(|k| (k * 1_000_000, 4096, k * 4096)).collect();
        let r = reqs(&spec);
        let all: Vec<usize> = (0..64).collect();
        let slots = check(&r, &all, 16 << 20);
        assert_eq!(slots.len(), 1);
        assert_eq!(slots[0].reads.len(), 64);
        // a smaller bounce buffer: one copy per 64 KiB
        assert_eq!(check(&r, &all, 64 << 10).len(), 4);
    }

    #[test]
    fn large_ranges_span_buffers_and_gaps_split_copies() {
        let r = reqs(&[(0, 10_000, 0), (50_000, 100, 10_000), (90_000, 100, 20_000)]);
        let slots = check(&r, &[0, 1, 2], 4096);
        // 10,000 bytes → 3 buffers; request 1 joins the third (contiguous dest); request 2 does
        // not (its destination is not contiguous)
        assert_eq!(slots.len(), 4);
        assert_eq!(slots[2].reads.len(), 2);
        assert_eq!(slots[3].dest, 20_000..20_100);
        // only the selected requests
        let slots = check(&r, &[2, 1], 4096);
        assert_eq!(slots.len(), 2);
    }

    #[test]
    fn randomized() {
        let mut s = 0x1234_5678_9abc_def0u64;
        let mut next = move |n: u64| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s % n.max(1)
        };
        for _ in 0..200 {
            let n = 1 + next(30) as usize;
            let mut dest = 0;
            let mut spec = Vec::new();
            for _ in 0..n {
                let len = 1 + next(50_000);
                dest += next(3) * next(1000); // sometimes a hole between destinations
                spec.push((next(1 << 30), len, dest));
                dest += len;
            }
            let r = reqs(&spec);
            let sel: Vec<usize> = (0..n).filter(|_| next(4) != 0).collect();
            check(&r, &sel, 1 + next(70_000));
        }
    }
}
