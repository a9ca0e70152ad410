//! A Parquet file as the harness edits it: the footer as a Thrift tree, every column chunk as
//! its pages (header tree + stored body), and the page index. Written back with every offset
//! and size recomputed, so that a mutation lies only where it means to.

use super::thrift::{self, Struct, Value};

/// One page: its header and the bytes stored after it.
#[derive(Clone)]
pub struct Page {
    pub header: Struct,
    pub body: Vec<u8>,
    /// Its position among the chunk's data pages in the offset index, if it is a data page.
    pub data_index: Option<usize>,
}

impl Page {
    /// PageType: 0 data v1, 1 index, 2 dictionary, 3 data v2.
    pub fn kind(&self) -> i64 {
        thrift::int(&self.header, 1).unwrap_or(-1)
    }
    pub fn is_data(&self) -> bool {
        matches!(self.kind(), 0 | 3)
    }
}

/// One column chunk of one row group.
#[derive(Clone)]
pub struct Chunk {
    pub rg: usize,
    pub col: usize,
    pub pages: Vec<Page>,
    /// Where it started in the source file (the written order follows it).
    start: u64,
    offset_index: Option<Struct>,
    column_index: Option<Vec<u8>>,
}

/// A column's place in the schema.
#[derive(Clone, Copy, Debug)]
pub struct Leaf {
    pub max_def: u32,
    pub max_rep: u32,
    /// Physical type (0 BOOLEAN, 1 INT32, 2 INT64, 3 INT96, 4 FLOAT, 5 DOUBLE, 6 BYTE_ARRAY,
    /// 7 FIXED_LEN_BYTE_ARRAY).
    pub physical: i64,
}

#[derive(Clone)]
pub struct File {
    pub footer: Struct,
    pub chunks: Vec<Chunk>,
    pub leaves: Vec<Leaf>,
}

/// The column chunk `col` of row group `rg` in `footer`.
pub fn column_chunk(footer: &Struct, rg: usize, col: usize) -> Option<&Struct> {
    match thrift::list(footer, 4).get(rg)? {
        Value::Struct(g) => match thrift::list(g, 1).get(col)? {
            Value::Struct(c) => Some(c),
            _ => None,
        },
        _ => None,
    }
}

fn column_chunk_mut(footer: &mut Struct, rg: usize, col: usize) -> Option<&mut Struct> {
    match thrift::list_mut(footer, 4)?.get_mut(rg)? {
        Value::Struct(g) => match thrift::list_mut(g, 1)?.get_mut(col)? {
            Value::Struct(c) => Some(c),
            _ => None,
        },
        _ => None,
    }
}

/// Max definition and repetition levels of each leaf, from the flattened schema.
fn leaves(footer: &Struct) -> Option<Vec<Leaf>> {
    let schema: Vec<&Struct> = thrift::list(footer, 2)
        .iter()
        .map(|v| match v {
            Value::Struct(s) => Some(s),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let mut out = Vec::new();
    // (remaining children, def, rep) of the open groups
    let mut stack: Vec<(i64, u32, u32)> = Vec::new();
    for (i, e) in schema.iter().enumerate() {
        let children = thrift::int(e, 5).unwrap_or(0);
        let (mut def, mut rep) = stack.last().map_or((0, 0), |t| (t.1, t.2));
        if i > 0 {
            match thrift::int(e, 3) {
                Some(1) => def += 1,
                Some(2) => {
                    def += 1;
                    rep += 1
                }
                _ => {}
            }
        }
        if let Some(top) = stack.last_mut() {
            top.0 -= 1;
        }
        if children > 0 {
            stack.push((children, def, rep));
        } else if i > 0 {
            out.push(Leaf {
                max_def: def,
                max_rep: rep,
                physical: thrift::int(e, 1).unwrap_or(-1),
            });
        }
        while stack.last().is_some_and(|t| t.0 == 0) {
            stack.pop();
        }
        if stack.len() > 100 {
            return None;
        }
    }
    Some(out)
}

/// Reads `bytes` into the model; `None` when it is not a well-formed file (then only raw
/// byte mutations apply).
pub fn parse(bytes: &[u8]) -> Option<File> {
    let n = bytes.len();
    if n < 12 || &bytes[..4] != b"PAR1" || &bytes[n - 4..] != b"PAR1" {
        return None;
    }
    let flen = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().ok()?) as usize;
    let fstart = n.checked_sub(8 + flen)?;
    let (footer, _) = thrift::read(&bytes[fstart..n - 8])?;
    let leaves = leaves(&footer)?;
    let mut chunks = Vec::new();
    for (rg, g) in thrift::list(&footer, 4).iter().enumerate() {
        let Value::Struct(g) = g else { return None };
        for (col, c) in thrift::list(g, 1).iter().enumerate() {
            let Value::Struct(c) = c else { return None };
            let meta = thrift::child(c, 3)?;
            let data = thrift::int(meta, 9)?;
            let start = match thrift::int(meta, 11) {
                Some(d) if d > 0 && d < data => d,
                _ => data,
            } as usize;
            let len = thrift::int(meta, 7)? as usize;
            let end = start.checked_add(len)?;
            if end > fstart {
                return None;
            }
            let mut pos = start;
            let mut pages = Vec::new();
            let mut data_pages = 0;
            while pos < end {
                let (header, hlen) = thrift::read(&bytes[pos..end])?;
                let blen = usize::try_from(thrift::int(&header, 3)?).ok()?;
                let body = bytes
                    .get(pos + hlen..(pos + hlen).checked_add(blen)?)?
                    .to_vec();
                pos += hlen + blen;
                let mut p = Page {
                    header,
                    body,
                    data_index: None,
                };
                if p.is_data() {
                    p.data_index = Some(data_pages);
                    data_pages += 1;
                }
                pages.push(p);
            }
            if pos != end {
                return None;
            }
            let blob = |o: i16, l: i16| -> Option<&[u8]> {
                let (o, l) = (thrift::int(c, o)? as usize, thrift::int(c, l)? as usize);
                bytes.get(o..o.checked_add(l)?)
            };
            let offset_index = match blob(4, 5) {
                Some(b) => Some(thrift::read(b)?.0),
                None => None,
            };
            chunks.push(Chunk {
                rg,
                col,
                pages,
                start: start as u64,
                offset_index,
                column_index: blob(6, 7).map(<[u8]>::to_vec),
            });
        }
    }
    Some(File {
        footer,
        chunks,
        leaves,
    })
}

/// The file's bytes: every chunk's pages in their original order, the page index after them,
/// and the footer with every offset and size recomputed.
pub fn write(f: &File) -> Vec<u8> {
    let mut footer = f.footer.clone();
    let mut out = b"PAR1".to_vec();
    let mut order: Vec<&Chunk> = f.chunks.iter().collect();
    order.sort_by_key(|c| c.start);
    // per chunk: (start, length, first data page, dictionary page, data pages' (offset, size))
    let mut placed = Vec::new();
    for c in &order {
        let start = out.len() as i64;
        let (mut first_data, mut dict) = (None, None);
        let mut locs: Vec<(usize, i64, i64)> = Vec::new();
        for p in &c.pages {
            let at = out.len() as i64;
            thrift::write_into(&mut out, &p.header);
            out.extend_from_slice(&p.body);
            match p.kind() {
                2 => dict = dict.or(Some(at)),
                _ if p.is_data() => {
                    first_data = first_data.or(Some(at));
                    if let Some(i) = p.data_index {
                        locs.push((i, at, out.len() as i64 - at));
                    }
                }
                _ => {}
            }
        }
        placed.push((c, start, out.len() as i64 - start, first_data, dict, locs));
    }
    let mut group_bytes: Vec<(i64, i64)> = vec![(i64::MAX, 0); thrift::list(&footer, 4).len()];
    for (c, start, len, first_data, dict, _) in &placed {
        let Some(cc) = column_chunk_mut(&mut footer, c.rg, c.col) else {
            continue;
        };
        let old_start = c.start as i64;
        if let Some(fo) = thrift::int(cc, 2) {
            if fo >= old_start {
                thrift::set_int(cc, 2, *start + (fo - old_start));
            }
        }
        if let Some(meta) = thrift::child_mut(cc, 3) {
            let old_len = thrift::int(meta, 7).unwrap_or(0);
            if let Some(u) = thrift::int(meta, 6) {
                thrift::set_int(meta, 6, u + (len - old_len));
            }
            thrift::set_int(meta, 7, *len);
            thrift::set_int(meta, 9, first_data.unwrap_or(*start));
            if thrift::get(meta, 11).is_some() {
                thrift::set_int(meta, 11, dict.unwrap_or(0));
            }
            // bloom filters are not carried
            meta.retain(|(id, _)| !matches!(id, 14 | 15));
        }
        if let Some(g) = group_bytes.get_mut(c.rg) {
            g.0 = g.0.min(*start);
            g.1 += len;
        }
    }
    for (rg, (start, len)) in group_bytes.iter().enumerate() {
        if let Some(Value::Struct(g)) = thrift::list_mut(&mut footer, 4).and_then(|l| l.get_mut(rg))
        {
            if thrift::get(g, 5).is_some() && *start != i64::MAX {
                thrift::set_int(g, 5, *start);
            }
            if thrift::get(g, 6).is_some() {
                thrift::set_int(g, 6, *len);
            }
        }
    }
    // the page index: column indexes, then offset indexes with the pages' new places
    for (c, ..) in &placed {
        if let Some(ci) = &c.column_index {
            let at = out.len() as i64;
            out.extend_from_slice(ci);
            if let Some(cc) = column_chunk_mut(&mut footer, c.rg, c.col) {
                thrift::set_int(cc, 6, at);
                thrift::set_int(cc, 7, ci.len() as i64);
            }
        }
    }
    for (c, _, _, _, _, locs) in &placed {
        if let Some(oi) = &c.offset_index {
            let mut oi = oi.clone();
            let old: Vec<Value> = thrift::list(&oi, 1).to_vec();
            let mut new = Vec::new();
            for (i, at, size) in locs {
                if let Some(Value::Struct(l)) = old.get(*i) {
                    let mut l = l.clone();
                    thrift::set_int(&mut l, 1, *at);
                    thrift::set_int(&mut l, 2, *size);
                    new.push(Value::Struct(l));
                }
            }
            if let Some(v) = thrift::list_mut(&mut oi, 1) {
                *v = new;
            }
            let at = out.len() as i64;
            thrift::write_into(&mut out, &oi);
            let len = out.len() as i64 - at;
            if let Some(cc) = column_chunk_mut(&mut footer, c.rg, c.col) {
                thrift::set_int(cc, 4, at);
                thrift::set_int(cc, 5, len);
            }
        }
    }
    let f_at = out.len();
    thrift::write_into(&mut out, &footer);
    let flen = (out.len() - f_at) as u32;
    out.extend_from_slice(&flen.to_le_bytes());
    out.extend_from_slice(b"PAR1");
    out
}

/// The codec of chunk `c` (Thrift CompressionCodec: 0 none, 1 SNAPPY, 2 GZIP, 4 BROTLI, 5 LZ4,
/// 6 ZSTD, 7 LZ4_RAW).
pub fn codec(f: &File, c: &Chunk) -> i64 {
    column_chunk(&f.footer, c.rg, c.col)
        .and_then(|cc| thrift::child(cc, 3))
        .and_then(|m| thrift::int(m, 4))
        .unwrap_or(0)
}

fn parquet_codec(codec: i64) -> Option<parquet::basic::Compression> {
    use parquet::basic::*;
    Some(match codec {
        0 => Compression::UNCOMPRESSED,
        1 => Compression::SNAPPY,
        2 => Compression::GZIP(GzipLevel::default()),
        4 => Compression::BROTLI(BrotliLevel::default()),
        5 => Compression::LZ4,
        6 => Compression::ZSTD(ZstdLevel::default()),
        7 => Compression::LZ4_RAW,
        _ => return None,
    })
}

/// `data` compressed with `codec`.
pub fn compress(codec: i64, data: &[u8]) -> Option<Vec<u8>> {
    let c = parquet_codec(codec)?;
    let opts = parquet::compression::CodecOptionsBuilder::default().build();
    match parquet::compression::create_codec(c, &opts).ok()? {
        None => Some(data.to_vec()),
        Some(mut codec) => {
            let mut out = Vec::new();
            codec.compress(data, &mut out).ok()?;
            Some(out)
        }
    }
}

/// `data` decompressed with `codec` to `size` bytes.
pub fn decompress(codec: i64, data: &[u8], size: usize) -> Option<Vec<u8>> {
    let c = parquet_codec(codec)?;
    let opts = parquet::compression::CodecOptionsBuilder::default().build();
    match parquet::compression::create_codec(c, &opts).ok()? {
        None => Some(data.to_vec()),
        Some(mut codec) => {
            let mut out = Vec::new();
            codec.decompress(data, &mut out, Some(size)).ok()?;
            (out.len() == size).then_some(out)
        }
    }
}

/// A data page's uncompressed layout: (levels, values) bytes, the levels as stored (v1: the
/// length-prefixed runs in front of the values; v2: the uncompressed level section).
pub struct Unpacked {
    pub levels: Vec<u8>,
    pub values: Vec<u8>,
    /// Where the definition levels' runs start and end within `levels`.
    pub def: std::ops::Range<usize>,
}

/// Splits a data page into levels and values, uncompressed.
pub fn unpack(f: &File, c: &Chunk, p: &Page) -> Option<Unpacked> {
    let leaf = f.leaves.get(c.col)?;
    let codec = codec(f, c);
    let want = usize::try_from(thrift::int(&p.header, 2)?).ok()?;
    match p.kind() {
        0 => {
            let all = decompress(codec, &p.body, want)?;
            let mut pos = 0;
            let mut def = 0..0;
            for (max, is_def) in [(leaf.max_rep, false), (leaf.max_def, true)] {
                if max > 0 {
                    let n = u32::from_le_bytes(all.get(pos..pos + 4)?.try_into().ok()?) as usize;
                    if is_def {
                        def = pos + 4..pos + 4 + n;
                    }
                    pos += 4 + n;
                }
            }
            let values = all.get(pos..)?.to_vec();
            let mut levels = all;
            levels.truncate(pos);
            Some(Unpacked {
                levels,
                values,
                def,
            })
        }
        3 => {
            let h = thrift::child(&p.header, 8)?;
            let r = usize::try_from(thrift::int(h, 6)?).ok()?;
            let d = usize::try_from(thrift::int(h, 5)?).ok()?;
            let levels = p.body.get(..r + d)?.to_vec();
            let compressed = !matches!(thrift::get(h, 7), Some(Value::Bool(false)));
            let values = if compressed {
                decompress(codec, &p.body[r + d..], want.checked_sub(r + d)?)?
            } else {
                p.body[r + d..].to_vec()
            };
            Some(Unpacked {
                levels,
                values,
                def: r..r + d,
            })
        }
        _ => None,
    }
}

/// Puts `u` back into page `p` of `c`, compressed as before, sizes in the header updated.
pub fn repack(f: &File, c: &Chunk, p: &mut Page, u: &Unpacked) -> Option<()> {
    let codec = codec(f, c);
    match p.kind() {
        0 => {
            let all = [u.levels.as_slice(), &u.values].concat();
            p.body = compress(codec, &all)?;
            thrift::set_int(&mut p.header, 2, all.len() as i64);
        }
        3 => {
            let h = thrift::child(&p.header, 8)?;
            let compressed = !matches!(thrift::get(h, 7), Some(Value::Bool(false)));
            let values = if compressed {
                compress(codec, &u.values)?
            } else {
                u.values.clone()
            };
            p.body = [u.levels.as_slice(), &values].concat();
            thrift::set_int(&mut p.header, 2, (u.levels.len() + u.values.len()) as i64);
        }
        _ => return None,
    }
    thrift::set_int(&mut p.header, 3, p.body.len() as i64);
    // a CRC would now be wrong: drop it
    p.header.retain(|(id, _)| *id != 4);
    Some(())
}

/// The encoding of a data page's values (Thrift Encoding: 0 PLAIN, 2 PLAIN_DICTIONARY,
/// 3 RLE, 5 DELTA_BINARY_PACKED, 6 DELTA_LENGTH_BYTE_ARRAY, 7 DELTA_BYTE_ARRAY,
/// 8 RLE_DICTIONARY, 9 BYTE_STREAM_SPLIT).
pub fn encoding(p: &Page) -> Option<i64> {
    let h = match p.kind() {
        0 => thrift::child(&p.header, 5)?,
        3 => thrift::child(&p.header, 8)?,
        2 => thrift::child(&p.header, 7)?,
        _ => return None,
    };
    thrift::int(h, if p.kind() == 3 { 4 } else { 2 })
}
