//! The nested kernels (`src/decode/gpu/kernels/nested.cu`) run on the host through the CUDA
//! emulation of `tests/emulated/emu` (see `tests/emulated/kernels.rs`), under AddressSanitizer and UBSan where
//! the compiler has them: the leaves' levels decoded from their pages, and the offsets,
//! validity and gathered values built from them, against the parquet crate and arrow-rs.

use crate::common;
use crate::emu;

use std::path::Path;

use common::*;
use emu::*;

/// One leaf's levels and values (row group 0 of `path`), read by the parquet crate's column
/// reader: (repetition, definition, entry-level values: `width` bytes per entry, 0 where the
/// entry holds none; validity bits per entry; for strings, i32 offsets per entry and the bytes).
struct LeafLevels {
    rep: Vec<u8>,
    def: Vec<u8>,
    values: Vec<u8>,
    valid: Vec<u8>,
    chars: Vec<u8>,
}

fn leaf_levels(path: &Path, leaf: usize) -> LeafLevels {
    use parquet::column::reader::ColumnReader;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let r = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let max_def = r
        .metadata()
        .file_metadata()
        .schema_descr()
        .column(leaf)
        .max_def_level();
    let rg = r.get_row_group(0).unwrap();
    let (mut d, mut rp) = (Vec::<i16>::new(), Vec::<i16>::new());
    // values as little-endian bytes (fixed width) or strings
    // every value of the chunk, as bytes
    macro_rules! all {
        ($c:expr, $bytes:expr) => {{
            let mut v = Vec::new();
            while $c
                .read_records(1 << 20, Some(&mut d), Some(&mut rp), &mut v)
                .unwrap()
                .0
                > 0
            {}
            v.iter().map($bytes).collect()
        }};
    }
    let fixed: Vec<Vec<u8>> = match rg.get_column_reader(leaf).unwrap() {
        ColumnReader::BoolColumnReader(mut c) => all!(c, |x: &bool| vec![u8::from(*x)]),
        ColumnReader::Int32ColumnReader(mut c) => all!(c, |x: &i32| x.to_le_bytes().to_vec()),
        ColumnReader::Int64ColumnReader(mut c) => all!(c, |x: &i64| x.to_le_bytes().to_vec()),
        ColumnReader::FloatColumnReader(mut c) => all!(c, |x: &f32| x.to_le_bytes().to_vec()),
        ColumnReader::DoubleColumnReader(mut c) => all!(c, |x: &f64| x.to_le_bytes().to_vec()),
        ColumnReader::ByteArrayColumnReader(mut c) => {
            all!(c, |x: &parquet::data_type::ByteArray| x.data().to_vec())
        }
        ColumnReader::FixedLenByteArrayColumnReader(mut c) => {
            all!(c, |x: &parquet::data_type::FixedLenByteArray| x
                .data()
                .to_vec())
        }
        _ => panic!("leaf {leaf}: a type this test does not read"),
    };
    let strings = fixed.iter().any(|v| v.len() != fixed[0].len());
    let strings = strings
        || matches!(
            r.metadata()
                .file_metadata()
                .schema_descr()
                .column(leaf)
                .physical_type(),
            parquet::basic::Type::BYTE_ARRAY
        );
    let n = d.len();
    let mut out = LeafLevels {
        rep: rp.iter().map(|&x| x as u8).collect(),
        def: d.iter().map(|&x| x as u8).collect(),
        values: Vec::new(),
        valid: vec![0; n.div_ceil(32) * 4],
        chars: Vec::new(),
    };
    if out.rep.is_empty() {
        out.rep = vec![0; n];
    }
    let mut next = fixed.iter();
    let mut offsets = vec![0i32];
    for (i, &l) in d.iter().enumerate() {
        let v = (l == max_def).then(|| next.next().unwrap());
        if v.is_some() {
            out.valid[i / 8] |= 1 << (i % 8);
        }
        if strings {
            out.chars.extend(v.map_or(&[][..], |v| &v[..]));
            offsets.push(out.chars.len() as i32);
        } else {
            let w = fixed.first().map_or(0, |f| f.len());
            out.values.extend(v.cloned().unwrap_or_else(|| vec![0; w]));
        }
    }
    if strings {
        out.values = offsets.iter().flat_map(|o| o.to_le_bytes()).collect();
    }
    out
}

/// One task for the emulated nested kernels: (unit, kind, level, def, width, out bytes,
/// out_valid bytes, src, src_valid).
type NestTaskIn = (u32, i32, i32, i32, i32, usize, usize, Vec<u8>, Vec<u8>);

/// Runs nest_count and nest_scatter over `units` ((rep, def, elem_defs)) and `tasks`: per unit
/// (error bits, slot totals), per task (nulls, out, out_valid).
#[allow(clippy::type_complexity)]
fn run_nested(
    emu: &Path,
    units: &[(&[u8], &[u8], &[u8])],
    tasks: &[NestTaskIn],
) -> (Vec<(u32, Vec<u64>)>, Vec<(u64, Vec<u8>, Vec<u8>)>) {
    let mut b = Vec::new();
    b.put_u32(units.len() as u32);
    for (rep, def, elem) in units {
        b.put_u64(rep.len() as u64);
        let mut e = [0u8; 8];
        e[..elem.len()].copy_from_slice(elem);
        b.put_u64(u64::from_le_bytes(e));
        b.put_i32(elem.len() as i32);
        b.extend(*rep);
        b.extend(*def);
    }
    b.put_u32(tasks.len() as u32);
    for (unit, kind, level, def, width, ol, ovl, src, sv) in tasks {
        b.put_u32(*unit);
        for v in [*kind, *level, *def, *width] {
            b.put_i32(v);
        }
        b.put_u64(*ol as u64);
        b.put_u64(*ovl as u64);
        b.put_u64(src.len() as u64);
        b.extend(src);
        b.put_u64(sv.len() as u64);
        b.extend(sv);
    }
    let o = run_emulator(emu, &b, "nested");
    let mut c = Cursor(&o, 0);
    let us = units
        .iter()
        .map(|_| (c.u32(), (0..8).map(|_| c.u64()).collect()))
        .collect();
    let ts = tasks
        .iter()
        .map(|t| (c.u64(), c.bytes(t.5), c.bytes(t.6)))
        .collect();
    (us, ts)
}

fn bit(b: &[u8], i: usize) -> bool {
    b[i / 8] >> (i % 8) & 1 == 1
}

fn i32s(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Slots at each depth of a leaf: entries with rep <= k and def >= elem[k].
fn slots(l: &LeafLevels, elem: &[u8]) -> Vec<usize> {
    (0..elem.len())
        .map(|k| {
            (0..l.rep.len())
                .filter(|&i| l.rep[i] as usize <= k && l.def[i] >= elem[k])
                .count()
        })
        .collect()
}

#[test]
fn emulated_nested_kernels_build_what_arrow_rs_reads() {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Int32Type, Int64Type};
    let Some(emu) = emulator("nested") else {
        return;
    };
    // one row group of 3,000 rows: every unit spans several tiles of 1,024 entries
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested.parquet");
    let props = parquet::file::properties::WriterProperties::builder().build();
    write(&path, &[nested_batch(3000)], props);
    let want = oracle(&path, &Projection::All, None).unwrap();
    let schema = {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let r = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        r.metadata().file_metadata().schema_descr_ptr()
    };
    let leaf = |p: &str| {
        (0..schema.num_columns())
            .find(|&i| schema.column(i).path().string() == p)
            .unwrap_or_else(|| {
                let all: Vec<String> = (0..schema.num_columns())
                    .map(|i| schema.column(i).path().string())
                    .collect();
                panic!("no leaf {p} among {all:?}")
            })
    };
    let words = |n: usize| n.div_ceil(32) * 4;
    let rows = want.num_rows();

    // list<int32>: offsets, list validity, the values gathered; one unit of 3 tiles
    let l = leaf_levels(&path, leaf("list_i32.list.item"));
    let elem = [0u8, 2];
    let n = slots(&l, &elem);
    let (us, ts) = run_nested(
        &emu,
        &[(&l.rep, &l.def, &elem)],
        &[
            (0, 1, 0, 0, 4, (rows + 1) * 4, 0, vec![], vec![]),
            (0, 0, 0, 1, 0, words(rows), 0, vec![], vec![]),
            (
                0,
                2,
                1,
                0,
                4,
                n[1] * 4,
                words(n[1]),
                l.values.clone(),
                l.valid.clone(),
            ),
        ],
    );
    assert_eq!(us[0].0, 0, "error bits");
    assert_eq!(us[0].1[..2], [rows as u64, n[1] as u64]);
    let list = want.column_by_name("list_i32").unwrap().as_list::<i32>();
    assert_eq!(i32s(&ts[0].1), list.value_offsets().to_vec(), "offsets");
    assert_eq!(ts[1].0 as usize, list.null_count(), "list nulls");
    for i in 0..rows {
        assert_eq!(bit(&ts[1].1, i), list.is_valid(i), "list validity {i}");
    }
    let child = list.values().as_primitive::<Int32Type>();
    assert_eq!(child.len(), n[1]);
    assert_eq!(ts[2].0 as usize, child.null_count(), "element nulls");
    for (i, g) in i32s(&ts[2].1).into_iter().enumerate() {
        assert_eq!(bit(&ts[2].2, i), child.is_valid(i), "element validity {i}");
        if child.is_valid(i) {
            assert_eq!(g, child.value(i), "element {i}");
        }
    }

    // map<utf8, int64>: offsets and validity from the keys; keys' string offsets gathered, values
    let k = leaf_levels(&path, leaf("m.entries.keys"));
    let v = leaf_levels(&path, leaf("m.entries.values"));
    let n = slots(&k, &elem);
    let (us, ts) = run_nested(
        &emu,
        &[(&k.rep, &k.def, &elem), (&v.rep, &v.def, &elem)],
        &[
            (0, 1, 0, 0, 4, (rows + 1) * 4, 0, vec![], vec![]),
            (0, 0, 0, 1, 0, words(rows), 0, vec![], vec![]),
            (0, 4, 1, 0, 4, (n[1] + 1) * 4, 0, k.values.clone(), vec![]),
            (
                1,
                2,
                1,
                0,
                8,
                n[1] * 8,
                words(n[1]),
                v.values.clone(),
                v.valid.clone(),
            ),
        ],
    );
    assert!(us.iter().all(|u| u.0 == 0), "error bits");
    let map = want.column_by_name("m").unwrap().as_map();
    assert_eq!(i32s(&ts[0].1), map.value_offsets().to_vec(), "map offsets");
    assert_eq!(ts[1].0 as usize, map.null_count());
    let keys = map.keys().as_string::<i32>();
    let key_offsets = i32s(&ts[2].1);
    assert_eq!(key_offsets.len(), keys.len() + 1);
    for i in 0..keys.len() {
        let (s, e) = (key_offsets[i] as usize, key_offsets[i + 1] as usize);
        assert_eq!(&k.chars[s..e], keys.value(i).as_bytes(), "key {i}");
    }
    let vals = map.values().as_primitive::<Int64Type>();
    for i in 0..vals.len() {
        assert_eq!(bit(&ts[3].2, i), vals.is_valid(i), "value validity {i}");
        if vals.is_valid(i) {
            let g = i64::from_le_bytes(ts[3].1[i * 8..i * 8 + 8].try_into().unwrap());
            assert_eq!(g, vals.value(i), "value {i}");
        }
    }

    // list<struct<x, y>>: the struct's validity at depth 1; ten tasks on one unit (two groups
    // of the scatter's eight)
    let x = leaf_levels(&path, leaf("list_struct.list.item.x"));
    let n = slots(&x, &elem);
    let mut tasks = vec![
        (0, 1, 0, 0, 4, (rows + 1) * 4, 0, vec![], vec![]),
        (0, 0, 0, 1, 0, words(rows), 0, vec![], vec![]),
    ];
    for _ in 0..7 {
        tasks.push((0, 0, 1, 3, 0, words(n[1]), 0, vec![], vec![]));
    }
    tasks.push((
        0,
        2,
        1,
        0,
        4,
        n[1] * 4,
        words(n[1]),
        x.values.clone(),
        x.valid.clone(),
    ));
    let (us, ts) = run_nested(&emu, &[(&x.rep, &x.def, &elem)], &tasks);
    assert_eq!(us[0].0, 0);
    let list = want.column_by_name("list_struct").unwrap().as_list::<i32>();
    assert_eq!(i32s(&ts[0].1), list.value_offsets().to_vec());
    let st = list.values().as_struct();
    for t in &ts[2..9] {
        assert_eq!(t.0 as usize, st.null_count(), "struct nulls");
        for i in 0..st.len() {
            assert_eq!(bit(&t.1, i), st.is_valid(i), "struct validity {i}");
        }
    }
    let xs = st.column(0).as_primitive::<Int32Type>();
    let got = i32s(&ts[9].1);
    assert_eq!(got.len(), xs.len());
    for (i, g) in got.into_iter().enumerate() {
        assert_eq!(bit(&ts[9].2, i), xs.is_valid(i), "x validity {i}");
        if xs.is_valid(i) {
            assert_eq!(g, xs.value(i));
        }
    }

    // levels that do not form rows: a first entry continuing a list, a repetition without
    // its element
    let mut bad = l.rep.clone();
    bad[0] = 1;
    let (us, _) = run_nested(&emu, &[(&bad, &l.def, &elem)], &[]);
    assert_eq!(us[0].0 & 0x800, 0x800, "a first entry with repetition 1");
    let mut bad_def = l.def.clone();
    let at = (1..l.rep.len()).find(|&i| l.rep[i] == 1).unwrap();
    bad_def[at] = 1;
    let (us, _) = run_nested(&emu, &[(&l.rep, &bad_def, &elem)], &[]);
    assert_eq!(
        us[0].0 & 0x800,
        0x800,
        "a repeated entry below its list's level"
    );
}

/// The page table and the decompressed pages of column chunk `c` of the file `bytes`.
fn chunk_pages(
    bytes: &[u8],
    c: &parquet::file::metadata::ColumnChunkMetaData,
) -> (
    Vec<cuparquet::internals::page_header::PageEntry>,
    Vec<cuparquet::internals::decompress::PageData>,
) {
    use cuparquet::internals::decompress::decompress_pages;
    use cuparquet::internals::page_header::page_table;
    let (start, len) = c.byte_range();
    let chunk = bytes::Bytes::copy_from_slice(&bytes[start as usize..(start + len) as usize]);
    let table = page_table(&chunk).unwrap();
    let data = decompress_pages(&chunk, &table, c.compression()).unwrap();
    (table, data)
}

/// The nested leaves' levels as `nested_levels` decodes them from their pages (v1 pages with
/// dictionaries, v2 pages; structs, lists, maps, three and four deep) equal the parquet crate's;
/// damaged level streams set error bits and never read or write out of bounds.
#[test]
fn emulated_nested_levels_equal_the_parquet_crates() {
    use parquet::file::properties::{WriterProperties, WriterVersion};
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let Some(emu) = emulator("nested") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let small_pages = || WriterProperties::builder().set_data_page_row_count_limit(300);
    let cases = [
        ("nested_v1", nested_batch(2000), small_pages().build()),
        (
            "nested_v2",
            nested_batch(2000),
            small_pages()
                .set_writer_version(WriterVersion::PARQUET_2_0)
                .set_dictionary_enabled(false)
                .build(),
        ),
        ("deep_v1", deep_nested_batch(1500), small_pages().build()),
        (
            "deep_v2",
            deep_nested_batch(1500),
            small_pages()
                .set_writer_version(WriterVersion::PARQUET_2_0)
                .build(),
        ),
    ];
    let mut leaves_ok = 0;
    for (name, batch, props) in cases {
        let path = dir.path().join(format!("{name}.parquet"));
        write(&path, &[batch], props);
        let bytes = std::fs::read(&path).unwrap();
        let r = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        let md = r.metadata();
        let schema = md.file_metadata().schema_descr();
        let rg = md.row_group(0);
        let nested: Vec<usize> = (0..schema.num_columns())
            .filter(|&l| schema.column(l).path().parts().len() > 1)
            .collect();
        let (mut cols, mut pages, mut n_pages) = (Vec::new(), Vec::new(), 0u32);
        let mut want = Vec::new();
        let mut page_data = Vec::new();
        for (k, &l) in nested.iter().enumerate() {
            let (table, data) = chunk_pages(&bytes, rg.column(l));
            let col = schema.column(l);
            let levels = (col.max_def_level(), col.max_rep_level());
            let lv = leaf_levels(&path, l);
            // every other leaf in two windows cut at an odd entry, as a batch that cuts a row
            // group takes its entries: the levels come out the same
            let cut = (k % 2 == 1 && lv.rep.len() > 2).then_some(lv.rep.len() as u64 / 2 + 1);
            n_pages += serialize_pages(&table, &data, k as u32, levels, cut, &mut pages).1;
            cols.put_u64(lv.rep.len() as u64);
            page_data.push((table, data, col.max_def_level(), col.max_rep_level()));
            want.push((col.path().string(), lv));
        }
        let input = pass_input(nested.len(), cols.clone(), n_pages, pages);
        let out = run_emulator_with(&emu, &input, name, &["levels"]);
        let mut cur = Cursor(&out, 0);
        for (p, lv) in &want {
            let n = lv.rep.len().max(1);
            let (rep, def) = (cur.bytes(n), cur.bytes(n));
            if !lv.rep.is_empty() {
                assert_eq!(rep, lv.rep, "{name} {p}: repetition levels");
                assert_eq!(def, lv.def, "{name} {p}: definition levels");
            }
            leaves_ok += 1;
        }
        let errors: Vec<u32> = (0..n_pages).map(|_| cur.u32()).collect();
        assert!(errors.iter().all(|&e| e == 0), "{name}: {errors:?}");
        // damaged: every page's first bytes (a v1 page's level length, a v2 page's streams)
        // changed at random; the kernel reports what it cannot decode and stays in bounds
        let mut rng = Rng(17);
        let mut bad = Vec::new();
        let mut n_bad = 0;
        for (k, (table, data, max_def, max_rep)) in page_data.iter().enumerate() {
            let damaged: Vec<_> = data
                .iter()
                .map(|d| {
                    let mut b = d.bytes.to_vec();
                    let upto = b.len().min(8);
                    if upto > 0 {
                        flip_bytes(&mut rng, &mut b[..upto]);
                    }
                    cuparquet::internals::decompress::PageData {
                        page: d.page,
                        bytes: bytes::Bytes::from(b),
                        host_decompressed: d.host_decompressed,
                    }
                })
                .collect();
            n_bad += serialize_pages(
                table,
                &damaged,
                k as u32,
                (*max_def, *max_rep),
                None,
                &mut bad,
            )
            .1;
        }
        let out = run_emulator_with(
            &emu,
            &pass_input(nested.len(), cols, n_bad, bad),
            name,
            &["levels"],
        );
        let skip: usize = want.iter().map(|(_, lv)| 2 * lv.rep.len().max(1)).sum();
        let mut cur = Cursor(&out, skip);
        let errors: Vec<u32> = (0..n_bad).map(|_| cur.u32()).collect();
        assert!(
            errors.iter().any(|&e| e != 0),
            "{name}: damaged pages all decoded"
        );
    }
    assert!(leaves_ok >= 20, "{leaves_ok}");
}

/// The fixed-width value kernel on nested leaves, one value slot per level entry (v1 pages
/// hold repetition levels before the definition levels it reads; v2 pages, dictionaries): the
/// values sit at the entries whose definition level is the leaf's maximum, as the parquet
/// crate reads them.
#[test]
fn emulated_fixed_width_kernel_decodes_nested_leaves_per_entry() {
    use cuparquet::internals::gpu::{conversion_code, physical_code};
    use cuparquet::internals::gpu_plan::{place_columns, Conversion, Placement};
    use cuparquet::{Device, Scan};
    use parquet::file::properties::{WriterProperties, WriterVersion};
    let Some(emu) = emulator("decode_fixed") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let small_pages = || WriterProperties::builder().set_data_page_row_count_limit(300);
    let mut checked = 0;
    for (name, props) in [
        ("v1_dict", small_pages().build()),
        (
            "v2_plain",
            small_pages()
                .set_writer_version(WriterVersion::PARQUET_2_0)
                .set_dictionary_enabled(false)
                .build(),
        ),
    ] {
        let path = dir.path().join(format!("{name}.parquet"));
        write(&path, &[deep_nested_batch(1200)], props);
        let r = Scan::builder(&path)
            .with_device(Device::Host)
            .build()
            .unwrap();
        let md = r.files()[0].metadata().metadata.clone();
        let fields = r.schema().fields().to_vec();
        let bytes = std::fs::read(&path).unwrap();
        let placed = place_columns(
            &md,
            &fields,
            &r.files()[0].plan().leaves,
            &r.files()[0].plan().row_groups,
        );
        // the leaves whose stored bytes are their Arrow values: copies of the same width
        let leaves: Vec<_> = placed
            .iter()
            .filter_map(|p| match p {
                Placement::Nested(n) => Some(n.leaves.clone()),
                _ => None,
            })
            .flatten()
            .filter(|g| g.conversion == Conversion::Copy && g.physical_width == g.output_width)
            .collect();
        assert!(leaves.len() >= 3, "{name}: {leaves:?}");
        let (mut cols, mut pages, mut n_pages) = (Vec::new(), Vec::new(), 0u32);
        let mut want = Vec::new();
        for (k, g) in leaves.iter().enumerate() {
            let (table, data) = chunk_pages(&bytes, md.row_group(0).column(g.leaf));
            let (dict, n) = serialize_pages(
                &table,
                &data,
                k as u32,
                (g.max_def_level, g.max_rep_level),
                None,
                &mut pages,
            );
            n_pages += n;
            let lv = leaf_levels(&path, g.leaf);
            let entries = lv.def.len();
            for v in [
                conversion_code(g.conversion).unwrap(),
                g.physical_width as i32,
                g.output_width as i32,
                physical_code(&g.physical),
            ] {
                cols.put_i32(v);
            }
            cols.put_u64(entries as u64);
            cols.put_u32(1);
            cols.put_u32(u32::from(dict.is_some()));
            let (dn, db) = dict.unwrap_or_default();
            cols.put_i32(dn);
            cols.put_u64(db.len() as u64);
            cols.extend(&db);
            cols.put_u64((entries * g.output_width) as u64);
            want.push((g.clone(), lv));
        }
        let out = run_emulator(&emu, &pass_input(leaves.len(), cols, n_pages, pages), name);
        let mut cur = Cursor(&out, 0);
        for (g, lv) in &want {
            let entries = lv.def.len();
            let nulls = cur.u64() as usize;
            let values = cur.bytes(entries * g.output_width);
            let valid = cur.bytes(entries.div_ceil(32) * 4);
            let max = g.max_def_level as u8;
            assert_eq!(
                nulls,
                lv.def.iter().filter(|&&d| d != max).count(),
                "{name} leaf {}: nulls",
                g.leaf
            );
            for (i, &d) in lv.def.iter().enumerate() {
                let at = i * g.output_width..(i + 1) * g.output_width;
                assert_eq!(
                    valid[i / 8] >> (i % 8) & 1 == 1,
                    d == max,
                    "{name} leaf {}: entry {i}",
                    g.leaf
                );
                if d == max {
                    assert_eq!(
                        values[at.clone()],
                        lv.values[at],
                        "{name} leaf {}: entry {i}",
                        g.leaf
                    );
                }
            }
            checked += 1;
        }
        let errors: Vec<u32> = (0..n_pages).map(|_| cur.u32()).collect();
        assert!(errors.iter().all(|&e| e == 0), "{name}: {errors:?}");
    }
    assert!(checked >= 6, "{checked}");
}
