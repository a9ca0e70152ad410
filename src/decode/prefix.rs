//! The first bytes of a compressed page, decompressed no further than asked: what the level
//! check ([`levels`](super::levels)) needs of a v1 data page, whose repetition and definition
//! levels lie at the start of its decompressed data. A page is decompressed in full only where
//! its codec cannot stop early here (Hadoop-framed LZ4, LZO).
//!
//! The prefix is exactly the start of what the full decompression produces. A stream damaged
//! past the prefix is not noticed here: the decoder reports it. One damaged inside the prefix
//! is an error, which the level check leaves to the decoder too.

use std::io::Read;

use parquet::basic::Compression;

use super::snappy_host::{copy_offset, element};

/// The first `n` bytes (fewer where the stream is shorter) of `values`, written with `codec`
/// and claiming `want` decompressed bytes. `None` where this codec is not decompressed in part.
pub(crate) fn prefix(
    codec: Compression,
    values: &[u8],
    want: usize,
    n: usize,
) -> Option<Result<Vec<u8>, String>> {
    let n = n.min(want);
    Some(match codec {
        Compression::SNAPPY => snappy_prefix(values, n),
        Compression::LZ4_RAW => lz4_prefix(values, n),
        Compression::GZIP(_) => read_prefix(flate2::read::MultiGzDecoder::new(values), n),
        Compression::BROTLI(_) => read_prefix(brotli::Decompressor::new(values, 4096), n),
        Compression::ZSTD(_) => zstd_prefix(values, want, n),
        _ => return None,
    })
}

/// The first `n` bytes of ZSTD frames claiming `want` bytes. Streamed, with the window a frame
/// may ask for bounded by the page's claimed size; where that fails — a frame asking for more
/// (written by a streaming compressor without its content size, as parquet-mr's zstd-jni
/// writes, with the window of its level however small the page), or a damaged one — the page
/// is decompressed whole into the claimed size instead, as the decoder would, so its levels are
/// still checked (a damaged page keeps the streamed error).
fn zstd_prefix(values: &[u8], want: usize, n: usize) -> Result<Vec<u8>, String> {
    let log = usize::BITS - want.max(1 << 10).next_power_of_two().leading_zeros();
    zstd::stream::read::Decoder::with_buffer(values)
        .and_then(|mut d| {
            d.window_log_max(log.min(31))?;
            Ok(d)
        })
        .map_err(|e| e.to_string())
        .and_then(|d| read_prefix(d, n))
        .or_else(|streamed| {
            let mut whole = vec![0u8; want];
            let got = zstd::bulk::decompress_to_buffer(values, &mut whole[..])
                .map_err(|_| streamed)?;
            whole.truncate(got.min(n));
            Ok(whole)
        })
}

/// Reads up to `n` bytes of `r`.
fn read_prefix(r: impl Read, n: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(n);
    r.take(n as u64)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// Copies `len` bytes from `off` bytes back in `out` (the copy may overlap what it writes),
/// stopping at `n` bytes of output.
fn back_copy(out: &mut Vec<u8>, off: usize, len: usize, n: usize) -> Result<(), String> {
    if off == 0 || off > out.len() {
        return Err(format!(
            "a copy from {off} bytes back at output byte {}",
            out.len()
        ));
    }
    let start = out.len() - off;
    for k in 0..len.min(n - out.len()) {
        let b = out[start + k];
        out.push(b);
    }
    Ok(())
}

/// The first `n` bytes of a SNAPPY stream.
fn snappy_prefix(src: &[u8], n: usize) -> Result<Vec<u8>, String> {
    let cut = || "the stream ends inside an element".to_string();
    let mut p = 0usize;
    // the stream's own length, a varint
    let mut total = 0u64;
    for shift in (0..35).step_by(7) {
        let b = *src.get(p).ok_or_else(cut)?;
        p += 1;
        total |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
    }
    let n = n.min(usize::try_from(total).unwrap_or(usize::MAX));
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let (inp, len) = element(src, p).ok_or_else(cut)?;
        match copy_offset(src, p) {
            // a literal: its bytes end the element
            None => {
                let lit = &src[p + inp - len..p + inp];
                out.extend_from_slice(&lit[..len.min(n - out.len())]);
            }
            Some(off) => back_copy(&mut out, off, len, n)?,
        }
        p += inp;
    }
    Ok(out)
}

/// The first `n` bytes of an LZ4 block.
fn lz4_prefix(src: &[u8], n: usize) -> Result<Vec<u8>, String> {
    let cut = || "the block ends inside a sequence".to_string();
    let mut out = Vec::with_capacity(n);
    let mut p = 0usize;
    let extend = |p: &mut usize, len: &mut usize| -> Result<(), String> {
        loop {
            let b = *src.get(*p).ok_or_else(cut)?;
            *p += 1;
            *len = len.saturating_add(b as usize);
            if b != 255 {
                return Ok(());
            }
        }
    };
    while out.len() < n {
        let token = *src.get(p).ok_or_else(cut)?;
        p += 1;
        let mut lit = (token >> 4) as usize;
        if lit == 15 {
            extend(&mut p, &mut lit)?;
        }
        let l = src.get(p..p.saturating_add(lit)).ok_or_else(cut)?;
        out.extend_from_slice(&l[..lit.min(n - out.len())]);
        p += lit;
        if p == src.len() || out.len() >= n {
            break;
        }
        let off = src.get(p..p + 2).ok_or_else(cut)?;
        let off = u16::from_le_bytes([off[0], off[1]]) as usize;
        p += 2;
        let mut m = (token & 15) as usize;
        if m == 15 {
            extend(&mut p, &mut m)?;
        }
        back_copy(&mut out, off, m.saturating_add(4), n)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        // runs, repeats and noise, so the streams hold literals and copies of every kind
        let mut x = 7u64;
        (0..200_000u32)
            .map(|i| match (i / 5_000) % 3 {
                0 => (i / 700) as u8,
                1 => b"levels and values "[i as usize % 18],
                _ => {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                }
            })
            .collect()
    }

    #[test]
    fn prefixes_equal_the_start_of_the_whole() {
        use std::io::Write;
        let raw = sample();
        let snappy = snap::raw::Encoder::new().compress_vec(&raw).unwrap();
        let lz4 = lz4_flex::block::compress(&raw);
        let zstd = zstd::bulk::compress(&raw, 3).unwrap();
        let mut gzip = Vec::new();
        let mut w = flate2::write::GzEncoder::new(&mut gzip, flate2::Compression::default());
        w.write_all(&raw).unwrap();
        w.finish().unwrap();
        let mut brotli = Vec::new();
        brotli::BrotliCompress(&mut &raw[..], &mut brotli, &Default::default()).unwrap();
        for (codec, data) in [
            (Compression::SNAPPY, &snappy),
            (Compression::LZ4_RAW, &lz4),
            (Compression::ZSTD(Default::default()), &zstd),
            (Compression::GZIP(Default::default()), &gzip),
            (Compression::BROTLI(Default::default()), &brotli),
        ] {
            for n in [0, 1, 4, 17, 4096, 65_537, 150_001, raw.len(), raw.len() + 10] {
                let got = prefix(codec, data, raw.len(), n).unwrap().unwrap();
                assert_eq!(got, raw[..n.min(raw.len())], "{codec:?} prefix of {n}");
            }
        }
        assert!(prefix(Compression::LZ4, &lz4, raw.len(), 4).is_none());
    }

    #[test]
    fn zstd_frames_with_a_window_larger_than_the_page_still_give_their_prefix() {
        use std::io::Write;
        // a streamed frame (no content size) with a 16 MiB window over a 40 KB page
        let raw: Vec<u8> = sample().into_iter().take(40_000).collect();
        let mut frame = Vec::new();
        let mut w = zstd::stream::write::Encoder::new(&mut frame, 3).unwrap();
        w.include_contentsize(false).unwrap();
        w.window_log(24).unwrap();
        w.write_all(&raw).unwrap();
        w.finish().unwrap();
        // (the streamed decoder alone refuses it)
        let bounded = zstd::stream::read::Decoder::with_buffer(&frame[..]).and_then(|mut d| {
            d.window_log_max(16)?;
            Ok(d)
        });
        let e = bounded.map_err(|e| e.to_string()).and_then(|d| read_prefix(d, 10));
        assert!(e.is_err(), "{e:?}");
        let zstd = Compression::ZSTD(Default::default());
        for n in [1, 100, 39_999, 40_000] {
            let got = prefix(zstd, &frame, raw.len(), n).unwrap().unwrap();
            assert_eq!(got, raw[..n], "prefix of {n}");
        }
        // a page claiming less than the frame holds is an error, as the decoder's
        assert!(prefix(zstd, &frame, 1000, 10).unwrap().is_err());
    }

    #[test]
    fn damaged_prefixes_are_errors_never_panics() {
        // a copy before the start, an offset of 0, streams cut short
        assert!(snappy_prefix(&[8, 0x01, 9], 8).is_err());
        assert!(snappy_prefix(&[8, 0x00, b'a', 0x02, 0, 0], 8).is_err());
        assert_eq!(snappy_prefix(&[3, 0x00, b'a', 0x06, 1, 0], 3).unwrap(), b"aaa");
        assert!(lz4_prefix(&[0x10, b'a', 5, 0], 5).is_err());
        assert!(lz4_prefix(&[0x10, b'a', 0, 0], 5).is_err());
        assert!(lz4_prefix(&[0xf0, 255, 255], 5).is_err());
        assert_eq!(lz4_prefix(&[0x10, b'a', 1, 0], 5).unwrap(), b"aaaaa");
        let raw = sample();
        let snappy = snap::raw::Encoder::new().compress_vec(&raw).unwrap();
        let lz4 = lz4_flex::block::compress(&raw);
        let mut x = 1u64;
        for _ in 0..2_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for data in [&snappy, &lz4] {
                let mut d = data[..(x as usize % 3_000).min(data.len())].to_vec();
                if let Some(b) = d.get_mut((x >> 20) as usize % 3_000) {
                    *b = (x >> 40) as u8;
                }
                let _ = snappy_prefix(&d, 2_000);
                let _ = lz4_prefix(&d, 2_000);
            }
        }
    }
}
