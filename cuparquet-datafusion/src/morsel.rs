//! cuparquet's opener under DataFusion's morsel API: each file one planner, whose one I/O step
//! is the opener's (footer, pruning, the scan started on its thread) and whose one morsel is
//! the file's batch stream. (DataFusion's own adapter of a `FileOpener` is private to it.)
//! And DataFusion's own reader's morsels, their errors naming the file.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::common::Result;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::FileOpener;
use datafusion_datasource::morsel::{Morsel, MorselPlan, MorselPlanner, Morselizer};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

/// Plans each file of a partition as one morsel: the stream `opener` opens for it.
pub(crate) struct OpenerMorsels(pub(crate) Arc<dyn FileOpener>);

impl fmt::Debug for OpenerMorsels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OpenerMorsels")
    }
}

impl Morselizer for OpenerMorsels {
    fn plan_file(&self, file: PartitionedFile) -> Result<Box<dyn MorselPlanner>> {
        Ok(Box::new(FilePlanner::ToOpen(
            Arc::clone(&self.0),
            Box::new(file),
        )))
    }
}

/// A file before its opener ran, then its batch stream.
enum FilePlanner {
    ToOpen(Arc<dyn FileOpener>, Box<PartitionedFile>),
    Opened(BoxStream<'static, Result<RecordBatch>>),
}

impl fmt::Debug for FilePlanner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FilePlanner::ToOpen(..) => "FilePlanner::ToOpen",
            FilePlanner::Opened(_) => "FilePlanner::Opened",
        })
    }
}

impl MorselPlanner for FilePlanner {
    fn plan(self: Box<Self>) -> Result<Option<MorselPlan>> {
        Ok(Some(match *self {
            FilePlanner::ToOpen(opener, file) => {
                // the opener's future does the I/O; its result plans the stream
                let opening = opener.open(*file)?;
                MorselPlan::new().with_pending_planner(async move {
                    let stream = opening.await?;
                    Ok(Box::new(FilePlanner::Opened(stream)) as Box<dyn MorselPlanner>)
                })
            }
            FilePlanner::Opened(stream) => {
                MorselPlan::new().with_morsels(vec![Box::new(StreamMorsel(stream))])
            }
        }))
    }
}

/// One file's batches.
struct StreamMorsel(BoxStream<'static, Result<RecordBatch>>);

impl fmt::Debug for StreamMorsel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StreamMorsel")
    }
}

impl Morsel for StreamMorsel {
    fn into_stream(self: Box<Self>) -> BoxStream<'static, Result<RecordBatch>> {
        self.0
    }
}

/// Another morselizer's morsels, their errors naming the file (DataFusion's own reader, on the
/// host, names none: "Parquet error: Required field type_ is missing").
pub(crate) struct NamingMorsels {
    pub(crate) inner: Box<dyn Morselizer>,
    pub(crate) store: Arc<dyn object_store::ObjectStore>,
}

impl fmt::Debug for NamingMorsels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("NamingMorsels").field(&self.inner).finish()
    }
}

impl Morselizer for NamingMorsels {
    fn plan_file(&self, file: PartitionedFile) -> Result<Box<dyn MorselPlanner>> {
        let mut name = crate::format::object_name(&self.store, &file.object_meta);
        if let Some(r) = &file.range {
            name = format!("{name}, bytes {}..{}", r.start, r.end);
        }
        let name: Arc<str> = name.into();
        let inner = (self.inner.plan_file(file)).map_err(|e| e.context(name.to_string()))?;
        Ok(Box::new(NamingPlanner { inner, name }))
    }
}

/// A planner whose errors, and whose morsels' and later planners', name the file.
#[derive(Debug)]
struct NamingPlanner {
    inner: Box<dyn MorselPlanner>,
    name: Arc<str>,
}

impl MorselPlanner for NamingPlanner {
    fn plan(self: Box<Self>) -> Result<Option<MorselPlan>> {
        let name = self.name;
        let named = |e: datafusion::error::DataFusionError| e.context(name.to_string());
        let Some(mut plan) = self.inner.plan().map_err(named)? else {
            return Ok(None);
        };
        let morsels = (plan.take_morsels().into_iter())
            .map(|inner| {
                Box::new(NamingMorsel {
                    inner,
                    name: Arc::clone(&name),
                }) as Box<dyn Morsel>
            })
            .collect();
        let planners = (plan.take_ready_planners().into_iter())
            .map(|inner| {
                Box::new(NamingPlanner {
                    inner,
                    name: Arc::clone(&name),
                }) as Box<dyn MorselPlanner>
            })
            .collect();
        let mut out = MorselPlan::new()
            .with_morsels(morsels)
            .with_planners(planners);
        if let Some(pending) = plan.take_pending_planner() {
            out.set_pending_planner(async move {
                match pending.await {
                    Ok(inner) => {
                        Ok(Box::new(NamingPlanner { inner, name }) as Box<dyn MorselPlanner>)
                    }
                    Err(e) => Err(e.context(name.to_string())),
                }
            });
        }
        Ok(Some(out))
    }
}

/// A morsel whose batches' errors name the file.
#[derive(Debug)]
struct NamingMorsel {
    inner: Box<dyn Morsel>,
    name: Arc<str>,
}

impl Morsel for NamingMorsel {
    fn into_stream(self: Box<Self>) -> BoxStream<'static, Result<RecordBatch>> {
        let name = self.name;
        self.inner
            .into_stream()
            .map_err(move |e| e.context(name.to_string()))
            .boxed()
    }
}
