//! The mutant classes: each takes a file (bytes and, where it parses, its model) and a seeded
//! generator, and returns one mutant or `None` when the file has nothing it can change.

use super::model::{self, File, Unpacked};
use super::thrift::{self, Value};

/// xorshift64: every mutant reproduces from (file, class, seed).
pub struct Rng(pub u64);

impl Rng {
    /// A generator for one (file, class, index): splitmix64 over the parts, so that
    /// neighbouring parts give unrelated streams.
    pub fn seeded(seed: u64, parts: &[u64]) -> Self {
        let mut z = seed;
        for p in parts {
            z = z
                .wrapping_add(p.wrapping_add(1))
                .wrapping_mul(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
        }
        Rng(z | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> Option<&'a T> {
        (!v.is_empty()).then(|| &v[self.below(v.len())])
    }
}

/// Row group `rg` of the footer (FileMetaData field 4).
fn group_mut(footer: &mut thrift::Struct, rg: usize) -> Option<&mut thrift::Struct> {
    match thrift::list_mut(footer, 4)?.get_mut(rg)? {
        Value::Struct(g) => Some(g),
        _ => None,
    }
}

/// The column metadata (ColumnChunk field 3) of column `col` of row group `rg`.
fn chunk_meta_mut(
    footer: &mut thrift::Struct,
    rg: usize,
    col: usize,
) -> Option<&mut thrift::Struct> {
    match thrift::list_mut(group_mut(footer, rg)?, 1)?.get_mut(col)? {
        Value::Struct(cc) => thrift::child_mut(cc, 3),
        _ => None,
    }
}

/// A mutated file and what was done to it.
pub struct Mutant {
    pub class: &'static str,
    pub what: String,
    pub bytes: Vec<u8>,
}

/// The classes, by name, in the order the report lists them.
pub const CLASSES: &[&str] = &[
    "bit-flip",
    "truncate",
    "drop-page",
    "footer-int",
    "footer-binary",
    "schema",
    "row-counts",
    "count-claims",
    "arrow-schema",
    "statistics",
    "page-header",
    "dict-indices",
    "bit-widths",
    "string-lengths",
    "levels",
    "bomb-claim",
    "bomb-real",
];

/// An integer a field is likely to break on, near `v` or at a boundary.
fn interesting(r: &mut Rng, v: i64) -> i64 {
    match r.below(12) {
        0 => 0,
        1 => -1,
        2 => v.wrapping_add(1),
        3 => v.wrapping_sub(1),
        4 => v.wrapping_mul(2),
        5 => v / 2,
        6 => i64::from(i32::MAX),
        7 => i64::from(i32::MIN),
        8 => i64::MAX,
        9 => 1 << 28,
        10 => r.below(16) as i64,
        _ => (r.next() >> 33) as i64,
    }
}

/// Changes the integer (or boolean) at `path` under `s`; its description.
fn poke_int(r: &mut Rng, s: &mut thrift::Struct, path: &[i32]) -> Option<String> {
    let v = thrift::at_mut(s, path)?;
    let name = thrift::path_name(path);
    Some(match v {
        Value::Bool(b) => {
            *b = !*b;
            format!("{name} = {b}")
        }
        Value::Byte(x) => {
            let old = *x;
            *x = interesting(r, i64::from(*x)) as i8;
            format!("{name}: {old} -> {x}")
        }
        Value::I16(x) => {
            let old = *x;
            *x = interesting(r, i64::from(*x)) as i16;
            format!("{name}: {old} -> {x}")
        }
        Value::I32(x) => {
            let old = *x;
            *x = interesting(r, i64::from(*x)) as i32;
            format!("{name}: {old} -> {x}")
        }
        Value::I64(x) => {
            let old = *x;
            *x = interesting(r, *x);
            format!("{name}: {old} -> {x}")
        }
        _ => return None,
    })
}

/// Changes the bytes at `path`: truncated, emptied, one byte changed, or random.
fn poke_binary(r: &mut Rng, s: &mut thrift::Struct, path: &[i32]) -> Option<String> {
    let Value::Binary(b) = thrift::at_mut(s, path)? else {
        return None;
    };
    let name = thrift::path_name(path);
    let how = match r.below(4) {
        0 => {
            b.truncate(r.below(b.len().max(1)));
            "truncated"
        }
        1 => {
            b.clear();
            "emptied"
        }
        2 if !b.is_empty() => {
            let i = r.below(b.len());
            b[i] = r.next() as u8;
            "one byte changed"
        }
        _ => {
            let n = 1 + r.below(16);
            *b = (0..n).map(|_| r.next() as u8).collect();
            "random"
        }
    };
    Some(format!("{name} {how}"))
}

fn flip_bits(r: &mut Rng, bytes: &[u8]) -> Option<Mutant> {
    let mut b = bytes.to_vec();
    let n = 1 + r.below(8);
    let mut at = Vec::new();
    for _ in 0..n {
        let i = r.below(b.len());
        b[i] ^= 1 << r.below(8);
        at.push(i);
    }
    Some(Mutant {
        class: "bit-flip",
        what: format!("bits flipped at {at:?}"),
        bytes: b,
    })
}

/// Page starts and ends in the source file (where it parses), and the footer's start.
fn boundaries(bytes: &[u8]) -> Vec<usize> {
    let mut out = vec![4];
    if let Some(f) = model::parse(bytes) {
        let written = model::write(&f);
        if written != bytes {
            // boundaries of the re-written file only hold for it; use the raw footer
            out.push(bytes.len() - 8);
            return out;
        }
        let mut pos = 4;
        for c in &f.chunks {
            for p in &c.pages {
                pos += thrift::write(&p.header).len();
                out.push(pos);
                pos += p.body.len();
                out.push(pos);
            }
        }
    }
    out.push(bytes.len().saturating_sub(8));
    out
}

fn truncate(r: &mut Rng, bytes: &[u8]) -> Option<Mutant> {
    let b = boundaries(bytes);
    let cut = *r.pick(&b)?;
    let keep_footer = r.below(2) == 0;
    let mut out = bytes[..cut.min(bytes.len())].to_vec();
    if keep_footer {
        // the data cut short, the footer kept (its offsets now point past the data)
        let n = bytes.len();
        let flen = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().ok()?) as usize;
        out.extend_from_slice(&bytes[n.checked_sub(8 + flen)?..]);
    }
    Some(Mutant {
        class: "truncate",
        what: format!(
            "cut at byte {cut}{}",
            if keep_footer { ", footer kept" } else { "" }
        ),
        bytes: out,
    })
}

/// A mutant built from the model: `edit` changes it and describes the change.
fn structured(
    class: &'static str,
    f: &File,
    edit: impl FnOnce(&mut File) -> Option<String>,
) -> Option<Mutant> {
    let mut g = f.clone();
    let what = edit(&mut g)?;
    Some(Mutant {
        class,
        what,
        bytes: model::write(&g),
    })
}

/// (chunk, page) of a random data page.
fn data_page(r: &mut Rng, f: &File) -> Option<(usize, usize)> {
    let all: Vec<(usize, usize)> = f
        .chunks
        .iter()
        .enumerate()
        .flat_map(|(ci, c)| {
            c.pages
                .iter()
                .enumerate()
                .filter(|(_, p)| p.is_data())
                .map(move |(pi, _)| (ci, pi))
        })
        .collect();
    r.pick(&all).copied()
}

/// A random data page whose unpacked form passes `want`, unpacked; up to 16 tries.
fn unpacked_page(
    r: &mut Rng,
    f: &File,
    want: impl Fn(&File, usize, &Unpacked, i64) -> bool,
) -> Option<(usize, usize, Unpacked)> {
    for _ in 0..16 {
        let (ci, pi) = data_page(r, f)?;
        let c = &f.chunks[ci];
        let p = &c.pages[pi];
        let Some(u) = model::unpack(f, c, p) else {
            continue;
        };
        if want(f, ci, &u, model::encoding(p).unwrap_or(-1)) {
            return Some((ci, pi, u));
        }
    }
    None
}

fn repacked(
    class: &'static str,
    f: &File,
    ci: usize,
    pi: usize,
    u: &Unpacked,
    what: String,
) -> Option<Mutant> {
    structured(class, f, |g| {
        let c = g.chunks[ci].clone();
        let mut p = c.pages[pi].clone();
        model::repack(g, &c, &mut p, u)?;
        g.chunks[ci].pages[pi] = p;
        Some(format!(
            "row group {}, column {}, page {pi}: {what}",
            c.rg, c.col
        ))
    })
}

fn varint_at(b: &[u8], mut pos: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let x = *b.get(pos)?;
        pos += 1;
        v |= u64::from(x & 0x7f) << shift;
        if x & 0x80 == 0 {
            return Some((v, pos));
        }
    }
    None
}

/// One mutant of `class` from `bytes` (model `f` where it parses).
pub fn mutate(
    class: &str,
    r: &mut Rng,
    bytes: &[u8],
    f: Option<&File>,
    bomb: usize,
) -> Option<Mutant> {
    match class {
        "bit-flip" => flip_bits(r, bytes),
        "truncate" => truncate(r, bytes),
        "drop-page" => {
            let f = f?;
            let (ci, pi) = data_page(r, f)?;
            structured("drop-page", f, |g| {
                let c = &mut g.chunks[ci];
                c.pages.remove(pi);
                Some(format!(
                    "row group {}, column {}: data page {pi} dropped",
                    c.rg, c.col
                ))
            })
        }
        "footer-int" => {
            let f = f?;
            let paths = thrift::int_paths(&f.footer);
            let p = r.pick(&paths)?.clone();
            structured("footer-int", f, |g| {
                Some(format!("footer{}", poke_int(r, &mut g.footer, &p)?))
            })
        }
        "footer-binary" => {
            let f = f?;
            let paths = thrift::binary_paths(&f.footer);
            let p = r.pick(&paths)?.clone();
            structured("footer-binary", f, |g| {
                Some(format!("footer{}", poke_binary(r, &mut g.footer, &p)?))
            })
        }
        "schema" => {
            let f = f?;
            // schema elements: 1 type, 2 type_length, 3 repetition, 5 num_children,
            // 6 converted type, 7 scale, 8 precision, 10 logical type
            let paths: Vec<Vec<i32>> = thrift::int_paths(&f.footer)
                .into_iter()
                .filter(|p| p.first() == Some(&2) && p.len() >= 3)
                .collect();
            let p = r.pick(&paths)?.clone();
            structured("schema", f, |g| {
                let field = p[2];
                let v = thrift::at_mut(&mut g.footer, &p)?;
                let name = thrift::path_name(&p);
                match (field, v) {
                    (1 | 3 | 6, Value::I32(x)) => {
                        let old = *x;
                        *x = r.below(if field == 6 { 23 } else { 8 }) as i32;
                        Some(format!("schema{name}: {old} -> {x}"))
                    }
                    _ => Some(format!("schema{}", poke_int(r, &mut g.footer, &p)?)),
                }
            })
        }
        "row-counts" => {
            let f = f?;
            structured("row-counts", f, |g| {
                let groups = thrift::list(&g.footer, 4).len();
                let delta = [1i64, -1, 1000, -1000][r.below(4)];
                match r.below(3) {
                    0 => {
                        let n = thrift::int(&g.footer, 3)?;
                        thrift::set_int(&mut g.footer, 3, n + delta);
                        Some(format!("file num_rows {n} -> {}", n + delta))
                    }
                    1 => {
                        let rg = r.below(groups);
                        let gs = group_mut(&mut g.footer, rg)?;
                        let n = thrift::int(gs, 3)?;
                        thrift::set_int(gs, 3, n + delta);
                        Some(format!("row group {rg} num_rows {n} -> {}", n + delta))
                    }
                    _ => {
                        let c = r.pick(&g.chunks)?.clone();
                        let meta = chunk_meta_mut(&mut g.footer, c.rg, c.col)?;
                        let n = thrift::int(meta, 5)?;
                        thrift::set_int(meta, 5, n + delta);
                        Some(format!(
                            "row group {}, column {} num_values {n} -> {}",
                            c.rg,
                            c.col,
                            n + delta
                        ))
                    }
                }
            })
        }
        "count-claims" => {
            // a count the footer or a page header claims, set far past what the bytes hold (or
            // negative, or zero where rows exist): the file's rows, a row group's rows, a column
            // chunk's values, a page's values (or rows, or nulls)
            let f = f?;
            let claim = [1i64 << 31, 1 << 40, 1 << 62, -1, -(1 << 40), 0][r.below(6)];
            structured("count-claims", f, |g| {
                let groups = thrift::list(&g.footer, 4).len();
                match r.below(4) {
                    0 => {
                        let n = thrift::int(&g.footer, 3)?;
                        thrift::set_int(&mut g.footer, 3, claim);
                        let now = thrift::int(&g.footer, 3)?;
                        Some(format!("file num_rows {n} -> {now}"))
                    }
                    1 => {
                        let rg = r.below(groups);
                        let gs = group_mut(&mut g.footer, rg)?;
                        let n = thrift::int(gs, 3)?;
                        thrift::set_int(gs, 3, claim);
                        let now = thrift::int(gs, 3)?;
                        Some(format!("row group {rg} num_rows {n} -> {now}"))
                    }
                    2 => {
                        let c = r.pick(&g.chunks)?.clone();
                        let meta = chunk_meta_mut(&mut g.footer, c.rg, c.col)?;
                        let n = thrift::int(meta, 5)?;
                        thrift::set_int(meta, 5, claim);
                        let now = thrift::int(meta, 5)?;
                        Some(format!(
                            "row group {}, column {} num_values {n} -> {now}",
                            c.rg, c.col
                        ))
                    }
                    _ => {
                        let ci = r.below(g.chunks.len());
                        let c = &mut g.chunks[ci];
                        let pi = r.below(c.pages.len());
                        let p = &mut c.pages[pi];
                        // data v1 (5): 1 num_values; dictionary (7): 1 num_values; data v2 (8):
                        // 1 num_values, 2 num_nulls, 3 num_rows
                        let (header, field, name) = match p.kind() {
                            0 => (5, 1, "num_values"),
                            2 => (7, 1, "num_values"),
                            3 => [
                                (8, 1, "num_values"),
                                (8, 2, "num_nulls"),
                                (8, 3, "num_rows"),
                            ][r.below(3)],
                            _ => return None,
                        };
                        let h = thrift::child_mut(&mut p.header, header)?;
                        let n = thrift::int(h, field)?;
                        thrift::set_int(h, field, claim);
                        // (the page header's counts are i32: 2^40 and 2^62 wrap)
                        let now = thrift::int(h, field)?;
                        Some(format!(
                            "row group {}, column {}, page {pi}: {name} {n} -> {now}",
                            c.rg, c.col
                        ))
                    }
                }
            })
        }
        "arrow-schema" => {
            // the embedded ARROW:schema (base64 IPC): one byte of the decoded schema changed
            let f = f?;
            structured("arrow-schema", f, |g| {
                let kv = thrift::list_mut(&mut g.footer, 5)?;
                for e in kv.iter_mut() {
                    let Value::Struct(e) = e else { continue };
                    if thrift::get(e, 1) != Some(&Value::Binary(b"ARROW:schema".to_vec())) {
                        continue;
                    }
                    let Some(Value::Binary(v)) = thrift::get_mut(e, 2) else {
                        continue;
                    };
                    let mut raw = base64_decode(v)?;
                    if raw.len() < 16 {
                        return None;
                    }
                    // past the IPC continuation and length
                    let i = 8 + r.below(raw.len() - 8);
                    let old = raw[i];
                    raw[i] = interesting(r, i64::from(old)) as u8;
                    *v = base64_encode(&raw);
                    return Some(format!("ARROW:schema byte {i}: {old} -> {}", raw[i]));
                }
                None
            })
        }
        "statistics" => {
            let f = f?;
            // column metadata statistics (meta field 12) and page statistics
            let paths: Vec<Vec<i32>> = thrift::binary_paths(&f.footer)
                .into_iter()
                .chain(thrift::int_paths(&f.footer))
                .filter(|p| p.windows(2).any(|w| w == [3, 12]))
                .collect();
            let p = r.pick(&paths)?.clone();
            structured("statistics", f, |g| {
                let s = match thrift::at_mut(&mut g.footer, &p)? {
                    Value::Binary(_) => poke_binary(r, &mut g.footer, &p)?,
                    _ => poke_int(r, &mut g.footer, &p)?,
                };
                Some(format!("footer{s}"))
            })
        }
        "page-header" => {
            let f = f?;
            let ci = r.below(f.chunks.len());
            let pages = &f.chunks[ci].pages;
            let pi = r.below(pages.len());
            let paths = thrift::int_paths(&pages.get(pi)?.header);
            let p = r.pick(&paths)?.clone();
            structured("page-header", f, |g| {
                let c = &mut g.chunks[ci];
                let (rg, col) = (c.rg, c.col);
                let s = poke_int(r, &mut c.pages[pi].header, &p)?;
                Some(format!(
                    "row group {rg}, column {col}, page {pi}: header{s}"
                ))
            })
        }
        "dict-indices" => {
            let f = f?;
            let (ci, pi, mut u) = unpacked_page(r, f, |_, _, u, e| {
                matches!(e, 2 | 8) && !u.values.is_empty()
            })?;
            let what = if r.below(3) == 0 {
                let old = u.values[0];
                u.values[0] = [0u8, 1, 31, 32, 33, 64, 255][r.below(7)];
                format!("index bit width {old} -> {}", u.values[0])
            } else {
                let n = 1 + r.below(4);
                for _ in 0..n {
                    let i = 1 + r.below(u.values.len().saturating_sub(1).max(1));
                    if let Some(b) = u.values.get_mut(i) {
                        *b = r.next() as u8;
                    }
                }
                format!("{n} index bytes changed")
            };
            repacked("dict-indices", f, ci, pi, &u, what)
        }
        "bit-widths" => {
            // DELTA_BINARY_PACKED (and the DELTA_*_BYTE_ARRAY lengths): a miniblock's width
            let f = f?;
            let (ci, pi, mut u) =
                unpacked_page(r, f, |_, _, u, e| matches!(e, 5..=7) && u.values.len() > 8)?;
            // header: block size, miniblocks per block, total values, first value (zigzag);
            // then the first block's min delta (zigzag) and its miniblocks' widths
            let (_, p) = varint_at(&u.values, 0)?;
            let (minis, p) = varint_at(&u.values, p)?;
            let (_, p) = varint_at(&u.values, p)?;
            let (_, p) = varint_at(&u.values, p)?;
            let (_, p) = varint_at(&u.values, p)?;
            let m = (minis as usize).clamp(1, 64);
            let i = p + r.below(m);
            let old = *u.values.get(i)?;
            u.values[i] = [0u8, 1, 33, 63, 64, 65, 200, 255][r.below(8)];
            let what = format!("DELTA miniblock width {old} -> {}", u.values[i]);
            repacked("bit-widths", f, ci, pi, &u, what)
        }
        "string-lengths" => {
            let f = f?;
            let (ci, pi, mut u) = unpacked_page(r, f, |f, ci, u, e| {
                e == 0 && f.leaves[f.chunks[ci].col].physical == 6 && u.values.len() >= 4
            })?;
            // the k-th value's 4-byte length prefix
            let mut at = 0usize;
            let mut prefixes = Vec::new();
            while at + 4 <= u.values.len() && prefixes.len() < 4096 {
                prefixes.push(at);
                let n = u32::from_le_bytes(u.values[at..at + 4].try_into().ok()?) as usize;
                at = at.checked_add(4 + n)?;
            }
            let at = *r.pick(&prefixes)?;
            let old = u32::from_le_bytes(u.values[at..at + 4].try_into().ok()?);
            let new = match r.below(5) {
                0 => old.wrapping_add(1),
                1 => old.wrapping_sub(1),
                2 => u32::MAX,
                3 => 1 << 31,
                _ => (u.values.len() - at) as u32,
            };
            u.values[at..at + 4].copy_from_slice(&new.to_le_bytes());
            let what = format!("string length at {at}: {old} -> {new}");
            repacked("string-lengths", f, ci, pi, &u, what)
        }
        "levels" => {
            let f = f?;
            let (ci, pi, mut u) = unpacked_page(r, f, |_, _, u, _| u.def.len() > 1)?;
            let n = 1 + r.below(3);
            for _ in 0..n {
                let i = u.def.start + r.below(u.def.len());
                u.levels[i] = r.next() as u8;
            }
            let what = format!("{n} definition-level bytes changed");
            repacked("levels", f, ci, pi, &u, what)
        }
        "bomb-claim" => {
            // every page of a chunk claims a huge uncompressed size (its data unchanged)
            let f = f?;
            let ci = r.below(f.chunks.len());
            let claim = [1i64 << 28, i64::from(i32::MAX), 1 << 30, (1 << 30) + 1][r.below(4)];
            structured("bomb-claim", f, |g| {
                let c = &mut g.chunks[ci];
                for p in &mut c.pages {
                    thrift::set_int(&mut p.header, 2, claim);
                }
                Some(format!(
                    "row group {}, column {}: every page claims {claim} bytes",
                    c.rg, c.col
                ))
            })
        }
        "bomb-real" => {
            // a page whose data really inflates to `bomb` bytes, claimed truthfully or not
            let f = f?;
            let (ci, pi) = data_page(r, f)?;
            let codec = model::codec(f, &f.chunks[ci]);
            if codec == 0 {
                return None;
            }
            let size = bomb;
            let truthful = r.below(2) == 0;
            structured("bomb-real", f, |g| {
                let c = &mut g.chunks[ci];
                let p = &mut c.pages[pi];
                let zeros = vec![0u8; size];
                let levels = match p.kind() {
                    3 => {
                        let h = thrift::child(&p.header, 8)?;
                        (thrift::int(h, 5)? + thrift::int(h, 6)?) as usize
                    }
                    _ => 0,
                };
                let mut body = p.body.get(..levels)?.to_vec();
                body.extend(model::compress(codec, &zeros)?);
                p.body = body;
                if truthful {
                    thrift::set_int(&mut p.header, 2, (levels + size) as i64);
                }
                thrift::set_int(&mut p.header, 3, p.body.len() as i64);
                p.header.retain(|(id, _)| *id != 4);
                Some(format!(
                    "row group {}, column {}, page {pi}: data inflating to {} MiB{}",
                    c.rg,
                    c.col,
                    size >> 20,
                    if truthful {
                        ", claimed"
                    } else {
                        ", the old size claimed"
                    }
                ))
            })
        }
        _ => None,
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_decode(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for &c in s {
        if c == b'=' {
            break;
        }
        let v = B64.iter().position(|&b| b == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

fn base64_encode(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for ch in b.chunks(3) {
        let n = ch.len();
        let v = (u32::from(ch[0]) << 16)
            | (u32::from(*ch.get(1).unwrap_or(&0)) << 8)
            | u32::from(*ch.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= n {
                out.push(B64[(v >> (18 - 6 * i)) as usize & 63]);
            } else {
                out.push(b'=');
            }
        }
    }
    out
}
