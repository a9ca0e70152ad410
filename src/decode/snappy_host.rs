//! SNAPPY on the host, one large page over several cores.
//!
//! A SNAPPY stream is a varint length and a sequence of elements (literals and back-copies)
//! whose boundaries are only known by walking it from the start, so a single large page (a
//! dictionary page of a few hundred KiB) is usually one core's work: about half a millisecond
//! on the machines we measured, the whole latency budget of a small load. Two facts make it
//! parallel:
//!
//! - the reference compressor (and the `snap` crate) compresses its input in independent
//!   64 KiB blocks, so no element crosses a 64 KiB boundary of the output and no copy reaches
//!   into an earlier block;
//! - walking element headers from a wrong position soon lands on a true element start, after
//!   which the two walks agree.
//!
//! So [`decompress_into`] cuts the input into segments and walks each from its first byte as
//! if an element started there (in parallel), then follows the true chain across the segments
//! (sequentially, re-walking only until it meets a segment's recorded walk), which gives the
//! input position of each 64 KiB output boundary; the blocks are then decompressed in parallel
//! by `snap`, each as a stream of its own. A stream that does not fit this shape (a copy into an
//! earlier block, elements straddling the boundaries, a header that does not parse) is
//! decompressed whole by `snap`, which then also reports what is wrong. The result is always
//! exactly what `snap` produces for the whole stream.

use rayon::prelude::*;

/// Output bytes per block of the reference compressor.
const BLOCK: usize = 1 << 16;
/// Input bytes per segment of the parallel walk.
const SEGMENT: usize = 32 << 10;
/// Pages that decompress to fewer bytes stay on one core.
pub(crate) const PARALLEL_MIN: usize = 256 << 10;

/// Decompresses the SNAPPY stream `src` into `dst`, whose length must be the stream's
/// decompressed length; when `split`, a large stream over the current rayon pool (which costs
/// about twice the CPU time of one walk, so it pays only where cores would otherwise idle).
pub(crate) fn decompress_into(src: &[u8], dst: &mut [u8], split: bool) -> Result<(), String> {
    let want = snap::raw::decompress_len(src).map_err(|e| e.to_string())?;
    if want != dst.len() {
        return Err(format!(
            "the stream decompresses to {want} bytes, the page header says {}",
            dst.len()
        ));
    }
    if split && dst.len() >= PARALLEL_MIN && rayon::current_num_threads() > 1 {
        if let Some(blocks) = blocks(src, dst.len()) {
            if blocks.len() > 1 && decompress_blocks(src, dst, &blocks) {
                return Ok(());
            }
        }
    }
    whole(src, dst)
}

fn whole(src: &[u8], dst: &mut [u8]) -> Result<(), String> {
    let n = snap::raw::Decoder::new()
        .decompress(src, dst)
        .map_err(|e| e.to_string())?;
    if n != dst.len() {
        return Err(format!(
            "the stream decompressed to {n} bytes, expected {}",
            dst.len()
        ));
    }
    Ok(())
}

/// The element at `p`: (input bytes, output bytes); None where its header or literal runs past
/// the input.
#[inline]
pub(crate) fn element(src: &[u8], p: usize) -> Option<(usize, usize)> {
    let tag = *src.get(p)?;
    let (inp, out) = match tag & 3 {
        0 => {
            let l = (tag >> 2) as usize;
            if l < 60 {
                (1 + l + 1, l + 1)
            } else {
                let extra = l - 59;
                let bytes = src.get(p + 1..p + 1 + extra)?;
                let n = bytes
                    .iter()
                    .rev()
                    .fold(0usize, |v, &b| (v << 8) | b as usize)
                    + 1;
                (1 + extra + n, n)
            }
        }
        1 => (2, 4 + ((tag >> 2) & 7) as usize),
        2 => (3, (tag >> 2) as usize + 1),
        _ => (5, (tag >> 2) as usize + 1),
    };
    (p + inp <= src.len()).then_some((inp, out))
}

/// The offset of the copy at `p` (None for a literal), an element whose header [`element`]
/// found within the input.
pub(crate) fn copy_offset(src: &[u8], p: usize) -> Option<usize> {
    let le = |b: &[u8]| b.iter().rev().fold(0usize, |v, &x| (v << 8) | x as usize);
    let tag = src[p];
    match tag & 3 {
        0 => None,
        1 => Some(((tag as usize >> 5) << 8) | src[p + 1] as usize),
        2 => Some(le(&src[p + 1..p + 3])),
        _ => Some(le(&src[p + 1..p + 5])),
    }
}

/// Element starts a walk keeps from its beginning, where the true chain is looked for.
const FIRST: usize = 64;
/// A walk marks the first element at or past every this many output bytes, from where a block
/// boundary is found by a short walk.
const MARK: usize = 4096;

/// One segment's speculative walk, output counted from its start: its first [`FIRST`]
/// element starts and its marks (input position, output before the element), where it
/// stopped and the output it had produced.
struct Walk {
    first: Vec<(u32, u32)>,
    marks: Vec<(u32, u32)>,
    end: usize,
    out_end: usize,
}

fn walk(src: &[u8], from: usize, to: usize) -> Walk {
    let mut first = Vec::with_capacity(FIRST);
    let mut marks = Vec::with_capacity(4 * (to - from) / MARK + 1);
    let (mut p, mut out, mut mark) = (from, 0usize, 0usize);
    while p < to {
        let Some((i, o)) = element(src, p) else { break };
        if first.len() < FIRST {
            first.push((p as u32, out as u32));
        }
        if out >= mark {
            marks.push((p as u32, out as u32));
            mark = (out / MARK + 1) * MARK;
        }
        p += i;
        out += o;
    }
    Walk {
        first,
        marks,
        end: p,
        out_end: out,
    }
}

/// On `w`'s chain from its element at `e` (output `base`): the input position of the element
/// whose output starts at `target` (>= base), None when an element straddles it.
fn find_on_walk(src: &[u8], w: &Walk, e: usize, base: usize, target: usize) -> Option<usize> {
    // the last mark at or after e (so on the true chain) and not past the target
    let k = w.marks.partition_point(|m| (m.1 as usize) <= target);
    let (mut p, mut out) = match w.marks[..k].last() {
        Some(&(mp, mo)) if mp as usize >= e => (mp as usize, mo as usize),
        _ => (e, base),
    };
    while out < target {
        let (i, o) = element(src, p)?;
        p += i;
        out += o;
    }
    (out == target).then_some(p)
}

/// Input positions of the elements that start each block: (input position, output offset),
/// the first at the stream's first element; None when the stream does not walk to exactly its
/// end and length.
fn blocks(src: &[u8], len: usize) -> Option<Vec<(usize, usize)>> {
    if src.len() > u32::MAX as usize || len > u32::MAX as usize {
        return None;
    }
    let head = src.iter().position(|&b| b & 0x80 == 0)? + 1;
    let body = src.len() - head;
    let segments = body.div_ceil(SEGMENT);
    let walks: Vec<Walk> = (0..segments)
        .into_par_iter()
        .map(|k| {
            let from = head + k * SEGMENT;
            walk(src, from, (from + SEGMENT).min(src.len()))
        })
        .collect();
    let mut out_blocks = vec![(head, 0usize)];
    let (mut e, mut out) = (head, 0usize);
    // the next block boundary to find; always at or past `out`
    let mut next = BLOCK;
    for (k, w) in walks.iter().enumerate() {
        let seg_end = (head + (k + 1) * SEGMENT).min(src.len());
        while e < seg_end {
            if let Ok(i) = w.first.binary_search_by_key(&(e as u32), |s| s.0) {
                // the true chain joins this segment's walk: find its block starts on it
                let base = w.first[i].1 as usize;
                while next < len && next - out + base < w.out_end {
                    if let Some(p) = find_on_walk(src, w, e, base, next - out + base) {
                        out_blocks.push((p, next));
                    }
                    // (an element straddling the boundary joins its block to the one before)
                    next += BLOCK;
                }
                out += w.out_end - base;
                e = w.end;
                if e < seg_end {
                    // the walk stopped on an element that does not parse
                    return None;
                }
                break;
            }
            let (i, o) = element(src, e)?;
            if out == next && next < len {
                out_blocks.push((e, out));
                next += BLOCK;
            }
            e += i;
            out += o;
            // an element straddling boundaries joins their blocks to the one before; `next`
            // stays at or past `out` (what the joining branch above counts from)
            if next < out {
                next = out.div_ceil(BLOCK) * BLOCK;
            }
        }
    }
    (e == src.len() && out == len).then_some(out_blocks)
}

/// Decompresses each block as a stream of its own, blocks in parallel; false (with `dst` in
/// any state) when one of them does not decompress to exactly its share, e.g. a copy reaching
/// into the block before.
fn decompress_blocks(src: &[u8], dst: &mut [u8], blocks: &[(usize, usize)]) -> bool {
    let mut parts = Vec::with_capacity(blocks.len());
    let mut rest = dst;
    for (k, &(from, out)) in blocks.iter().enumerate() {
        let (to, out_to) = blocks
            .get(k + 1)
            .copied()
            .unwrap_or((src.len(), out + rest.len()));
        let (mine, tail) = rest.split_at_mut(out_to - out);
        parts.push((&src[from..to], mine));
        rest = tail;
    }
    parts.into_par_iter().all(|(input, out)| {
        let mut stream = Vec::with_capacity(input.len() + 5);
        let mut n = out.len();
        while n >= 0x80 {
            stream.push((n as u8) | 0x80);
            n >>= 7;
        }
        stream.push(n as u8);
        stream.extend_from_slice(input);
        matches!(snap::raw::Decoder::new().decompress(&stream, out), Ok(n) if n == out.len())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(data: &[u8]) {
        let c = snap::raw::Encoder::new().compress_vec(data).unwrap();
        let mut got = vec![0u8; data.len()];
        decompress_into(&c, &mut got, true).unwrap();
        assert!(got == data, "{} bytes differ", data.len());
        if data.len() > BLOCK {
            let b = blocks(&c, data.len()).expect("the walk reaches the end");
            assert_eq!(b.len(), data.len().div_ceil(BLOCK), "a block per 64 KiB");
            assert!(b.iter().enumerate().all(|(k, &(_, o))| o == k * BLOCK));
            let mut blockwise = vec![0u8; data.len()];
            assert!(
                decompress_blocks(&c, &mut blockwise, &b),
                "snap's blocks decode alone"
            );
            assert!(blockwise == data);
        }
    }

    fn lcg(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed;
        move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            s >> 33
        }
    }

    #[test]
    fn large_streams_equal_snap_whatever_they_hold() {
        let n = 800_000;
        // sorted keys: an element every few bytes
        check(
            &(0..n as u64 / 8)
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<_>>(),
        );
        // random bytes: long literals
        let mut r = lcg(7);
        check(&(0..n).map(|_| r() as u8).collect::<Vec<_>>());
        // runs and long copies
        check(&(0..n).map(|i| ((i / 5000) % 7) as u8).collect::<Vec<_>>());
        // text-like, lengths around the block size
        let mut r = lcg(11);
        let words = ["lorem", "ipsum", "dolor", "sit", "amet", "carefully", " "];
        for len in [
            BLOCK - 1,
            BLOCK,
            BLOCK + 1,
            3 * BLOCK + 17,
            PARALLEL_MIN + 1,
        ] {
            let text: Vec<u8> = (0..)
                .flat_map(|_| words[(r() % 7) as usize].bytes())
                .take(len)
                .collect();
            check(&text);
        }
        check(&[]);
        check(b"tiny");
    }

    #[test]
    fn corrupted_streams_succeed_or_fail_exactly_as_snap_does() {
        // a stream with every element kind: long literals, short copies, long runs
        let mut r = lcg(3);
        let data: Vec<u8> = (0..PARALLEL_MIN * 3)
            .map(|i| match (i / 4096) % 3 {
                0 => r() as u8,
                1 => (i % 97) as u8,
                _ => ((i / 8) as u32).to_le_bytes()[i % 4],
            })
            .collect();
        let good = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        let mut r = lcg(5);
        let (mut decoded, mut refused) = (0, 0);
        for round in 0..200 {
            let mut bad = good.clone();
            for _ in 0..1 + round % 3 {
                let at = 4 + (r() as usize) % (bad.len() - 4);
                bad[at] ^= 1 << (r() % 8);
            }
            let mut want = vec![0u8; data.len()];
            let snap_says = snap::raw::Decoder::new().decompress(&bad, &mut want);
            let mut got = vec![0u8; data.len()];
            match (decompress_into(&bad, &mut got, true), snap_says) {
                (Ok(()), Ok(n)) => {
                    assert_eq!(n, data.len(), "round {round}");
                    assert!(got == want, "round {round}: bytes differ from snap's");
                    decoded += 1;
                }
                (Err(_), Err(_)) => refused += 1,
                (Err(e), Ok(_)) => panic!("round {round}: snap decodes it, we fail: {e}"),
                (Ok(()), Err(e)) => panic!("round {round}: snap fails ({e}), we decode it"),
            }
        }
        // flips in literal bytes still decode, flips in element headers mostly do not
        assert!(
            decoded > 20 && refused > 20,
            "{decoded} decoded, {refused} refused"
        );
    }

    /// A hand-made stream (not the reference compressor's shape): its varint length, then
    /// `parts` (Ok: a literal of these bytes; Err((offset, len)): a copy), and what it
    /// decompresses to.
    fn stream(parts: &[std::result::Result<Vec<u8>, (usize, usize)>]) -> (Vec<u8>, Vec<u8>) {
        let mut want = Vec::new();
        let mut body = Vec::new();
        for p in parts {
            match p {
                Ok(bytes) => {
                    let m = bytes.len() - 1;
                    body.push(62 << 2);
                    body.extend_from_slice(&(m as u32).to_le_bytes()[..3]);
                    body.extend_from_slice(bytes);
                    want.extend_from_slice(bytes);
                }
                Err((offset, len)) => {
                    body.push(((*len as u8 - 1) << 2) | 2);
                    body.extend_from_slice(&(*offset as u16).to_le_bytes());
                    for _ in 0..*len {
                        want.push(want[want.len() - offset]);
                    }
                }
            }
        }
        let mut s = Vec::new();
        let mut n = want.len();
        while n >= 0x80 {
            s.push((n as u8) | 0x80);
            n >>= 7;
        }
        s.push(n as u8);
        s.extend_from_slice(&body);
        (s, want)
    }

    #[test]
    fn elements_straddling_blocks_then_joining_a_walk_decode_right() {
        // a literal straddling the 131,072 output boundary and ending exactly where a
        // segment's walk starts (so the chain joins that walk at once), then many short
        // literals: the boundaries after it are found or merged, never miscounted. Input:
        // 4-byte header + 65,536 bytes, a 3-byte copy, a 4-byte header + 65,525 bytes =
        // 131,072 bytes after the 3-byte varint
        let lit =
            |n: usize, seed: usize| Ok((0..n).map(|i| ((i * 7 + seed) % 251) as u8).collect());
        let mut parts = vec![lit(BLOCK, 1), Err((1000, 64)), lit(65_525, 2)];
        for k in 0..30_000 {
            parts.push(lit(9 + k % 5, k));
        }
        let (s, want) = stream(&parts);
        let mut got = vec![0u8; want.len()];
        decompress_into(&s, &mut got, true).unwrap();
        assert!(got == want);
    }

    #[test]
    fn random_block_shaped_streams_with_occasional_violations_equal_snap() {
        // streams shaped like the reference compressor's (elements inside 64 KiB output
        // blocks, copies within their block), some with one violation: a copy into the block
        // before, or a literal across a boundary
        let mut r = lcg(17);
        for round in 0..40 {
            let total = PARALLEL_MIN + (r() as usize % (3 * BLOCK));
            let violate = round % 4; // 0, 3: none; 1: a cross-block copy; 2: a straddling literal
            let mut parts = Vec::new();
            let mut made = 0usize;
            let mut violated = false;
            while made < total {
                let in_block = made % BLOCK;
                let room = (BLOCK - in_block).min(total - made);
                let pick = r() % 10;
                if !violated && violate == 1 && made > BLOCK && in_block == 0 {
                    parts.push(Err((in_block + 8, 8)));
                    made += 8;
                    violated = true;
                } else if !violated && violate == 2 && made > BLOCK && room < 2000 {
                    let n = room + 100;
                    parts.push(Ok((0..n).map(|_| r() as u8).collect()));
                    made += n;
                    violated = true;
                } else if pick < 4 || in_block < 8 {
                    let n = (1 + r() as usize % if pick == 0 { 5000 } else { 40 }).min(room);
                    parts.push(Ok((0..n).map(|_| (r() % 7) as u8).collect()));
                    made += n;
                } else {
                    let len = (4 + r() as usize % 61).min(room);
                    if len == 0 {
                        continue;
                    }
                    let offset = 1 + r() as usize % in_block.min(60_000);
                    parts.push(Err((offset, len)));
                    made += len;
                }
            }
            let (s, want) = stream(&parts);
            let mut check = vec![0u8; want.len()];
            snap::raw::Decoder::new()
                .decompress(&s, &mut check)
                .unwrap_or_else(|e| panic!("round {round}: the test stream is bad: {e}"));
            assert!(check == want, "round {round}: the test's own expectation");
            if violate == 0 || violate == 3 {
                // block-shaped: every boundary found, every block decodes alone
                let b = blocks(&s, want.len()).expect("the walk reaches the end");
                assert_eq!(b.len(), want.len().div_ceil(BLOCK), "round {round}");
                let mut blockwise = vec![0u8; want.len()];
                assert!(decompress_blocks(&s, &mut blockwise, &b), "round {round}");
                assert!(blockwise == want, "round {round}");
            }
            let mut got = vec![0u8; want.len()];
            decompress_into(&s, &mut got, true).unwrap();
            assert!(
                got == want,
                "round {round} (violation {violate}): bytes differ"
            );
        }
    }

    #[test]
    fn copies_across_blocks_and_bad_streams_fall_back_to_one_walk() {
        // hand-made: a literal of 65,536 bytes, then a copy reaching into the first block
        // (valid SNAPPY, but not block-shaped), padded with literals to be large enough
        let first: Vec<u8> = (0..BLOCK).map(|i| (i * 31 % 251) as u8).collect();
        let mut s = Vec::new();
        let total = BLOCK + 64 + PARALLEL_MIN;
        let mut n = total;
        while n >= 0x80 {
            s.push((n as u8) | 0x80);
            n >>= 7;
        }
        s.push(n as u8);
        let literal = |s: &mut Vec<u8>, bytes: &[u8]| {
            let m = bytes.len() - 1;
            s.push(62 << 2);
            s.extend_from_slice(&(m as u32).to_le_bytes()[..3]);
            s.extend_from_slice(bytes);
        };
        literal(&mut s, &first);
        // copy-2: 64 bytes from 1,000 back (inside block 0)
        s.push((63 << 2) | 2);
        s.extend_from_slice(&1000u16.to_le_bytes());
        let pad: Vec<u8> = (0..PARALLEL_MIN).map(|i| (i % 13) as u8).collect();
        literal(&mut s, &pad);
        let mut want = first.clone();
        let from = want.len() - 1000;
        let copied: Vec<u8> = want[from..from + 64].to_vec();
        want.extend_from_slice(&copied);
        want.extend_from_slice(&pad);
        let b = blocks(&s, total).expect("the stream walks to its end");
        assert_eq!(b.len(), 2, "a block starts with the copy at 65,536");
        let mut got = vec![0u8; total];
        assert!(
            !decompress_blocks(&s, &mut got, &b),
            "the copy reaches into block 0"
        );
        decompress_into(&s, &mut got, true).unwrap();
        assert!(got == want);

        // a truncated stream is an error, not a panic
        let good = snap::raw::Encoder::new()
            .compress_vec(&vec![3u8; PARALLEL_MIN * 2])
            .unwrap();
        let mut out = vec![0u8; PARALLEL_MIN * 2];
        assert!(decompress_into(&good[..good.len() - 3], &mut out, true).is_err());
        // a wrong expected length is an error naming both
        let mut short = vec![0u8; 10];
        let e = decompress_into(&good, &mut short, true).unwrap_err();
        assert!(e.contains("page header says 10"), "{e}");
    }
}
