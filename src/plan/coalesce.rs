//! Coalescing column-chunk ranges into I/O requests.
//!
//! Chunk ranges are first widened to [`ALIGNMENT`] (clamped to the file), then neighbours whose
//! gap is at most [`MAX_GAP`] are merged, and merged runs longer than [`MAX_REQUEST_SIZE`] are
//! cut into requests of at most that size at aligned boundaries. The destination of a read is
//! one buffer: the requests laid end to end in file order. Because every merged run is laid out
//! contiguously, each chunk is one contiguous slice of that buffer, even when it spans several
//! requests.

use std::ops::Range;

/// Largest gap (in bytes, between aligned ranges) that is read through rather than split into
/// two requests: 64 KiB. Reading 64 KiB of unwanted page-cached bytes costs a few microseconds,
/// about what one more request costs.
pub const MAX_GAP: u64 = 64 << 10;

/// Largest single request: 32 MiB. Large enough that per-request overhead vanishes, small
/// enough to bound a bounce buffer and spread a big chunk over several requests.
pub const MAX_REQUEST_SIZE: u64 = 32 << 20;

/// Requests start and end on multiples of this (except at the end of the file): 4 KiB, the page
/// size and the `O_DIRECT` / cuFile alignment.
pub const ALIGNMENT: u64 = 4096;

/// Coalescing parameters; [`CoalesceConfig::default`] uses the constants above.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CoalesceConfig {
    /// See [`MAX_GAP`].
    pub max_gap: u64,
    /// See [`MAX_REQUEST_SIZE`]; must be a positive multiple of `alignment`.
    pub max_request_size: u64,
    /// See [`ALIGNMENT`]; a power of two.
    pub alignment: u64,
    /// See [`UNIT_TARGET_BYTES`](crate::plan::UNIT_TARGET_BYTES).
    pub unit_target_bytes: u64,
    /// Units never hold cells of two row groups (device loads: their waves cut between row
    /// groups, at unit boundaries).
    pub units_within_row_groups: bool,
}

impl Default for CoalesceConfig {
    fn default() -> Self {
        CoalesceConfig {
            max_gap: MAX_GAP,
            max_request_size: MAX_REQUEST_SIZE,
            alignment: ALIGNMENT,
            unit_target_bytes: crate::plan::UNIT_TARGET_BYTES,
            units_within_row_groups: false,
        }
    }
}

/// One read: a byte range of the file and where it lands in the destination buffer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IoRequest {
    /// File bytes to read.
    pub range: Range<u64>,
    /// Offset of `range.start` in the destination buffer.
    pub dest_offset: u64,
    /// Indices (into the plan's chunks) of the chunks this request carries bytes of.
    pub chunks: Vec<usize>,
}

impl IoRequest {
    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.range.end - self.range.start
    }

    /// True for an empty request (never produced by [`coalesce`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Coalesces `ranges` (one per chunk, any order, possibly overlapping, within `file_len`) into
/// requests. Returns the requests in file order and, for each input range, its offset in the
/// destination buffer (0 for an empty range).
pub fn coalesce(
    ranges: &[Range<u64>],
    file_len: u64,
    cfg: &CoalesceConfig,
) -> (Vec<IoRequest>, Vec<u64>) {
    debug_assert!(cfg.alignment.is_power_of_two());
    debug_assert!(cfg.max_request_size >= cfg.alignment);
    debug_assert!(cfg.max_request_size.is_multiple_of(cfg.alignment));
    let a = cfg.alignment;
    let mut order: Vec<usize> = (0..ranges.len())
        .filter(|&i| ranges[i].end > ranges[i].start)
        .collect();
    let aligned = |r: &Range<u64>| {
        let start = r.start / a * a;
        let end = r.end.div_ceil(a).saturating_mul(a).min(file_len.max(r.end));
        start..end
    };
    order.sort_by_key(|&i| (ranges[i].start, ranges[i].end));

    // Merge aligned ranges into runs.
    let mut runs: Vec<Range<u64>> = Vec::new();
    for &i in &order {
        let r = aligned(&ranges[i]);
        match runs.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(cfg.max_gap) => {
                last.end = last.end.max(r.end);
            }
            _ => runs.push(r),
        }
    }

    // Cut runs into requests at aligned boundaries relative to the file.
    let mut requests: Vec<IoRequest> = Vec::new();
    let mut dest = 0u64;
    for run in &runs {
        let mut start = run.start;
        while start < run.end {
            let end = (start + cfg.max_request_size).min(run.end);
            requests.push(IoRequest {
                range: start..end,
                dest_offset: dest,
                chunks: Vec::new(),
            });
            dest += end - start;
            start = end;
        }
    }

    // Map chunks to requests and destination offsets.
    let mut dest_offsets = vec![0u64; ranges.len()];
    for &i in &order {
        let r = &ranges[i];
        let first = requests.partition_point(|q| q.range.end <= r.start);
        let q = &requests[first];
        dest_offsets[i] = q.dest_offset + (r.start - q.range.start);
        for q in requests[first..].iter_mut() {
            if q.range.start >= r.end {
                break;
            }
            q.chunks.push(i);
        }
    }
    for q in &mut requests {
        q.chunks.sort_unstable();
    }
    (requests, dest_offsets)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift64*), so failures reproduce from the seed.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    fn check(ranges: &[Range<u64>], file_len: u64, cfg: &CoalesceConfig) {
        let (reqs, dests) = coalesce(ranges, file_len, cfg);
        // sorted, disjoint, bounded, laid out end to end
        let mut dest = 0;
        for (k, q) in reqs.iter().enumerate() {
            assert!(!q.is_empty());
            assert!(
                q.len() <= cfg.max_request_size,
                "request {k} too large: {q:?}"
            );
            assert!(q.range.end <= file_len.max(ranges.iter().map(|r| r.end).max().unwrap_or(0)));
            assert_eq!(q.dest_offset, dest);
            dest += q.len();
            if k > 0 {
                assert!(reqs[k - 1].range.end <= q.range.start, "overlap at {k}");
            }
            assert!(
                q.range.start % cfg.alignment == 0,
                "unaligned request start {q:?}"
            );
        }
        // a simulated file: byte at offset o is (o * 31 + 7) as u8
        let byte = |o: u64| (o.wrapping_mul(31).wrapping_add(7)) as u8;
        let mut buf = vec![0u8; dest as usize];
        let mut written = vec![0u32; dest as usize];
        for q in &reqs {
            for o in q.range.clone() {
                let d = (q.dest_offset + o - q.range.start) as usize;
                buf[d] = byte(o);
                written[d] += 1;
            }
        }
        assert!(written.iter().all(|&w| w == 1));
        for (i, r) in ranges.iter().enumerate() {
            if r.is_empty() {
                continue;
            }
            // every chunk is exactly one contiguous slice of the destination holding its bytes
            for o in r.clone() {
                let d = (dests[i] + o - r.start) as usize;
                assert_eq!(buf[d], byte(o), "chunk {i} byte {o}");
            }
            // the requests that name the chunk are exactly those that overlap it
            for (k, q) in reqs.iter().enumerate() {
                let overlaps = q.range.start < r.end && r.start < q.range.end;
                assert_eq!(q.chunks.contains(&i), overlaps, "chunk {i} request {k}");
            }
        }
        // no gap between consecutive requests of one run, and runs are separated by more
        // than the tolerance (otherwise they would have been merged)
        for w in reqs.windows(2) {
            let gap = w[1].range.start - w[0].range.end;
            assert!(
                gap == 0 || gap > cfg.max_gap,
                "gap {gap} should have been merged"
            );
        }
        // inside a request, holes between aligned chunk ranges stay within the tolerance
        for q in &reqs {
            let mut covered: Vec<Range<u64>> = q
                .chunks
                .iter()
                .map(|&i| {
                    let r = &ranges[i];
                    let s = r.start / cfg.alignment * cfg.alignment;
                    let e = r.end.div_ceil(cfg.alignment) * cfg.alignment;
                    s.max(q.range.start)..e.min(q.range.end)
                })
                .collect();
            covered.sort_by_key(|r| r.start);
            let mut end = q.range.start;
            for c in covered {
                if c.start > end {
                    assert!(c.start - end <= cfg.max_gap, "hole in {q:?}");
                }
                end = end.max(c.end);
            }
        }
    }

    #[test]
    fn randomized_invariants() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for case in 0..300 {
            let alignment = [1u64, 512, 4096][case % 3];
            let cfg = CoalesceConfig {
                max_gap: [0, 100, 4096, 65536][rng.below(4) as usize],
                max_request_size: alignment * (1 + rng.below(16)),
                alignment,
                ..CoalesceConfig::default()
            };
            let file_len = 1 + rng.below(1 << 18);
            let n = rng.below(40) as usize;
            let ranges: Vec<Range<u64>> = (0..n)
                .map(|_| {
                    let s = rng.below(file_len);
                    let len = if rng.below(5) == 0 {
                        0
                    } else {
                        rng.below(file_len - s) + 1
                    };
                    s..s + len.min(file_len - s)
                })
                .collect();
            check(&ranges, file_len, &cfg);
        }
    }

    #[test]
    fn neighbours_merge_and_far_ones_do_not() {
        let cfg = CoalesceConfig::default();
        let ranges = vec![4..1000, 1000..5000, 10_000_000..10_000_100];
        let (reqs, dests) = coalesce(&ranges, 20_000_000, &cfg);
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[0].range, 0..8192);
        assert_eq!(reqs[0].chunks, vec![0, 1]);
        assert_eq!(reqs[1].range, 9_998_336..10_002_432);
        assert_eq!(dests, vec![4, 1000, 8192 + 10_000_000 - 9_998_336]);
    }

    #[test]
    fn large_chunk_is_split() {
        let cfg = CoalesceConfig::default();
        let ranges = vec![100..100 + 3 * MAX_REQUEST_SIZE];
        let (reqs, dests) = coalesce(&ranges, 4 * MAX_REQUEST_SIZE, &cfg);
        assert_eq!(reqs.len(), 4);
        assert!(reqs.iter().all(|q| q.chunks == vec![0]));
        assert_eq!(dests, vec![100]);
        check(&ranges, 4 * MAX_REQUEST_SIZE, &cfg);
    }

    #[test]
    fn end_of_file_is_not_padded() {
        let cfg = CoalesceConfig::default();
        let (reqs, _) = coalesce(&[10..5000], 5100, &cfg);
        assert_eq!(reqs[0].range, 0..5100);
    }
}
