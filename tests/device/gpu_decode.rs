//! The GPU's flat-column decoders against the reference decoder (itself checked against arrow-rs
//! in tests/read/reference.rs), column chunk by column chunk, over the corpus and the generated
//! files. Skips with a printed reason where there is no CUDA device and fails under
//! `CUPARQUET_REQUIRE_GPU=1`.

use crate::common;
use crate::reference_decoder;

use common::*;
use cuparquet::{Device, Scan};

#[test]
fn gpu_flat_columns_equal_the_reference_decoder() {
    if !gpu_available("GPU fixed-width decode test") {
        return;
    }
    use cuparquet::internals::gpu::conversion_code;
    use cuparquet::internals::gpu_plan::{place_columns, Placement};
    let (files, _dir) = all_files(false);
    let (mut cols_ok, mut rejected, mut failures) = (0, Vec::new(), Vec::new());
    for f in &files {
        let Ok(r) = Scan::builder(f).with_device(Device::Cuda(0)).build() else {
            continue;
        };
        let md = r.files()[0].metadata().metadata.clone();
        let fields = r.schema().fields().to_vec();
        let gpu_cols: Vec<_> = place_columns(
            &md,
            &fields,
            &r.files()[0].plan().leaves,
            &r.files()[0].plan().row_groups,
        )
        .into_iter()
        .filter_map(|p| match p {
            Placement::Gpu(c)
                if conversion_code(c.conversion).is_some()
                    || c.conversion == cuparquet::internals::gpu_plan::Conversion::Bytes =>
            {
                Some(c)
            }
            _ => None,
        })
        .collect();
        if gpu_cols.is_empty() {
            continue;
        }
        let Ok((chunks, _)) = r.files()[0].load_chunks() else {
            continue;
        };
        let chunks = &chunks;
        let codec_of = |rg: usize, leaf: usize| md.row_group(rg).column(leaf).compression();
        let rows_of = |rg: usize| md.row_group(rg).num_rows() as usize;
        let tables = match cuparquet::internals::gpu::page_tables(chunks, f) {
            Ok(t) => t,
            Err(e) if oracle(f, &Projection::All, None).is_err() => {
                rejected.push(format!("{} ({e})", f.display())); // arrow-rs rejects it too
                continue;
            }
            Err(e) => {
                failures.push(format!("{e} (arrow-rs reads the file)"));
                continue;
            }
        };
        // kept dictionaries whose chunks hold PLAIN pages (a writer's fallback) go to the host
        let gpu_cols: Vec<_> = gpu_cols
            .into_iter()
            .filter(|c| {
                let fallback = cuparquet::internals::gpu::keys_fallback;
                !c.keys || fallback(chunks, &tables, &[], c, "").is_none()
            })
            .collect();
        // one batch per row group, so that each output column is one chunk's
        let batches: Vec<cuparquet::plan::BatchSpan> = r.files()[0]
            .plan()
            .row_groups
            .iter()
            .map(|&rg| cuparquet::plan::BatchSpan {
                parts: vec![cuparquet::plan::RowRange {
                    row_group: rg,
                    rows: 0..rows_of(rg) as u64,
                }],
            })
            .collect();
        let wave = cuparquet::internals::gpu::WaveDecode {
            chunks,
            tables: &tables,
            path: f,
            columns: &gpu_cols,
            fields: &fields,
            codec_of: &codec_of,
            rows_of: &rows_of,
            snappy: cuparquet::internals::gpu::SnappyPlacement::Device,
            host_share: None,
            batches: &batches,
        };
        let fixed = cuparquet::internals::gpu::decode_fixed_columns(&wave);
        let strings = cuparquet::internals::gpu::decode_bytes_columns(&wave);
        let got = match (fixed, strings) {
            (Ok(mut a), Ok(b)) => {
                a.extend(b);
                a
            }
            (Err(e), _) | (_, Err(e)) => {
                let e = e.to_string();
                if oracle(f, &Projection::All, None).is_err() {
                    rejected.push(format!("{} ({e})", f.display())); // arrow-rs rejects it too
                    continue;
                }
                failures.push(format!("{e} (arrow-rs reads the file)"));
                if e.contains("CUDA_ERROR_ILLEGAL") || e.contains("CUDA_ERROR_LAUNCH_FAILED") {
                    break; // the context is lost: every later call would fail the same way
                }
                continue;
            }
        };
        let bytes = std::fs::read(f).unwrap();
        for d in &got {
            let col = gpu_cols.iter().find(|c| c.field == d.field).unwrap();
            let rg = batches[d.batch].parts[0].row_group;
            let c = r.files()[0]
                .plan()
                .chunks
                .iter()
                .find(|c| c.column == col.leaf && c.row_group == rg)
                .unwrap();
            let chunk =
                bytes::Bytes::copy_from_slice(&bytes[c.range.start as usize..c.range.end as usize]);
            let codec = md.row_group(c.row_group).column(c.column).compression();
            // the reference decodes PLAIN, dictionaries and RLE; arrow-rs the other encodings
            let want = reference_decoder::decode_chunk(col, &fields[col.field], chunk, codec)
                .or_else(|e| arrow_rs_chunk(f, rg, c.column).ok_or(e))
                .unwrap_or_else(|e| panic!("{}: reference: {e}", f.display()));
            let host = d.to_host().unwrap();
            if host.as_ref() != want.as_ref() {
                failures.push(format!(
                    "{} rg {} '{}' ({:?}): device values differ from the reference",
                    f.display(),
                    rg,
                    c.path,
                    col.conversion
                ));
            } else {
                cols_ok += 1;
            }
        }
    }
    eprintln!(
        "fixed-width and string columns decoded on the GPU, equal to the reference: {cols_ok}; \
         files rejected by the GPU and arrow-rs: {}{}",
        rejected.len(),
        rejected
            .iter()
            .map(|r| format!("\n  {r}"))
            .collect::<String>()
    );
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(cols_ok > 200, "{cols_ok}");
}
