//! How a cuparquet scan's files are dealt to a stage's tasks: whole files (a file is one
//! pipelined load on a worker, as on one machine, where whole files beat byte ranges), the
//! largest first to the task partition holding the fewest bytes; no more tasks than files.

use std::cmp::Reverse;
use std::sync::Arc;

use datafusion::common::Result;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::FileGroup;
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
use datafusion_distributed::{
    DesiredTaskCountEvent, DesiredTaskCountEventResponse, DistributedConfig, DistributedLeafExec,
    ScaleUpLeafNodeEvent, ScaleUpLeafNodeEventResponse,
};

use crate::codec::gpu_scan;

/// The tasks a cuparquet scan wants: datafusion-distributed's rule for file scans (a task per
/// `target_partitions` × `file_scan_config_bytes_per_partition` bytes), at most one per file.
pub(crate) fn desired_tasks(
    ev: DesiredTaskCountEvent<'_>,
) -> Option<Result<DesiredTaskCountEventResponse>> {
    let (fsc, _) = gpu_scan(ev.plan)?;
    let cfg = DistributedConfig::from_session_config(ev.session_config).ok()?;
    let files: Vec<&PartitionedFile> = fsc.file_groups.iter().flat_map(|g| g.files()).collect();
    let bytes: u64 = files.iter().map(|f| f.effective_size()).sum();
    let per_task = (cfg.file_scan_config_bytes_per_partition.max(1) as u64)
        * (ev.session_config.target_partitions().max(1) as u64);
    let tasks = (bytes.div_ceil(per_task) as usize).clamp(1, files.len().max(1));
    Some(Ok(DesiredTaskCountEventResponse::desired(tasks)))
}

/// `files` dealt over `groups` groups: the largest first, each to the group with the fewest
/// bytes so far (ties: the first such group; equal sizes keep the files' order).
pub(crate) fn deal(mut files: Vec<PartitionedFile>, groups: usize) -> Vec<Vec<PartitionedFile>> {
    let mut out: Vec<(u64, Vec<PartitionedFile>)> =
        (0..groups.max(1)).map(|_| (0, Vec::new())).collect();
    files.sort_by_key(|f| Reverse(f.effective_size()));
    for f in files {
        let g = (0..out.len()).min_by_key(|&i| out[i].0).unwrap_or(0);
        out[g].0 += f.effective_size();
        out[g].1.push(f);
    }
    out.into_iter().map(|(_, f)| f).collect()
}

/// A cuparquet scan scaled up to `ev.task_count` tasks: each task a copy of the scan with its
/// share of whole files, in as many partitions as the scan had. Scans that declare an output
/// ordering are left to datafusion-distributed's own rule (which keeps it).
pub(crate) fn whole_files(
    ev: ScaleUpLeafNodeEvent<'_>,
) -> Option<Result<ScaleUpLeafNodeEventResponse>> {
    let (fsc, _) = gpu_scan(ev.plan)?;
    if !fsc.output_ordering.is_empty() {
        return None;
    }
    let tasks = ev.task_count.max(1);
    let partitions = ev.plan.output_partitioning().partition_count().max(1);
    let files: Vec<PartitionedFile> = (fsc.file_groups.iter())
        .flat_map(|g| g.files().iter().cloned())
        .collect();
    let groups = deal(files, partitions * tasks);
    let mut template = fsc.clone();
    template.file_groups.clear();
    let mut scans = vec![template; tasks];
    for (i, g) in groups.into_iter().enumerate() {
        scans[i % tasks].file_groups.push(FileGroup::new(g));
    }
    let variants = scans
        .into_iter()
        .map(|s| DataSourceExec::from_data_source(s) as Arc<dyn ExecutionPlan>);
    Some(
        DistributedLeafExec::try_new(Arc::clone(ev.plan), variants)
            .map(|leaf| ScaleUpLeafNodeEventResponse::new(Arc::new(leaf))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, size: u64) -> PartitionedFile {
        PartitionedFile::new(name.to_string(), size)
    }

    #[test]
    fn files_are_dealt_whole_and_balanced() {
        let files = vec![
            file("a", 10),
            file("b", 80),
            file("c", 30),
            file("d", 50),
            file("e", 20),
        ];
        let groups = deal(files, 2);
        let names: Vec<Vec<String>> = groups
            .iter()
            .map(|g| {
                g.iter()
                    .map(|f| f.object_meta.location.to_string())
                    .collect()
            })
            .collect();
        // b (80) | d (50), c (30): 80 each; e (20) to the first of the two, a (10) to the other
        assert_eq!(names, vec![vec!["b", "e"], vec!["d", "c", "a"]]);
        let bytes: Vec<u64> = groups
            .iter()
            .map(|g| g.iter().map(|f| f.effective_size()).sum())
            .collect();
        assert_eq!(bytes, vec![100, 90]);
        // more groups than files: the rest are empty, every file once
        let groups = deal(vec![file("x", 1), file("y", 2)], 4);
        assert_eq!(
            groups.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![1, 1, 0, 0]
        );
        assert!(deal(Vec::new(), 0).iter().all(Vec::is_empty));
    }
}
