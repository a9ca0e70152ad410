//! Row groups ruled out by bloom filters (see [`predicate::BoundPredicate::bloom_rules_out`]):
//! after the statistics have pruned, each kept row group's bloom filters of the columns an
//! equality of the filter tests are read (one request per filter, where the footer gives its
//! offset and length), and the row groups they rule out are planned away, each listed in
//! [`ReadPlan::pruned`] with its reason. A filter that cannot be read as one (a length that
//! lies, bytes that do not parse) is not used.

use std::collections::HashMap;
use std::path::Path;

use parquet::bloom_filter::Sbbf;

use super::{plan_with, predicate, CoalesceConfig, PrunedRowGroup, ReadPlan, Selection};
use crate::error::Result;
use crate::metadata::FileMetadata;
use crate::source::ParquetFile;

/// `plan` (made from `selection`) without the row groups its filter's equalities find absent
/// from their columns' bloom filters, read from `file`.
pub fn prune_by_bloom_filters(
    path: &Path,
    meta: &FileMetadata,
    plan: ReadPlan,
    selection: &Selection,
    coalesce: &CoalesceConfig,
    file: &ParquetFile,
) -> Result<ReadPlan> {
    let Some(text) = &plan.filter else {
        return Ok(plan);
    };
    let md = &meta.metadata;
    let schema = md.file_metadata().schema_descr();
    let bound = predicate::bind(&predicate::parse_predicate(text)?, text, schema)?;
    let leaves = bound.bloom_leaves(schema);
    if leaves.is_empty() {
        return Ok(plan);
    }
    let mut pruned = Vec::new();
    for &rg in &plan.row_groups {
        let mut filters: HashMap<usize, Sbbf> = HashMap::new();
        for &leaf in &leaves {
            let cc = md.row_group(rg).column(leaf);
            let (Some(off), Some(len)) = (cc.bloom_filter_offset(), cc.bloom_filter_length())
            else {
                continue;
            };
            let (Ok(off), Ok(len)) = (u64::try_from(off), u64::try_from(len)) else {
                continue;
            };
            if len == 0 || off.saturating_add(len) > meta.file_len {
                continue;
            }
            let bytes = file.read_range(off..off + len, "bloom filter")?;
            if let Ok(f) = Sbbf::from_bytes(&bytes) {
                filters.insert(leaf, f);
            }
        }
        if filters.is_empty() {
            continue;
        }
        if let Some(reason) = bound.bloom_rules_out(schema, &filters) {
            pruned.push(PrunedRowGroup {
                row_group: rg,
                reason,
            });
        }
    }
    if pruned.is_empty() {
        return Ok(plan);
    }
    let mut sel = selection.clone();
    sel.row_groups = Some(
        (plan.row_groups.iter().copied())
            .filter(|rg| !pruned.iter().any(|p| p.row_group == *rg))
            .collect(),
    );
    let mut out = plan_with(path, meta, &sel, coalesce)?;
    // the row groups the statistics pruned (not asked of the new plan), and the bloom filters'
    out.pruned.extend(plan.pruned);
    out.pruned.extend(pruned);
    out.pruned.sort_by_key(|p| p.row_group);
    out.pruned.dedup_by_key(|p| p.row_group);
    Ok(out)
}
