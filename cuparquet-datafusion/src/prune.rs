//! Which row groups and rows of a file the scan reads: DataFusion's own pruning (row-group
//! statistics, the page index) over the footer cuparquet read, as an access plan.

use std::sync::Arc;

use cuparquet::parquet::file::metadata::{ParquetMetaData, RowGroupMetaData};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{exec_err, Result};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::physical_plan::PhysicalExpr;
use datafusion_datasource_parquet::{
    PagePruningAccessPlanFilter, ParquetAccessPlan, ParquetFileMetrics, RowGroupAccess,
    RowGroupAccessPlanFilter,
};
use datafusion_pruning::{PruningPredicate, PruningPredicateBuilder};

/// The pruning predicate of `predicate` over `schema`, or `None` where it prunes nothing
/// (always true, or not expressible over statistics).
pub(crate) fn pruning_predicate(
    predicate: &Arc<dyn PhysicalExpr>,
    schema: &SchemaRef,
) -> Option<Arc<PruningPredicate>> {
    PruningPredicateBuilder::new()
        .with_file_schema(Arc::clone(schema))
        .build(Arc::clone(predicate))
}

/// The filters of one scan, built once for all its files.
#[derive(Clone)]
pub(crate) struct Pruning {
    /// Over row-group statistics.
    pub(crate) row_groups: Option<Arc<PruningPredicate>>,
    /// Over the page index (single-column conjuncts).
    pub(crate) pages: Option<Arc<PagePruningAccessPlanFilter>>,
}

impl Pruning {
    /// The pruning of `predicate` over `schema` as a scan's `options` ask for it: by row-group
    /// statistics with `pruning`, by the page index with `pruning` and `page_index` too.
    pub(crate) fn new(
        predicate: Option<&Arc<dyn PhysicalExpr>>,
        schema: &SchemaRef,
        options: &crate::GpuScanOptions,
    ) -> Self {
        let statistics = options.pruning;
        let page_index = options.pruning && options.page_index;
        let Some(p) = predicate else {
            return Pruning {
                row_groups: None,
                pages: None,
            };
        };
        Pruning {
            row_groups: statistics.then(|| pruning_predicate(p, schema)).flatten(),
            pages: page_index
                .then(|| {
                    let f = PagePruningAccessPlanFilter::new(p, Arc::clone(schema));
                    (f.filter_number() > 0).then(|| Arc::new(f))
                })
                .flatten(),
        }
    }

    /// Whether the page index helps: there are page filters.
    pub(crate) fn wants_page_index(&self) -> bool {
        self.pages.is_some()
    }
}

/// The access plan of `file`: the access plan it carries (a `ParquetAccessPlan` extension,
/// as DataFusion's own scan takes), else every row group; then only the row groups starting
/// in the partition's byte range, those whose statistics may match, the pages whose page
/// index may match, and — with a `limit` and no filter — the first row groups that hold
/// `limit` rows.
pub(crate) fn access_plan(
    file: &PartitionedFile,
    meta: &ParquetMetaData,
    schema: &SchemaRef,
    pruning: &Pruning,
    filtered: bool,
    limit: Option<usize>,
    metrics: &ParquetFileMetrics,
) -> Result<ParquetAccessPlan> {
    let groups = meta.row_groups();
    let name = file.object_meta.location.as_ref();
    let initial = match file.extensions.get::<ParquetAccessPlan>() {
        Some(p) if p.len() != groups.len() => {
            return exec_err!(
                "the access plan given for {name} names {} row groups; the file has {}",
                p.len(),
                groups.len()
            )
        }
        Some(p) => p.clone(),
        None => ParquetAccessPlan::new_all(groups.len()),
    };
    let mut plan = RowGroupAccessPlanFilter::new(initial);
    if let Some(range) = &file.range {
        plan.prune_by_range(groups, range);
    }
    if let Some(p) = &pruning.row_groups {
        plan.prune_by_statistics(
            schema.as_ref(),
            meta.file_metadata().schema_descr(),
            groups,
            p,
            metrics,
        );
    }
    let mut plan = plan.build();
    if let Some(pages) = &pruning.pages {
        if meta.offset_index().is_some() && meta.column_index().is_some() {
            plan = pages.prune_plan_with_page_index(
                plan,
                schema.as_ref(),
                meta.file_metadata().schema_descr(),
                meta,
                metrics,
            );
        }
    }
    if let (Some(limit), false) = (limit, filtered) {
        let mut rows = 0usize;
        for rg in plan.row_group_indexes() {
            if rows >= limit {
                plan.skip(rg);
                continue;
            }
            rows += rows_in(&plan.inner()[rg], &groups[rg]);
        }
    }
    Ok(plan)
}

/// The rows `access` reads of row group `group`.
fn rows_in(access: &RowGroupAccess, group: &RowGroupMetaData) -> usize {
    match access {
        RowGroupAccess::Skip => 0,
        RowGroupAccess::Scan => group.num_rows().max(0) as usize,
        RowGroupAccess::Selection(s) => s.row_count(),
    }
}

/// The rows `plan` reads.
pub(crate) fn rows_of(plan: &ParquetAccessPlan, meta: &ParquetMetaData) -> usize {
    plan.inner()
        .iter()
        .enumerate()
        .map(|(rg, a)| rows_in(a, meta.row_group(rg)))
        .sum()
}

/// `plan` in cuparquet's terms (the same three cases).
pub(crate) fn to_reader_access(plan: ParquetAccessPlan) -> Vec<cuparquet::plan::RowGroupAccess> {
    plan.into_inner()
        .into_iter()
        .map(|a| match a {
            RowGroupAccess::Skip => cuparquet::plan::RowGroupAccess::Skip,
            RowGroupAccess::Scan => cuparquet::plan::RowGroupAccess::Scan,
            RowGroupAccess::Selection(s) => cuparquet::plan::RowGroupAccess::Selection(s),
        })
        .collect()
}
