//! The coordinator's session, the workers, and a cluster of workers inside one process.

use std::sync::Arc;

use datafusion::common::{DataFusionError, Result};
use datafusion::execution::{SessionState, SessionStateBuilder};
use datafusion::prelude::SessionConfig;
use datafusion_distributed::{
    DistributedExt, SessionStateBuilderExt, Worker, WorkerQueryContext, WorkerResolver,
};
use url::Url;

use crate::codec::{GpuScanCodec, ShippableScans, WorkerOptions};
use crate::tasks;

/// The workers at a fixed list of URLs (`http://host:port`).
#[derive(Debug, Clone)]
pub struct StaticWorkers(Vec<Url>);

impl StaticWorkers {
    /// The workers at `urls`.
    pub fn new(urls: Vec<Url>) -> Self {
        StaticWorkers(urls)
    }

    /// The workers at these addresses: URLs, or `host:port` (taken as `http://host:port`).
    pub fn parse<S: AsRef<str>>(addresses: &[S]) -> Result<Self> {
        let urls = addresses
            .iter()
            .map(|a| {
                let a = a.as_ref().trim();
                let url = if a.contains("://") {
                    a.to_string()
                } else {
                    format!("http://{a}")
                };
                Url::parse(&url).map_err(|e| {
                    DataFusionError::Configuration(format!("worker address {a:?}: {e}"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if urls.is_empty() {
            return Err(DataFusionError::Configuration(
                "no worker address given".into(),
            ));
        }
        Ok(StaticWorkers(urls))
    }

    /// The URLs.
    pub fn urls(&self) -> &[Url] {
        &self.0
    }
}

impl WorkerResolver for StaticWorkers {
    fn get_urls(&self) -> Result<Vec<Url>> {
        Ok(self.0.clone())
    }
}

/// A coordinator's session: DataFusion's defaults with `config`, datafusion-distributed's
/// planner over `workers`, and cuparquet's scan made shippable — its codec, its files dealt
/// whole to the tasks, and a check at planning that every cuparquet scan encodes. Register
/// tables on it with [`cuparquet_datafusion::register_gpu_parquet`] as on one machine. Planning
/// reads footers only: the coordinator needs no GPU.
///
/// Plan for a worker's cores (`config`'s `target_partitions`), not for a share of them: each
/// task runs the stage with that many partitions. Our scan reads files whole, so with no more
/// partitions than files DataFusion puts no round-robin repartition after it, and the operators
/// above run on as many partitions as a worker has files (on the H200, Q1 on two workers
/// planned for half the cores took 0.55× the time of one; for all of them, 0.97×:
/// benches/history/2026-12-04.md, "the GPU scan under datafusion-distributed").
pub fn coordinator_state(config: SessionConfig, workers: impl WorkerResolver) -> SessionState {
    SessionStateBuilder::new()
        .with_default_features()
        .with_config(config)
        .with_distributed_worker_resolver(workers)
        .with_distributed_planner()
        .with_distributed_user_codec(GpuScanCodec::default())
        .with_distributed_desired_task_count_handler(tasks::desired_tasks)
        .with_distributed_scale_up_leaf_node_handler(tasks::whole_files)
        .with_physical_optimizer_rule(Arc::new(ShippableScans::default()))
        .build()
}

/// A worker that runs cuparquet's scans with `options` (serve it with [`serve`]): each scan
/// decodes on this worker's own device — its GPU where it has one and the plan says
/// `Device::Auto`, else its CPU, with the same results — reading tables on object stores from
/// `options.object_stores`.
pub fn worker(options: WorkerOptions) -> Worker {
    let stores = options.object_stores.clone();
    let codec = GpuScanCodec::for_worker(options);
    Worker::from_session_builder(move |ctx: WorkerQueryContext| {
        let codec = codec.clone();
        let stores = stores.clone();
        async move {
            let mut b = ctx.builder.with_distributed_user_codec(codec);
            for (url, store) in &stores {
                b = b.with_object_store(url, Arc::clone(store));
            }
            Ok(b.build())
        }
    })
}

/// Serves `worker` on `listener` until the server fails (datafusion-distributed's gRPC
/// service; batches leave the worker as Arrow IPC).
pub async fn serve(worker: Worker, listener: tokio::net::TcpListener) -> Result<()> {
    tonic::transport::Server::builder()
        .add_service(worker.into_worker_server())
        .serve_with_incoming(
            // TCP_NODELAY: with Nagle's algorithm on, a stage's small Flight messages waited for
            // the peer's delayed acknowledgement (~40 ms a query on loopback)
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
        )
        .await
        .map_err(|e| DataFusionError::External(Box::new(e)))
}

/// Workers on 127.0.0.1 inside this process, each on its own runtime (its own threads), as a
/// test or an example runs them: [`StaticWorkers`] over [`urls`](Self::urls) reaches them as
/// it would workers on other machines, through gRPC.
#[derive(Debug)]
pub struct LocalCluster {
    workers: Vec<LocalWorker>,
}

#[derive(Debug)]
struct LocalWorker {
    url: Url,
    runtime: Option<tokio::runtime::Runtime>,
}

impl LocalCluster {
    /// `n` workers, each with `options` and `threads` runtime threads.
    pub fn start(n: usize, options: WorkerOptions, threads: usize) -> Result<Self> {
        Self::start_each(vec![options; n], threads)
    }

    /// A worker for each of `options`, each with `threads` runtime threads.
    pub fn start_each(options: Vec<WorkerOptions>, threads: usize) -> Result<Self> {
        let io = |what: &str, e: std::io::Error| {
            DataFusionError::Execution(format!("starting a local worker: {what}: {e}"))
        };
        let mut workers = Vec::new();
        for (i, o) in options.into_iter().enumerate() {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads.max(1))
                .thread_name(format!("cuparquet-worker-{i}"))
                .enable_all()
                .build()
                .map_err(|e| io("its runtime", e))?;
            let listener =
                std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| io("binding", e))?;
            let port = listener
                .local_addr()
                .map_err(|e| io("its address", e))?
                .port();
            listener
                .set_nonblocking(true)
                .map_err(|e| io("its socket", e))?;
            let listener = {
                let _entered = runtime.enter();
                tokio::net::TcpListener::from_std(listener).map_err(|e| io("its socket", e))?
            };
            let w = worker(o);
            runtime.spawn(async move {
                if let Err(e) = serve(w, listener).await {
                    eprintln!("cuparquet local worker {i}: {e}");
                }
            });
            let url = Url::parse(&format!("http://127.0.0.1:{port}"))
                .map_err(|e| DataFusionError::Execution(format!("worker url: {e}")))?;
            workers.push(LocalWorker {
                url,
                runtime: Some(runtime),
            });
        }
        Ok(LocalCluster { workers })
    }

    /// The workers' URLs.
    pub fn urls(&self) -> Vec<Url> {
        self.workers.iter().map(|w| w.url.clone()).collect()
    }

    /// A resolver over the workers.
    pub fn resolver(&self) -> StaticWorkers {
        StaticWorkers::new(self.urls())
    }

    /// Stops worker `i` as if its process died: its runtime is shut down, its connections and
    /// the tasks it ran dropped.
    pub fn stop(&mut self, i: usize) {
        if let Some(rt) = self.workers.get_mut(i).and_then(|w| w.runtime.take()) {
            rt.shutdown_background();
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for i in 0..self.workers.len() {
            self.stop(i);
        }
    }
}
