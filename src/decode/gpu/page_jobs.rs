//! The data-page jobs both value decoders ([`fixed`](super::fixed), [`bytes`](super::bytes))
//! build from a chunk's page table, their scratch layout, and the errors naming a page.

use super::kernels::{describe_errors, PageInfo, PageJob};
use crate::error::{Error, Result};

/// Per page job, the first index of its rows in the pass's scratch arrays, and the rows in all.
pub(super) fn row_bases(pages: &[PageJob]) -> (Vec<u64>, u64) {
    let mut base = Vec::with_capacity(pages.len());
    let mut total = 0u64;
    for p in pages {
        base.push(total);
        total += p.num_values.max(0) as u64;
    }
    (base, total)
}

/// (row group, column path, page index) of each page job, for errors.
pub(super) type PageName = (usize, String, usize);

/// The first page whose error bits are set, as an error naming it.
pub(super) fn page_errors(
    path: &std::path::Path,
    errs: &[i32],
    names: &[PageName],
    table: &[(u32, &str)],
) -> Result<()> {
    match errs.iter().position(|&b| b != 0) {
        None => Ok(()),
        Some(k) => {
            let (rg, col, page) = &names[k];
            Err(Error::Decode {
                path: path.to_path_buf(),
                row_group: Some(*rg),
                column: Some(col.clone()),
                reason: format!(
                    "page {page} (decoded on the GPU): {}",
                    describe_errors(errs[k] as u32, table)
                ),
            })
        }
    }
}

/// Appends a job per data page of one chunk (`column`: the index of its column job) to `jobs`
/// and `names`; returns the rows the pages hold and the dictionary page, if any, as (page,
/// address, bytes, entries).
pub(super) fn data_page_jobs(
    c: &crate::plan::ColumnChunkPlan,
    table: &[PageInfo],
    page_data: &[(u64, u64)],
    max_def: i16,
    column: usize,
    jobs: &mut Vec<PageJob>,
    names: &mut Vec<PageName>,
) -> (u64, Option<(usize, u64, u64, i32)>) {
    let mut row = 0u64;
    let mut dict = None;
    for (k, p) in table.iter().enumerate() {
        let (ptr, len) = page_data[k];
        match p.kind {
            2 => dict = Some((k, ptr, len, p.num_values)),
            0 | 3 => {
                jobs.push(PageJob {
                    data: ptr,
                    data_len: len,
                    row_start: row,
                    num_values: p.num_values,
                    encoding: p.encoding,
                    max_def: i32::from(max_def),
                    v2: i32::from(p.kind == 3),
                    def_len: p.def_levels_len,
                    rep_len: p.rep_levels_len,
                    column: column as i32,
                });
                names.push((c.row_group, c.path.clone(), k));
                row += p.num_values as u64;
            }
            _ => {}
        }
    }
    (row, dict)
}
