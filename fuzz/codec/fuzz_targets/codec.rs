//! The distributed codec's decoding of a shipped scan: the bytes a worker receives, either as
//! they come or as edits of a real encoded scan (the bundled sample's file, a projection, a
//! predicate and a row filter, options), decode to a scan or to an error, never a panic. A
//! decoded scan is planned as a worker would (its partitions' streams opened and dropped).
#![no_main]
use std::sync::{Arc, OnceLock};

use cuparquet_datafusion::{register_gpu_parquet, GpuScanOptions};
use cuparquet_distributed::{GpuScanCodec, WorkerOptions};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use datafusion_proto::physical_plan::{DefaultPhysicalProtoConverter, PhysicalExtensionCodec};
use libfuzzer_sys::fuzz_target;

const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../testdata/lineitem-sample.parquet"
);

/// The scan node of `plan` (its first DataSourceExec).
fn scan(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
    if plan.name() == "DataSourceExec" {
        return Some(Arc::clone(plan));
    }
    plan.children().into_iter().find_map(scan)
}

/// A real scan, encoded: what a coordinator ships.
fn shipped() -> &'static Vec<u8> {
    static SHIPPED: OnceLock<Vec<u8>> = OnceLock::new();
    SHIPPED.get_or_init(|| {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let ctx = SessionContext::new();
            let options = GpuScanOptions {
                batch_rows: Some(4096),
                ..GpuScanOptions::default()
            };
            register_gpu_parquet(&ctx, "t", SAMPLE, options).await.unwrap();
            let plan = ctx
                .sql("SELECT l_orderkey, l_comment FROM t WHERE l_quantity < 10 AND l_returnflag IN ('A', 'R')")
                .await
                .unwrap()
                .create_physical_plan()
                .await
                .unwrap();
            let mut buf = Vec::new();
            GpuScanCodec::default()
                .try_encode(scan(&plan).unwrap(), &mut buf, &DefaultPhysicalProtoConverter {})
                .unwrap();
            buf
        })
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&how, rest)) = data.split_first() else {
        return;
    };
    let bytes = if how & 1 == 0 {
        rest.to_vec()
    } else {
        // edits of the real scan: (position, byte) pairs, then a cut where `how` says
        let mut b = shipped().clone();
        for e in rest.chunks_exact(3) {
            let at = usize::from(u16::from_le_bytes([e[0], e[1]])) % b.len();
            b[at] = e[2];
        }
        if how & 2 != 0 {
            let keep = b.len() * usize::from(how >> 2) / 64;
            b.truncate(keep);
        }
        b
    };
    let worker = GpuScanCodec::for_worker(WorkerOptions {
        device: Some(cuparquet::Device::Host),
        ..WorkerOptions::default()
    });
    let task = SessionContext::new().task_ctx();
    let Ok(plan) = worker.try_decode(&bytes, &[], &task, &DefaultPhysicalProtoConverter {}) else {
        return;
    };
    // planned as a worker plans it: each partition's stream opened, then dropped
    let partitions = plan.properties().output_partitioning().partition_count();
    for p in 0..partitions.min(4) {
        let _ = plan.execute(p, Arc::clone(&task));
    }
});
