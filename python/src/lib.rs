//! `cuparquet._cuparquet`: the Python face of [`cuparquet::Scan`], wrapped by the package
//! `cuparquet` (cuparquet/__init__.py: the filters in pyarrow's list form, the docs).
//!
//! - `read_table` loads a scan whole ([`Scan::load`], the GIL released, Ctrl-C heeded) into a
//!   `Table`; `scan` gives its batches one by one (a `Scanner`, over [`Scan::batches`]).
//! - Data leaves through the Arrow PyCapsule interface, without a copy: host batches as
//!   `__arrow_c_array__` / `__arrow_c_stream__` (pyo3-arrow), device batches as
//!   `__arrow_c_device_array__` / `__arrow_c_device_stream__` (cuparquet's own C Device Data
//!   Interface export, with the `sync_event` the specification asks for).
//! - Errors are `cuparquet.CuparquetError` with the crate's message (file, byte range, row
//!   group, column); bad arguments are `TypeError` / `ValueError`.

mod column;
mod dlpack;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cuparquet::array::c_device::export_stream;
use cuparquet::arrow::array::{Array, RecordBatch as ArrowBatch, StructArray};
use cuparquet::arrow::datatypes::{DataType, Field, SchemaRef};
use cuparquet::config::{CompatMode, Tuning};
use cuparquet::{Batches, Device, LoadedBatch, Location, Scan, ScanBuilder};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyList, PyTuple};
use pyo3_arrow::ffi::{to_array_pycapsules, to_schema_pycapsule, to_stream_pycapsule};
use pyo3_arrow::ffi::{ArrayIterator, ArrayReader};
use pyo3_arrow::{PySchema, PyTable};

pyo3::create_exception!(
    _cuparquet,
    CuparquetError,
    pyo3::exceptions::PyException,
    "An error of cuparquet's: a file that cannot be read or decoded, a device that failed. \
     The message names the file (or URL), the byte range, the row group and the column."
);

/// The crate's error as a Python exception, its message whole.
pub(crate) fn err(e: cuparquet::Error) -> PyErr {
    CuparquetError::new_err(e.to_string())
}

/// The paths `source` names: a str or `os.PathLike` (a URL as a str), or a list or tuple of
/// them.
fn sources(source: &Bound<'_, PyAny>) -> PyResult<Vec<PathBuf>> {
    if let Ok(p) = source.extract::<PathBuf>() {
        return Ok(vec![p]);
    }
    if source.is_instance_of::<PyList>() || source.is_instance_of::<PyTuple>() {
        let mut out = Vec::new();
        for item in source.try_iter()? {
            let item = item?;
            out.push(item.extract::<PathBuf>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "source: a list of paths, but one item is a {}",
                    item.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                ))
            })?);
        }
        return Ok(out);
    }
    Err(PyTypeError::new_err(format!(
        "source: a path (str or os.PathLike), a directory, or a list of paths, not a {}",
        source
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default()
    )))
}

/// The settings `read_table` and `scan` take as keywords, beyond their named arguments.
const SETTINGS: &[&str] = &[
    "storage_options",
    "remote_concurrency",
    "row_groups",
    "page_index",
    "string_views",
    "keep_dictionaries",
    "nthreads",
    "task_size",
    "direct_io",
    "compat_mode",
    "gds_threshold",
    "bounce_buffer_size",
    "max_page_size",
    "tuning",
];

/// The scan builder of `read_table` and `scan`'s arguments.
#[allow(clippy::too_many_arguments)]
fn builder(
    source: &Bound<'_, PyAny>,
    columns: Option<Vec<String>>,
    filter: Option<String>,
    device: &str,
    batch_rows: Option<usize>,
    memory_budget: Option<u64>,
    settings: Option<&Bound<'_, PyDict>>,
) -> PyResult<ScanBuilder> {
    let device: Device = device
        .parse()
        .map_err(|e: cuparquet::Error| PyValueError::new_err(format!("device: {e}")))?;
    let mut b = Scan::builder(sources(source)?).with_device(device);
    if let Some(c) = columns {
        b = b.with_columns(c);
    }
    if let Some(f) = filter {
        b = b.with_row_filter(f);
    }
    if let Some(n) = batch_rows {
        if n == 0 {
            return Err(PyValueError::new_err("batch_rows: at least 1"));
        }
        b = b.with_batch_rows(n);
    }
    if let Some(m) = memory_budget {
        b = b.with_memory_budget(m);
    }
    let Some(settings) = settings else {
        return Ok(b);
    };
    for (k, v) in settings.iter() {
        let key: String = k.extract()?;
        let bad = |what: &str| PyTypeError::new_err(format!("{key}: expected {what}"));
        b = match key.as_str() {
            "storage_options" => {
                let o: std::collections::BTreeMap<String, String> = v
                    .extract()
                    .map_err(|_| bad("a dict of str to str (the object_store builders' keys)"))?;
                b.with_storage_options(o)
            }
            "remote_concurrency" => {
                b.with_remote_concurrency(v.extract().map_err(|_| bad("an int"))?)
            }
            "row_groups" => b.with_row_groups(
                v.extract::<Vec<usize>>()
                    .map_err(|_| bad("a list of row-group indices"))?,
            ),
            "page_index" => b.with_page_index(v.extract().map_err(|_| bad("a bool"))?),
            "string_views" => b.with_string_views(v.extract().map_err(|_| bad("a bool"))?),
            "keep_dictionaries" => {
                b.with_keep_dictionaries(v.extract().map_err(|_| bad("a bool"))?)
            }
            "nthreads" => b.with_nthreads(v.extract().map_err(|_| bad("an int"))?),
            "task_size" => b.with_task_size(v.extract().map_err(|_| bad("an int (bytes)"))?),
            "direct_io" => b.with_direct_io(v.extract().map_err(|_| bad("a bool"))?),
            "compat_mode" => {
                let s: String = v.extract().map_err(|_| bad("'auto', 'on' or 'off'"))?;
                let m: CompatMode = s.parse().map_err(|e: cuparquet::Error| {
                    PyValueError::new_err(format!("compat_mode: {e}"))
                })?;
                b.with_compat_mode(m)
            }
            "gds_threshold" => {
                b.with_gds_threshold(v.extract().map_err(|_| bad("an int (bytes)"))?)
            }
            "bounce_buffer_size" => {
                b.with_bounce_buffer_size(v.extract().map_err(|_| bad("an int (bytes)"))?)
            }
            "max_page_size" => {
                b.with_max_page_size(v.extract().map_err(|_| bad("an int (bytes)"))?)
            }
            "tuning" => {
                let s: String = v.extract().map_err(|_| bad("'key=value,...' text"))?;
                let t = Tuning::default()
                    .with_pairs(&s)
                    .map_err(|e| PyValueError::new_err(format!("tuning: {e}")))?;
                b.with_tuning(t)
            }
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "unexpected keyword argument '{key}' (the settings: {})",
                    SETTINGS.join(", ")
                )))
            }
        };
    }
    Ok(b)
}

/// A batch as one struct array (a field per column) and its field: the C Data Interface's
/// shape of a record batch.
fn as_struct(batch: &ArrowBatch) -> (Arc<Field>, StructArray) {
    let schema = batch.schema();
    let field = Field::new("", DataType::Struct(schema.fields().clone()), false)
        .with_metadata(schema.metadata().clone());
    (Arc::new(field), StructArray::from(batch.clone()))
}

/// The host batches of `batches`, copied from the device where they live there.
fn host_batches(py: Python<'_>, batches: &[LoadedBatch]) -> PyResult<Vec<ArrowBatch>> {
    let batches = batches.to_vec();
    py.detach(|| {
        batches
            .iter()
            .map(|b| b.to_host())
            .collect::<cuparquet::Result<Vec<_>>>()
    })
    .map_err(err)
}

/// A device array capsule pair for `batch`: (`arrow_schema`, `arrow_device_array`).
fn device_capsules<'py>(py: Python<'py>, batch: &LoadedBatch) -> PyResult<Bound<'py, PyTuple>> {
    let (schema, array) = batch.to_c_device().map_err(err)?;
    let schema = PyCapsule::new_with_value(py, schema, c"arrow_schema")?;
    let array = PyCapsule::new_with_value(py, array, c"arrow_device_array")?;
    PyTuple::new(py, [schema.into_any(), array.into_any()])
}

/// The advice given to `__arrow_c_array__` on device data, as the specification recommends.
fn on_device(what: &str, location: Location) -> PyErr {
    PyValueError::new_err(format!(
        "this {what} lives on {location}: host consumers (pyarrow) cannot read it without a copy; \
         call .to_pyarrow() for a host copy, read with device=\"host\", or hand it to a device \
         consumer (pylibcudf, through __arrow_c_device_array__)"
    ))
}

/// One batch: its columns in device memory (a device read) or host memory.
#[pyclass(module = "cuparquet", name = "RecordBatch", frozen)]
struct PyBatch {
    batch: LoadedBatch,
}

#[pymethods]
impl PyBatch {
    /// Rows in the batch.
    #[getter]
    fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }

    /// Columns in the batch.
    #[getter]
    fn num_columns(&self) -> usize {
        self.batch.num_columns()
    }

    /// Where its buffers live: `"host"` or `"cuda:N"`.
    #[getter]
    fn device(&self) -> String {
        self.batch.location().to_string()
    }

    /// The file it was read from.
    #[getter]
    fn file(&self) -> PathBuf {
        self.batch.file().to_path_buf()
    }

    /// Which rows of which row groups it holds: a list of `(row_group, start, end)`.
    #[getter]
    fn rows(&self) -> Vec<(usize, u64, u64)> {
        (self.batch.rows().iter())
            .map(|r| (r.row_group, r.rows.start, r.rows.end))
            .collect()
    }

    /// Its schema (a pyarrow schema through `__arrow_c_schema__`).
    #[getter]
    fn schema(&self) -> PySchema {
        PySchema::new(self.batch.schema())
    }

    /// A host copy as a `pyarrow.RecordBatch` (a copy from the device for a device batch).
    fn to_pyarrow<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let host = host_batches(py, std::slice::from_ref(&self.batch))?;
        let Some(b) = host.into_iter().next() else {
            return Err(CuparquetError::new_err(
                "the batch did not come back to the host",
            ));
        };
        pyo3_arrow::PyRecordBatch::new(b).into_pyarrow(py)
    }

    /// The column `key` (a name or a position) for array libraries: CuPy and PyTorch read a
    /// device column in place (`__cuda_array_interface__`, `__dlpack__`), NumPy a host one.
    /// Fixed-width types only; nulls as a separate mask (`Column.validity`).
    fn column(&self, key: &Bound<'_, PyAny>) -> PyResult<column::PyColumn> {
        let schema = self.batch.schema();
        let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        let i = column::index_of(&names, key)?;
        let f = schema.field(i);
        column::PyColumn::of(
            std::slice::from_ref(&self.batch),
            f.name(),
            i,
            f.data_type(),
        )
    }

    fn __len__(&self) -> usize {
        self.batch.num_rows()
    }

    fn __repr__(&self) -> String {
        format!(
            "cuparquet.RecordBatch({} rows, {} columns, on {})",
            self.batch.num_rows(),
            self.batch.num_columns(),
            self.batch.location()
        )
    }

    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        Ok(to_schema_pycapsule(py, self.batch.schema().as_ref())?)
    }

    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyCapsule>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let Some(h) = self.batch.as_host() else {
            return Err(on_device("batch", self.batch.location()));
        };
        let (field, array) = as_struct(h);
        Ok(to_array_pycapsules(py, field, &array, requested_schema)?)
    }

    #[pyo3(signature = (requested_schema=None, **kwargs))]
    fn __arrow_c_device_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyCapsule>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        // the schema is the batch's: a requested one is a hint the specification lets us ignore
        let _ = (requested_schema, kwargs);
        device_capsules(py, &self.batch)
    }
}

/// A scan loaded whole: its batches, their schema, and the report of what the load did.
#[pyclass(module = "cuparquet", name = "Table", frozen)]
struct PyTableOut {
    batches: Vec<LoadedBatch>,
    schema: SchemaRef,
    /// Turned into a dict when asked for (not on the read's path).
    report: cuparquet::ScanReport,
}

#[pymethods]
impl PyTableOut {
    /// Rows in all.
    #[getter]
    fn num_rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }

    /// Columns.
    #[getter]
    fn num_columns(&self) -> usize {
        self.schema.fields().len()
    }

    /// The column names.
    #[getter]
    fn column_names(&self) -> Vec<String> {
        self.schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }

    /// Where the batches live: `"host"` or `"cuda:N"`.
    #[getter]
    fn device(&self) -> String {
        self.location().to_string()
    }

    /// The batches, in order (`cuparquet.RecordBatch`).
    #[getter]
    fn batches(&self) -> Vec<PyBatch> {
        (self.batches.iter())
            .map(|b| PyBatch { batch: b.clone() })
            .collect()
    }

    /// The schema (a pyarrow schema through `__arrow_c_schema__`).
    #[getter]
    fn schema(&self) -> PySchema {
        PySchema::new(self.schema.clone())
    }

    /// What the load did, as a dict: per file, the device chosen and why, the bytes per I/O
    /// path, where each field was decoded, the times.
    #[getter]
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let text = report_json(&self.report)?;
        py.import("json")?.getattr("loads")?.call1((text,))
    }

    /// A host copy as a `pyarrow.Table` (copied from the device for a device read).
    fn to_pyarrow<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let host = host_batches(py, &self.batches)?;
        PyTable::try_new(host, self.schema.clone())?.into_pyarrow(py)
    }

    /// The column `key` (a name or a position) for array libraries, as
    /// `RecordBatch.column`: in place for a table of one batch; the batches' columns copied
    /// into one buffer on their device for several.
    fn column(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<column::PyColumn> {
        let names = self.column_names();
        let i = column::index_of(&names, key)?;
        let f = self.schema.field(i).clone();
        let batches = self.batches.clone();
        py.detach(move || column::PyColumn::of(&batches, f.name(), i, f.data_type()))
    }

    fn __len__(&self) -> usize {
        self.num_rows()
    }

    fn __repr__(&self) -> String {
        format!(
            "cuparquet.Table({} rows, {} columns, {} batches, on {})",
            self.num_rows(),
            self.schema.fields().len(),
            self.batches.len(),
            self.location()
        )
    }

    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        Ok(to_schema_pycapsule(py, self.schema.as_ref())?)
    }

    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyCapsule>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let mut arrays = Vec::with_capacity(self.batches.len());
        for b in &self.batches {
            let Some(h) = b.as_host() else {
                return Err(on_device("table", b.location()));
            };
            arrays.push(Ok(Arc::new(as_struct(h).1) as Arc<dyn Array>));
        }
        let field = Arc::new(
            Field::new("", DataType::Struct(self.schema.fields().clone()), false)
                .with_metadata(self.schema.metadata().clone()),
        );
        let reader: Box<dyn ArrayReader + Send> =
            Box::new(ArrayIterator::new(arrays.into_iter(), field));
        Ok(to_stream_pycapsule(py, reader, requested_schema)?)
    }

    #[pyo3(signature = (requested_schema=None, **kwargs))]
    fn __arrow_c_device_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyCapsule>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = (requested_schema, kwargs);
        let stream = export_stream(
            self.schema.clone(),
            self.location(),
            self.batches.clone().into_iter().map(Ok),
        );
        PyCapsule::new_with_value(py, stream, c"arrow_device_array_stream")
    }
}

impl PyTableOut {
    fn location(&self) -> Location {
        self.batches
            .first()
            .map_or(Location::Host, |b| b.location())
    }
}

/// The batches of a scan, read as they are asked for (`for batch in cuparquet.scan(...)`).
#[pyclass(module = "cuparquet", name = "Scanner", frozen)]
struct PyScanner {
    stream: Arc<Mutex<Option<Batches>>>,
    /// Set by Ctrl-C during `__next__` and by `close`: no more batches; one being read is
    /// dropped when it comes, and the scan with it.
    stopped: Arc<AtomicBool>,
    schema: SchemaRef,
    /// Where the batches land.
    location: Location,
}

#[pymethods]
impl PyScanner {
    /// The schema of the batches.
    #[getter]
    fn schema(&self) -> PySchema {
        PySchema::new(self.schema.clone())
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyBatch>> {
        if self.stopped.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let stream = Arc::clone(&self.stream);
        let stopped = Arc::clone(&self.stopped);
        let next = interruptible(py, move || {
            let mut g = stream.lock().unwrap_or_else(|p| p.into_inner());
            let next = g.as_mut().and_then(|s| s.next());
            if next.is_none() || stopped.load(Ordering::Relaxed) {
                // ended (the stream's threads are done), or interrupted: no more batches
                *g = None;
                return None;
            }
            next
        });
        let next = match next {
            Ok(n) => n,
            Err(e) => {
                self.stopped.store(true, Ordering::Relaxed);
                return Err(e);
            }
        };
        match next {
            None => Ok(None),
            Some(Ok(batch)) => Ok(Some(PyBatch { batch })),
            Some(Err(e)) => {
                *self.stream.lock().unwrap_or_else(|p| p.into_inner()) = None;
                Err(err(e))
            }
        }
    }

    /// Stops the scan: its reads and decoders end (also when the scanner is dropped).
    fn close(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        // a batch still being read (its `next` interrupted) drops the scan when it comes
        if let Ok(mut g) = self.stream.try_lock() {
            *g = None;
        }
    }

    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        Ok(to_schema_pycapsule(py, self.schema.as_ref())?)
    }

    /// The batches left, as an Arrow C stream of host batches (a device scan's batches are
    /// copied to the host one by one as the consumer reads them).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyCapsule>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let stream = self
            .stream
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| PyValueError::new_err("this scanner has ended or was consumed"))?;
        let field = Arc::new(
            Field::new("", DataType::Struct(self.schema.fields().clone()), false)
                .with_metadata(self.schema.metadata().clone()),
        );
        let arrays = stream.map(|r| {
            r.and_then(|b| b.into_host())
                .map(|h| Arc::new(as_struct(&h).1) as Arc<dyn Array>)
                .map_err(|e| cuparquet::arrow::error::ArrowError::ExternalError(Box::new(e)))
        });
        let reader: Box<dyn ArrayReader + Send> = Box::new(ArrayIterator::new(arrays, field));
        Ok(to_stream_pycapsule(py, reader, requested_schema)?)
    }

    /// The batches left as an Arrow C Device stream (device batches without a copy).
    #[pyo3(signature = (requested_schema=None, **kwargs))]
    fn __arrow_c_device_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyCapsule>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = (requested_schema, kwargs);
        let stream = self
            .stream
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| PyValueError::new_err("this scanner has ended or was consumed"))?;
        let out = export_stream(self.schema.clone(), self.location, stream);
        PyCapsule::new_with_value(py, out, c"arrow_device_array_stream")
    }
}

/// The report as JSON text, each load with `bytes_by_path`: the bytes its reads moved by each
/// I/O path (`host`, `staged`, `cufile`, …), summed from its requests.
fn report_json(report: &cuparquet::ScanReport) -> PyResult<String> {
    let bad = |e: serde_json::Error| CuparquetError::new_err(format!("the report: {e}"));
    let mut v = serde_json::to_value(report).map_err(bad)?;
    if let Some(loads) = v.get_mut("loads").and_then(|l| l.as_array_mut()) {
        for load in loads {
            let mut by = serde_json::Map::new();
            let requests = load
                .pointer("/io/requests")
                .and_then(|r| r.as_array())
                .cloned()
                .unwrap_or_default();
            for r in requests {
                let path = r
                    .get("path")
                    .and_then(|p| p.as_str())
                    .unwrap_or("?")
                    .to_string();
                let start = r
                    .pointer("/range/start")
                    .and_then(|x| x.as_u64())
                    .unwrap_or(0);
                let end = r
                    .pointer("/range/end")
                    .and_then(|x| x.as_u64())
                    .unwrap_or(0);
                let n = by.get(&path).and_then(|x| x.as_u64()).unwrap_or(0);
                by.insert(path, (n + end.saturating_sub(start)).into());
            }
            if let Some(o) = load.as_object_mut() {
                o.insert("bytes_by_path".into(), by.into());
            }
        }
    }
    serde_json::to_string(&v).map_err(bad)
}

type Job = Box<dyn FnOnce() + Send>;

/// Idle reader threads, each waiting on its own channel. A read runs on one of them, so that
/// what a thread sets up on its first CUDA call (the context made current, its per-thread
/// default stream) is set up once, not on every call; a thread is made when none is idle (an
/// interrupted read keeps its thread until it ends).
static IDLE: Mutex<Vec<std::sync::mpsc::Sender<Job>>> = Mutex::new(Vec::new());

/// Runs `job` on an idle reader thread, or a new one.
fn on_worker(mut job: Job) -> std::io::Result<()> {
    loop {
        let idle = IDLE.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let Some(tx) = idle else { break };
        match tx.send(job) {
            Ok(()) => return Ok(()),
            Err(back) => job = back.0, // that thread is gone: the next one
        }
    }
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    // queued before the thread starts; the thread keeps a sender to itself to be found idle
    let _ = tx.send(job);
    std::thread::Builder::new()
        .name("cuparquet-read".into())
        .spawn(move || {
            for job in rx.iter() {
                job();
                IDLE.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(tx.clone());
            }
        })?;
    Ok(())
}

/// Runs `job` on a reader thread ([`on_worker`]), waiting for it with the GIL released in steps of 50 ms:
/// Ctrl-C (a pending signal, checked at each step) returns its `KeyboardInterrupt` at once,
/// the job finishing unseen behind it.
fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    job: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    let rx = Mutex::new(rx); // waited on with the GIL released: shared with that closure
    on_worker(Box::new(move || {
        let _ = tx.send(job());
    }))
    .map_err(|e| CuparquetError::new_err(format!("cannot start the read: {e}")))?;
    loop {
        let waited = py.detach(|| {
            let rx = rx.lock().unwrap_or_else(|p| p.into_inner());
            rx.recv_timeout(Duration::from_millis(50))
        });
        match waited {
            Ok(r) => return Ok(r),
            Err(RecvTimeoutError::Timeout) => py.check_signals()?,
            Err(RecvTimeoutError::Disconnected) => {
                return Err(CuparquetError::new_err("the read ended without a result"))
            }
        }
    }
}

/// Reads `source` whole into a [`PyTableOut`]: see `cuparquet.read_table`.
#[pyfunction]
#[pyo3(signature = (source, columns=None, filter=None, device="auto", batch_rows=None, memory_budget=None, **settings))]
#[allow(clippy::too_many_arguments)]
fn read_table(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    columns: Option<Vec<String>>,
    filter: Option<String>,
    device: &str,
    batch_rows: Option<usize>,
    memory_budget: Option<u64>,
    settings: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyTableOut> {
    let b = builder(
        source,
        columns,
        filter,
        device,
        batch_rows,
        memory_budget,
        settings,
    )?;
    let loaded = interruptible(py, move || b.build().and_then(|s| s.load()))?.map_err(err)?;
    Ok(PyTableOut {
        batches: loaded.batches,
        schema: loaded.schema,
        report: loaded.report,
    })
}

/// The batches of `source` one by one: see `cuparquet.scan`.
#[pyfunction]
#[pyo3(signature = (source, columns=None, filter=None, device="auto", batch_rows=None, memory_budget=None, **settings))]
#[allow(clippy::too_many_arguments)]
fn scan(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    columns: Option<Vec<String>>,
    filter: Option<String>,
    device: &str,
    batch_rows: Option<usize>,
    memory_budget: Option<u64>,
    settings: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyScanner> {
    let b = builder(
        source,
        columns,
        filter,
        device,
        batch_rows,
        memory_budget,
        settings,
    )?;
    let s = interruptible(py, move || b.build())?.map_err(err)?;
    let schema = s.schema().clone();
    Ok(PyScanner {
        stream: Arc::new(Mutex::new(Some(s.batches()))),
        stopped: Arc::new(AtomicBool::new(false)),
        schema,
        location: s.location(),
    })
}

/// What this machine offers (the CUDA driver, devices, cuFile), as a dict.
#[pyfunction]
fn cuda_devices(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let probe = py.detach(cuparquet::device::probe_cuda);
    let text = serde_json::to_string(&probe)
        .map_err(|e| CuparquetError::new_err(format!("the probe: {e}")))?;
    py.import("json")?.getattr("loads")?.call1((text,))
}

/// The checks of `cuparquet doctor` as a dict: `{"ok": no check failed, "checks": [{"status",
/// "name", "detail", "fix"}, ...]}`; `path` is where the reads would be (its file system and
/// block device are checked); `bench` measures the page-cache and pinned-copy ceilings.
#[pyfunction]
#[pyo3(signature = (path=None, bench=false))]
fn doctor(py: Python<'_>, path: Option<PathBuf>, bench: bool) -> PyResult<Bound<'_, PyAny>> {
    use cuparquet::doctor::{run, DoctorOptions, Status};
    let path = path.unwrap_or_else(|| PathBuf::from("."));
    let checks = py.detach(|| {
        run(&DoctorOptions {
            path,
            bench,
            remote: Default::default(),
        })
    });
    let ok = checks.iter().all(|c| c.status != Status::Fail);
    let text = serde_json::to_string(&serde_json::json!({ "ok": ok, "checks": checks }))
        .map_err(|e| CuparquetError::new_err(format!("the checks: {e}")))?;
    py.import("json")?.getattr("loads")?.call1((text,))
}

/// Per device this process uses, the memory cuparquet holds: `{"cuda:0": {"live_bytes",
/// "peak_live_bytes", "pinned_bytes"}}` (device bytes in batches and buffers not yet freed,
/// their high-water mark, pinned host bytes in its pool); `{}` without a GPU.
#[pyfunction]
fn device_memory(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    let Ok(devices) = cuparquet::cuda_devices() else {
        return Ok(out);
    };
    for n in devices {
        let g = cuparquet::device::gpu(n).map_err(err)?;
        let d = PyDict::new(py);
        d.set_item("live_bytes", g.live_bytes())?;
        d.set_item("peak_live_bytes", g.peak_live_bytes())?;
        d.set_item("pinned_bytes", g.pinned_bytes())?;
        out.set_item(format!("cuda:{n}"), d)?;
    }
    Ok(out)
}

#[pymodule]
fn _cuparquet(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read_table, m)?)?;
    m.add_function(wrap_pyfunction!(scan, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_devices, m)?)?;
    m.add_function(wrap_pyfunction!(doctor, m)?)?;
    m.add_function(wrap_pyfunction!(device_memory, m)?)?;
    m.add_class::<column::PyColumn>()?;
    m.add_class::<PyBatch>()?;
    m.add_class::<PyTableOut>()?;
    m.add_class::<PyScanner>()?;
    m.add("CuparquetError", m.py().get_type::<CuparquetError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
