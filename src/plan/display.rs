//! `cuparquet plan`'s text: the plan as a table of chunks, units and requests. The alternate
//! form (`{:#}`, `cuparquet plan --verbose`) lists every pruned row group with its reason; the
//! plain one counts them and gives their ranges.

use std::fmt;

use super::{human_bytes, ReadPlan};

impl fmt::Display for ReadPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "plan: {} row group{} ({} rows), {} column{}, {} chunk{}: {} in {} request{} ({} read)",
            self.row_groups.len(),
            if self.row_groups.len() == 1 { "" } else { "s" },
            self.num_rows,
            self.leaves.len(),
            if self.leaves.len() == 1 { "" } else { "s" },
            self.chunks.len(),
            if self.chunks.len() == 1 { "" } else { "s" },
            human_bytes(self.chunk_bytes()),
            self.requests.len(),
            if self.requests.len() == 1 { "" } else { "s" },
            human_bytes(self.request_bytes()),
        )?;
        match (&self.filter, &self.row_filter) {
            (Some(filter), Some(rf)) => {
                if filter != rf {
                    writeln!(f, "filter: {filter} (prunes row groups by statistics)")?;
                }
                writeln!(
                    f,
                    "row filter: {rf} (prunes row groups{} by statistics, then keeps only the \
                     rows where it is true; the rows above are the rows read)",
                    if self.page_pruning.is_empty() {
                        ""
                    } else {
                        " and pages"
                    }
                )?;
            }
            (Some(filter), None) => writeln!(
                f,
                "filter: {filter} (prunes row groups by statistics; rows are not filtered)"
            )?,
            (None, Some(rf)) => writeln!(
                f,
                "row filter: {rf} (keeps only the rows where it is true; the rows above are the \
                 rows read)"
            )?,
            (None, None) => {}
        }
        if let Some(rows) = &self.rows {
            let ranges: usize = rows.values().map(Vec::len).sum();
            writeln!(
                f,
                "row selection: {} rows in {ranges} range{} of {} row group{}",
                self.num_rows,
                if ranges == 1 { "" } else { "s" },
                rows.len(),
                if rows.len() == 1 { "" } else { "s" },
            )?;
            let sparse: Vec<_> = self.chunks.iter().filter(|c| c.read.is_some()).collect();
            if sparse.is_empty() {
                writeln!(
                    f,
                    "  every page of the chunks is read{} (pages without a selected row are not \
                     decoded)",
                    if self.chunks.iter().any(|c| c.pages.is_some()) {
                        ""
                    } else {
                        ": no page index loaded"
                    }
                )?;
            } else {
                let (mut read, mut all) = (0usize, 0usize);
                for c in &sparse {
                    let pages = c.pages.as_deref().unwrap_or_default();
                    all += pages.len();
                    read += pages
                        .iter()
                        .filter(|p| {
                            let parts = c.read.as_deref().unwrap_or_default();
                            parts.iter().any(|r| r.file.contains(&p.offset))
                        })
                        .count();
                }
                let skipped: u64 = sparse.iter().map(|c| c.len() - c.read_len()).sum();
                writeln!(
                    f,
                    "  page index: {} chunk{} read only the pages holding selected rows: {read} \
                     of {all} pages, {} not read",
                    sparse.len(),
                    if sparse.len() == 1 { "" } else { "s" },
                    human_bytes(skipped),
                )?;
            }
        }
        if f.alternate() {
            for p in &self.pruned {
                writeln!(f, "  pruned row group {}: {}", p.row_group, p.reason)?;
            }
        } else if let Some(first) = self.pruned.first() {
            let groups: Vec<usize> = self.pruned.iter().map(|p| p.row_group).collect();
            let n = groups.len();
            writeln!(
                f,
                "  pruned {n} row group{} ({}): row group {}: {}{}",
                if n == 1 { "" } else { "s" },
                fmt_index_list(&groups),
                first.row_group,
                first.reason,
                if n > 1 { "; --verbose: each one's reason" } else { "" }
            )?;
        }
        if !self.page_pruning.is_empty() {
            let kept: usize = self.page_pruning.iter().map(|p| p.pages_kept).sum();
            let dropped: usize = self.page_pruning.iter().map(|p| p.pages_dropped).sum();
            writeln!(
                f,
                "page index: {dropped} page{} of the filter's columns dropped, {kept} kept, in {} \
                 row group{} (their rows are not decoded)",
                if dropped == 1 { "" } else { "s" },
                self.page_pruning.len(),
                if self.page_pruning.len() == 1 {
                    ""
                } else {
                    "s"
                },
            )?;
        }
        let w = self
            .chunks
            .iter()
            .map(|c| c.path.len())
            .max()
            .unwrap_or(6)
            .max(6);
        writeln!(
            f,
            "{:>4}  {:<w$}  {:>12}  {:>10}  {:<12} {:<20} {:>10}  {:>5}",
            "rg", "column", "offset", "bytes", "codec", "type", "values", "req"
        )?;
        for (i, c) in self.chunks.iter().enumerate() {
            let ty = match &c.logical_type {
                Some(l) => format!("{}/{}", c.physical_type, l),
                None => c.physical_type.clone(),
            };
            let ty: String = ty.chars().take(20).collect();
            let req = self
                .requests
                .iter()
                .position(|r| r.chunks.contains(&i))
                .map_or("-".to_string(), |r| r.to_string());
            writeln!(
                f,
                "{:>4}  {:<w$}  {:>12}  {:>10}  {:<12} {:<20} {:>10}  {:>5}",
                c.row_group,
                c.path,
                c.range.start,
                c.len(),
                c.codec,
                ty,
                c.num_values,
                req
            )?;
        }
        let units: Vec<String> = self
            .units
            .iter()
            .map(|u| {
                let c: Vec<usize> = u.chunks.clone().collect();
                fmt_index_list(&c)
            })
            .collect();
        writeln!(
            f,
            "units (chunks read and decoded together): {}",
            units.join(" | ")
        )?;
        writeln!(f, "requests (file range → destination offset):")?;
        for (k, r) in self.requests.iter().enumerate() {
            writeln!(
                f,
                "{:>5}  {}..{} ({}) → {}  chunks {}",
                k,
                r.range.start,
                r.range.end,
                human_bytes(r.len()),
                r.dest_offset,
                fmt_index_list(&r.chunks)
            )?;
        }
        Ok(())
    }
}

pub(super) fn fmt_index_list(v: &[usize]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    out.join(",")
}
