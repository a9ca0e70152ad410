//! Reading only the pages a load needs. With the page index loaded and a row restriction (a
//! row selection, or the filter's page pruning), a chunk reads its dictionary page and the data
//! pages holding a row the load keeps; the bytes of the other pages are never read. The chunk
//! keeps its place in the destination, laid out whole; the decoders walk only the pages read
//! and take each page's first row from the offset index.

use std::ops::Range;

use super::PagePlan;

/// The file ranges of a chunk (bytes `range`, data pages `pages` from the offset index, in a
/// row group of `num_rows` rows) to read for the rows `rows` (ascending, disjoint): the bytes
/// before the first data page (its dictionary page), then each run of adjacent pages that hold
/// a row of `rows`, ascending. `Ok(None)` when every page is needed. An error saying what is
/// wrong when the offset index cannot describe the chunk.
pub(super) fn page_reads(
    range: &Range<u64>,
    pages: &[PagePlan],
    rows: &[Range<u64>],
    num_rows: u64,
) -> Result<Option<Vec<Range<u64>>>, String> {
    check_index(range, pages, num_rows)?;
    let mut out: Vec<Range<u64>> = Vec::new();
    if range.start < pages[0].offset {
        out.push(range.start..pages[0].offset);
    }
    let mut all = true;
    let mut sel = 0usize;
    for (k, p) in pages.iter().enumerate() {
        let end = pages.get(k + 1).map_or(num_rows, |n| n.first_row_index);
        // the first selected range that ends after the page's first row
        while sel < rows.len() && rows[sel].end <= p.first_row_index {
            sel += 1;
        }
        let keep = rows.get(sel).is_some_and(|r| r.start < end);
        if !keep {
            all = false;
            continue;
        }
        let bytes = p.offset..p.offset + p.compressed_size;
        match out.last_mut() {
            Some(last) if last.end == bytes.start => last.end = bytes.end,
            _ => out.push(bytes),
        }
    }
    Ok((!all).then_some(out))
}

/// Checks that `pages` tile chunk `range` as a chunk's data pages must: at least one, the
/// first holding row 0, first rows ascending within the row group's `num_rows`, pages of some
/// bytes each, ascending and disjoint, inside the chunk.
pub(super) fn check_index(
    range: &Range<u64>,
    pages: &[PagePlan],
    num_rows: u64,
) -> Result<(), String> {
    let Some(first) = pages.first() else {
        return Err("the offset index lists no page for a chunk with values".into());
    };
    if first.first_row_index != 0 {
        return Err(format!(
            "the offset index's first page begins at row {}, not 0",
            first.first_row_index
        ));
    }
    let mut end = range.start;
    for (k, p) in pages.iter().enumerate() {
        let bytes = p.offset..p.offset.saturating_add(p.compressed_size);
        if p.compressed_size == 0 || bytes.start < end || bytes.end > range.end {
            return Err(format!(
                "the offset index puts page {k} at bytes {}..{}, outside the chunk's {}..{} or \
                 over the page before",
                bytes.start, bytes.end, range.start, range.end
            ));
        }
        end = bytes.end;
        if k > 0 && p.first_row_index <= pages[k - 1].first_row_index {
            return Err(format!(
                "the offset index's first rows are not ascending at page {k} ({} after {})",
                p.first_row_index,
                pages[k - 1].first_row_index
            ));
        }
        if p.first_row_index >= num_rows {
            return Err(format!(
                "the offset index's page {k} begins at row {}, past the row group's {num_rows} rows",
                p.first_row_index
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages of 100 bytes from offset 1000 (a dictionary page before them from 900), one per
    /// 10 rows.
    fn pages(n: u64) -> Vec<PagePlan> {
        (0..n)
            .map(|k| PagePlan {
                offset: 1000 + 100 * k,
                compressed_size: 100,
                first_row_index: 10 * k,
            })
            .collect()
    }

    #[test]
    fn reads_the_dictionary_and_the_pages_of_the_rows() {
        let p = pages(8);
        let range = 900..1800;
        // rows 15..25 lie in pages 1 and 2; rows 70..71 in page 7
        let got = page_reads(&range, &p, &[15..25, 70..71], 80).unwrap();
        assert_eq!(got, Some(vec![900..1000, 1100..1300, 1700..1800]));
        // page 0 kept: it joins the dictionary's bytes
        let got = page_reads(&range, &p, &[0..1], 80).unwrap();
        assert_eq!(got, Some(vec![900..1100]));
        // no dictionary page: nothing before the first page
        let got = page_reads(&(1000..1800), &p, &[79..80], 80).unwrap();
        assert_eq!(got, Some(vec![1700..1800]));
        // every page needed: the whole chunk
        assert_eq!(page_reads(&range, &p, &[5..75], 80).unwrap(), None);
        assert_eq!(page_reads(&range, &p, &[0..80], 80).unwrap(), None);
    }

    #[test]
    fn an_index_that_cannot_describe_the_chunk_is_an_error() {
        let range = 900..1800;
        let mut p = pages(8);
        p.swap(2, 3);
        let e = page_reads(&range, &p, &[0..1], 80).unwrap_err();
        assert!(e.contains("page 3"), "{e}");
        let mut p = pages(8);
        p[4].first_row_index = 30;
        let e = page_reads(&range, &p, &[0..1], 80).unwrap_err();
        assert!(e.contains("not ascending at page 4"), "{e}");
        let e = page_reads(&(900..1700), &pages(8), &[0..1], 80).unwrap_err();
        assert!(e.contains("outside the chunk"), "{e}");
        let e = page_reads(&range, &pages(8), &[0..1], 70).unwrap_err();
        assert!(e.contains("past the row group's 70 rows"), "{e}");
        let mut p = pages(8);
        p[0].first_row_index = 1;
        assert!(page_reads(&range, &p, &[0..1], 80).is_err());
        assert!(page_reads(&range, &[], &[0..1], 80).is_err());
    }
}
