//! `Column`: one fixed-width column of a batch or table, in place, for array libraries —
//! `__cuda_array_interface__` (CuPy, Numba) and `__dlpack__` (PyTorch, CuPy, JAX) for device
//! columns, `__array_interface__` and `__dlpack__` (NumPy) for host columns. Its nulls are a
//! separate mask (`validity`: one byte per row, 1 where there is a value), as these libraries
//! have no nulls of their own.
//!
//! A batch's column is its batch's memory (no copy; the batch stays alive while a consumer holds
//! it). A table's column of several batches is one new buffer (the batches' columns copied
//! together on their device), as these libraries want one array.

use std::any::Any;
use std::sync::Arc;

use cuparquet::arrow::array::{Array, ArrayRef, BooleanArray};
use cuparquet::arrow::buffer::Buffer;
use cuparquet::arrow::datatypes::{DataType, Field};
use cuparquet::device::DeviceBuffer;
use cuparquet::{LoadedBatch, Location};
use pyo3::exceptions::{PyAttributeError, PyBufferError, PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::dlpack::{Code, Tensor, DL_CPU, DL_CUDA};
use crate::err;

/// A fixed-width element type as the array libraries name it.
#[derive(Debug, Clone, Copy)]
struct Elem {
    code: Code,
    bits: u8,
    /// NumPy's type string (`<i8`, `<f4`, `|b1`).
    typestr: &'static str,
}

impl Elem {
    fn bytes(self) -> usize {
        usize::from(self.bits / 8)
    }
}

const MASK: Elem = Elem {
    code: Code::Bool,
    bits: 8,
    typestr: "|b1",
};

/// The element type of a column of `dt`, or why it has none.
fn elem(name: &str, dt: &DataType) -> PyResult<Elem> {
    let e = |code, bits, typestr| {
        Ok(Elem {
            code,
            bits,
            typestr,
        })
    };
    use DataType as T;
    match dt {
        T::Int8 => e(Code::Int, 8, "|i1"),
        T::Int16 => e(Code::Int, 16, "<i2"),
        T::Int32 | T::Date32 | T::Time32(_) => e(Code::Int, 32, "<i4"),
        T::Int64 | T::Date64 | T::Time64(_) | T::Timestamp(..) | T::Duration(_) => {
            e(Code::Int, 64, "<i8")
        }
        T::UInt8 => e(Code::UInt, 8, "|u1"),
        T::UInt16 => e(Code::UInt, 16, "<u2"),
        T::UInt32 => e(Code::UInt, 32, "<u4"),
        T::UInt64 => e(Code::UInt, 64, "<u8"),
        T::Float16 => e(Code::Float, 16, "<f2"),
        T::Float32 => e(Code::Float, 32, "<f4"),
        T::Float64 => e(Code::Float, 64, "<f8"),
        T::Boolean => Err(PyTypeError::new_err(format!(
            "column {name}: booleans are bit-packed in Arrow and have no array-library layout; \
             hand the batch to pylibcudf (__arrow_c_device_array__) or call .to_pyarrow()"
        ))),
        other => Err(PyTypeError::new_err(format!(
            "column {name}: {other} is not fixed-width (integers, floats, dates, times and \
             timestamps are); hand the batch to pylibcudf (__arrow_c_device_array__) or call \
             .to_pyarrow()"
        ))),
    }
}

/// Where a column's elements are and what keeps them alive.
struct Memory {
    /// Address of element 0.
    ptr: u64,
    location: Location,
    owner: Arc<dyn Any + Send + Sync>,
}

/// What a column was made from: batches' columns, or (a validity mask) bytes.
enum Origin {
    Batches(Vec<(LoadedBatch, usize)>),
    Mask(Arc<[u8]>),
}

/// One fixed-width column in place: see the module docs.
#[pyclass(module = "cuparquet", name = "Column", frozen)]
pub struct PyColumn {
    name: String,
    data_type: DataType,
    elem: Elem,
    len: usize,
    null_count: usize,
    memory: Memory,
    origin: Origin,
}

/// The index of `key` (a name or a position) among `names`.
pub fn index_of(names: &[String], key: &Bound<'_, PyAny>) -> PyResult<usize> {
    if let Ok(i) = key.extract::<isize>() {
        let n = names.len() as isize;
        let j = if i < 0 { i + n } else { i };
        if !(0..n).contains(&j) {
            return Err(PyKeyError::new_err(format!(
                "column {i}: there are {n} columns"
            )));
        }
        return Ok(j as usize);
    }
    let name: String = key
        .extract()
        .map_err(|_| PyTypeError::new_err("column: a name (str) or a position (int)"))?;
    names.iter().position(|n| *n == name).ok_or_else(|| {
        PyKeyError::new_err(format!(
            "column {name:?}: not among the columns ({})",
            names.join(", ")
        ))
    })
}

/// The host array of column `i` of a host batch.
fn host_column(batch: &LoadedBatch, i: usize) -> Option<ArrayRef> {
    batch.as_host().map(|b| Arc::clone(b.column(i)))
}

/// Address of element 0 of a host primitive array (its offset counted).
fn host_ptr(a: &ArrayRef, elem: Elem) -> u64 {
    let d = a.to_data();
    let base = d.buffers().first().map_or(0, |b| b.as_ptr() as u64);
    base + (d.offset() * elem.bytes()) as u64
}

impl PyColumn {
    /// Column `i` of `batches` (all in one place, one schema): in place for one batch, copied
    /// together for several.
    pub fn of(batches: &[LoadedBatch], name: &str, i: usize, dt: &DataType) -> PyResult<Self> {
        let elem = elem(name, dt)?;
        let len: usize = batches.iter().map(|b| b.num_rows()).sum();
        let null_count = batches.iter().map(|b| null_count(b, i)).sum();
        let origin = Origin::Batches(batches.iter().map(|b| (b.clone(), i)).collect());
        let memory = match batches {
            [] => {
                let empty: ArrayRef = cuparquet::arrow::array::new_empty_array(dt);
                Memory {
                    ptr: host_ptr(&empty, elem),
                    location: Location::Host,
                    owner: Arc::new(empty),
                }
            }
            [one] => match (one.as_device(), host_column(one, i)) {
                (Some(d), _) => Memory {
                    ptr: d.columns[i].buffers.first().map_or(0, |b| b.0.device_ptr()),
                    location: one.location(),
                    owner: Arc::clone(d) as Arc<dyn Any + Send + Sync>,
                },
                (None, Some(a)) => Memory {
                    ptr: host_ptr(&a, elem),
                    location: Location::Host,
                    owner: Arc::new(a),
                },
                (None, None) => return Err(PyTypeError::new_err("a batch with no data")),
            },
            several => joined(several, i, elem)?,
        };
        Ok(PyColumn {
            name: name.to_string(),
            data_type: dt.clone(),
            elem,
            len,
            null_count,
            memory,
            origin,
        })
    }

    /// The validity of the column as one byte per row on the host.
    fn mask_bytes(&self) -> PyResult<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len);
        let Origin::Batches(parts) = &self.origin else {
            return Ok(vec![1; self.len]);
        };
        for (b, i) in parts {
            let n = b.num_rows();
            if let Some(d) = b.as_device() {
                match &d.columns[*i].validity {
                    Some(bits) => {
                        let bytes = bits
                            .copy_to_host(0..n.div_ceil(8).min(bits.len()))
                            .map_err(err)?;
                        out.extend(
                            (0..n)
                                .map(|r| bytes.get(r / 8).map_or(0, |byte| (byte >> (r % 8)) & 1)),
                        );
                    }
                    None => out.extend(std::iter::repeat_n(1, n)),
                }
            } else if let Some(a) = host_column(b, *i) {
                match a.logical_nulls() {
                    Some(nulls) => out.extend((0..n).map(|r| u8::from(nulls.is_valid(r)))),
                    None => out.extend(std::iter::repeat_n(1, n)),
                }
            }
        }
        Ok(out)
    }

    fn tensor(&self) -> Tensor {
        let (device_type, device_id) = dl_device_of(self.memory.location);
        Tensor {
            data: self.memory.ptr,
            len: self.len,
            code: self.elem.code,
            bits: self.elem.bits,
            device_type,
            device_id,
            owner: Box::new(Arc::clone(&self.memory.owner)),
        }
    }
}

/// `(DLPack device type, device id)` of a location.
fn dl_device_of(l: Location) -> (i32, i32) {
    match l {
        Location::Host => (DL_CPU, 0),
        Location::Cuda(n) => (DL_CUDA, n as i32),
    }
}

fn null_count(b: &LoadedBatch, i: usize) -> usize {
    match b.as_device() {
        Some(d) => d.columns[i].null_count,
        None => host_column(b, i).map_or(0, |a| a.logical_null_count()),
    }
}

/// Column `i` of several batches copied into one buffer where they live.
fn joined(batches: &[LoadedBatch], i: usize, elem: Elem) -> PyResult<Memory> {
    let location = batches[0].location();
    if batches.iter().any(|b| b.location() != location) {
        return Err(PyTypeError::new_err(
            "the table's batches live on different devices: take the column of each batch",
        ));
    }
    if location == Location::Host {
        let arrays: Vec<ArrayRef> = batches.iter().filter_map(|b| host_column(b, i)).collect();
        let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
        let one = cuparquet::arrow::compute::concat(&refs)
            .map_err(|e| PyTypeError::new_err(format!("joining the batches' columns: {e}")))?;
        return Ok(Memory {
            ptr: host_ptr(&one, elem),
            location,
            owner: Arc::new(one),
        });
    }
    let total: usize = batches.iter().map(|b| b.num_rows() * elem.bytes()).sum();
    let mut out: Option<DeviceBuffer> = None;
    let mut at = 0;
    for b in batches {
        let Some(d) = b.as_device() else { continue };
        let n = b.num_rows() * elem.bytes();
        let Some((src, _)) = d.columns[i].buffers.first() else {
            continue;
        };
        if out.is_none() {
            out = Some(src.gpu().alloc(total.max(1)).map_err(err)?);
        }
        if let Some(o) = out.as_mut() {
            o.copy_from_device(at, src, 0..n).map_err(err)?;
        }
        at += n;
    }
    let out = out.ok_or_else(|| PyTypeError::new_err("the device batches hold no values"))?;
    Ok(Memory {
        ptr: out.device_ptr(),
        location,
        owner: Arc::new(out),
    })
}

#[pymethods]
impl PyColumn {
    /// The column's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Its element type as NumPy writes it (`"<i8"`, `"<f4"`, `"|b1"`); dates, times and
    /// timestamps are their integer storage.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.elem.typestr
    }

    /// Its Arrow type, as text.
    #[getter]
    fn arrow_type(&self) -> String {
        self.data_type.to_string()
    }

    /// Where it lives: `"host"` or `"cuda:N"`.
    #[getter]
    fn device(&self) -> String {
        self.memory.location.to_string()
    }

    /// Nulls in it (their elements hold no particular value: see `validity`).
    #[getter]
    fn null_count(&self) -> usize {
        self.null_count
    }

    /// The address of element 0 (device or host).
    #[getter]
    fn data_ptr(&self) -> u64 {
        self.memory.ptr
    }

    /// `None` without nulls; otherwise a `Column` of `bool` (one byte per row, `True` where
    /// there is a value) in the same place as the column.
    #[getter]
    fn validity(&self) -> PyResult<Option<PyColumn>> {
        if self.null_count == 0 {
            return Ok(None);
        }
        let bytes = self.mask_bytes()?;
        let memory = match self.memory.location {
            Location::Host => {
                let buf = Buffer::from_vec(bytes.clone());
                Memory {
                    ptr: buf.as_ptr() as u64,
                    location: Location::Host,
                    owner: Arc::new(buf),
                }
            }
            Location::Cuda(n) => {
                let gpu = cuparquet::device::gpu(n).map_err(err)?;
                let mut b = gpu.alloc(bytes.len().max(1)).map_err(err)?;
                b.copy_from_host(0, &bytes).map_err(err)?;
                Memory {
                    ptr: b.device_ptr(),
                    location: self.memory.location,
                    owner: Arc::new(b),
                }
            }
        };
        Ok(Some(PyColumn {
            name: format!("{}.validity", self.name),
            data_type: DataType::Boolean,
            elem: MASK,
            len: self.len,
            null_count: 0,
            memory,
            origin: Origin::Mask(bytes.into()),
        }))
    }

    /// A host copy as a `pyarrow.Array` (nulls as nulls).
    fn to_pyarrow<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let array: ArrayRef = match &self.origin {
            Origin::Mask(bytes) => Arc::new(BooleanArray::from(
                bytes.iter().map(|b| *b != 0).collect::<Vec<bool>>(),
            )),
            Origin::Batches(parts) if parts.is_empty() => {
                cuparquet::arrow::array::new_empty_array(&self.data_type)
            }
            Origin::Batches(parts) => {
                let mut arrays = Vec::with_capacity(parts.len());
                for (b, i) in parts {
                    arrays.push(match b.as_device() {
                        Some(d) => {
                            let d = Arc::clone(d);
                            let i = *i;
                            py.detach(move || d.columns[i].to_host()).map_err(err)?
                        }
                        None => host_column(b, *i)
                            .ok_or_else(|| PyTypeError::new_err("a batch with no data"))?,
                    });
                }
                let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
                cuparquet::arrow::compute::concat(&refs).map_err(|e| {
                    PyTypeError::new_err(format!("joining the batches' columns: {e}"))
                })?
            }
        };
        let field = Field::new(&self.name, array.data_type().clone(), true);
        let out = pyo3_arrow::PyArray::new(array, Arc::new(field));
        let obj = out.to_pyarrow(py)?.unbind();
        Ok(obj.into_bound(py))
    }

    /// The CUDA Array Interface (version 3) of a device column: CuPy (`cupy.asarray`) and Numba
    /// read it in place. Absent on a host column.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        if self.memory.location == Location::Host {
            return Err(PyAttributeError::new_err(
                "a host column has no __cuda_array_interface__: use __array_interface__ (NumPy) \
                 or read with device=\"cuda\"",
            ));
        }
        let d = PyDict::new(py);
        d.set_item("shape", (self.len,))?;
        d.set_item("typestr", self.elem.typestr)?;
        d.set_item("data", (self.memory.ptr, false))?;
        d.set_item("version", 3)?;
        d.set_item("strides", py.None())?;
        // handed over only once the decode that wrote it was waited for: no stream to order on
        d.set_item("stream", py.None())?;
        Ok(d)
    }

    /// The NumPy array interface (version 3) of a host column. Absent on a device column.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        if self.memory.location != Location::Host {
            return Err(PyAttributeError::new_err(format!(
                "a column on {} has no __array_interface__: use __cuda_array_interface__ or \
                 __dlpack__ (CuPy, PyTorch), or .to_pyarrow() for a host copy",
                self.memory.location
            )));
        }
        let d = PyDict::new(py);
        d.set_item("shape", (self.len,))?;
        d.set_item("typestr", self.elem.typestr)?;
        d.set_item("data", (self.memory.ptr, false))?;
        d.set_item("version", 3)?;
        Ok(d)
    }

    /// A DLPack capsule over the column in place (`torch.from_dlpack`, `cupy.from_dlpack`,
    /// `numpy.from_dlpack`): DLPack 1.x when `max_version` allows it, else 0.8. The memory
    /// stays alive until the consumer releases it. `copy=True` is refused (nothing is copied).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        // the column was complete when handed over: whatever stream the consumer names
        // needs no wait
        let _ = stream;
        if copy == Some(true) {
            return Err(PyBufferError::new_err(
                "cuparquet columns are shared in place, not copied: call without copy=True",
            ));
        }
        let ours = dl_device_of(self.memory.location);
        if let Some(want) = dl_device.filter(|w| *w != ours) {
            return Err(PyBufferError::new_err(format!(
                "the column lives on DLPack device {ours:?}, not {want:?}"
            )));
        }
        let versioned = max_version.is_some_and(|(major, _)| major >= 1);
        self.tensor().into_capsule(py, versioned)
    }

    /// `(device type, device id)` as DLPack numbers them (1: host, 2: CUDA).
    fn __dlpack_device__(&self) -> (i32, i32) {
        dl_device_of(self.memory.location)
    }

    fn __len__(&self) -> usize {
        self.len
    }

    fn __repr__(&self) -> String {
        format!(
            "cuparquet.Column({:?}, {} rows of {}, {} nulls, on {})",
            self.name, self.len, self.data_type, self.null_count, self.memory.location
        )
    }
}
