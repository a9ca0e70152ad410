//! DLPack export of one-dimensional columns: `__dlpack__` capsules (`dltensor`, DLPack 0.8,
//! and `dltensor_versioned`, DLPack 1.x) over memory another object keeps alive.
//!
//! The capsule owns a heap `DLManagedTensor[Versioned]` whose `manager_ctx` holds the owner
//! (an `Arc` of the batch or buffer) and the shape and strides. A consumer renames the capsule
//! (`used_dltensor…`) and calls the tensor's deleter when done; a capsule never consumed calls
//! it from its own destructor. Either way the owner is dropped exactly once.

use std::any::Any;
use std::ffi::{c_void, CStr};

use pyo3::ffi;
use pyo3::prelude::*;

/// `kDLCPU`.
pub const DL_CPU: i32 = 1;
/// `kDLCUDA`.
pub const DL_CUDA: i32 = 2;

/// `DLDataTypeCode`: `kDLInt`, `kDLUInt`, `kDLFloat`, `kDLBool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Int = 0,
    UInt = 1,
    Float = 2,
    Bool = 6,
}

#[repr(C)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

/// What a tensor's `manager_ctx` points to: the owner of its memory, and the shape and strides
/// its `DLTensor` points into.
struct Context {
    _owner: Box<dyn Any + Send>,
    shape: [i64; 1],
    strides: [i64; 1],
}

/// One column as a tensor: where its elements are, how many, of what type, who keeps them.
pub struct Tensor {
    /// Address of element 0 (device or host).
    pub data: u64,
    /// Elements.
    pub len: usize,
    /// `DLDataTypeCode`.
    pub code: Code,
    /// Bits per element.
    pub bits: u8,
    /// `DL_CPU` or `DL_CUDA`.
    pub device_type: i32,
    /// The device's ordinal (0 on the host).
    pub device_id: i32,
    /// Keeps the memory alive until the consumer is done.
    pub owner: Box<dyn Any + Send>,
}

const LEGACY: &CStr = c"dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";

impl Tensor {
    fn parts(self) -> (DLTensor, *mut c_void) {
        let mut ctx = Box::new(Context {
            _owner: self.owner,
            shape: [self.len as i64],
            strides: [1],
        });
        let tensor = DLTensor {
            data: self.data as *mut c_void,
            device: DLDevice {
                device_type: self.device_type,
                device_id: self.device_id,
            },
            ndim: 1,
            dtype: DLDataType {
                code: self.code as u8,
                bits: self.bits,
                lanes: 1,
            },
            shape: ctx.shape.as_mut_ptr(),
            strides: ctx.strides.as_mut_ptr(),
            byte_offset: 0,
        };
        // the shape and strides live in the box, which does not move when turned into a pointer
        (tensor, Box::into_raw(ctx).cast())
    }

    /// The capsule: versioned (DLPack 1.x) when the consumer's `max_version` allows it,
    /// otherwise the legacy `dltensor`.
    pub fn into_capsule(self, py: Python<'_>, versioned: bool) -> PyResult<Py<PyAny>> {
        let (dl_tensor, manager_ctx) = self.parts();
        let (ptr, name, destructor): (*mut c_void, &CStr, ffi::PyCapsule_Destructor) = if versioned
        {
            let t = Box::new(DLManagedTensorVersioned {
                version: DLPackVersion { major: 1, minor: 0 },
                manager_ctx,
                deleter: Some(delete::<DLManagedTensorVersioned>),
                flags: 0,
                dl_tensor,
            });
            (
                Box::into_raw(t).cast(),
                VERSIONED,
                capsule::<DLManagedTensorVersioned>,
            )
        } else {
            let t = Box::new(DLManagedTensor {
                dl_tensor,
                manager_ctx,
                deleter: Some(delete::<DLManagedTensor>),
            });
            (Box::into_raw(t).cast(), LEGACY, capsule::<DLManagedTensor>)
        };
        // SAFETY: `ptr` is a live heap tensor and `name` a static C string; on success the
        // capsule owns the tensor (its destructor or its consumer frees it once), on failure
        // nothing took it and it is freed below.
        let cap = unsafe { ffi::PyCapsule_New(ptr, name.as_ptr(), Some(destructor)) };
        if cap.is_null() {
            // SAFETY: the capsule was not made, so `ptr` is still ours, made above as this type.
            unsafe {
                if versioned {
                    delete::<DLManagedTensorVersioned>(ptr.cast());
                } else {
                    delete::<DLManagedTensor>(ptr.cast());
                }
            }
            return Err(PyErr::fetch(py));
        }
        // SAFETY: `cap` is a new, non-null reference that we own.
        Ok(unsafe { Bound::from_owned_ptr(py, cap) }.unbind())
    }
}

/// The two managed tensors (DLPack 0.8 and 1.x): their capsule's name and their context.
trait Managed {
    const NAME: &'static CStr;
    fn context(&self) -> *mut c_void;
}

impl Managed for DLManagedTensor {
    const NAME: &'static CStr = LEGACY;
    fn context(&self) -> *mut c_void {
        self.manager_ctx
    }
}

impl Managed for DLManagedTensorVersioned {
    const NAME: &'static CStr = VERSIONED;
    fn context(&self) -> *mut c_void {
        self.manager_ctx
    }
}

/// The tensor's deleter: frees the tensor and drops its owner.
///
/// # Safety
/// `t` was made by [`Tensor::into_capsule`] and is deleted once.
unsafe extern "C" fn delete<T: Managed>(t: *mut T) {
    if t.is_null() {
        return;
    }
    // SAFETY: made by `Box::into_raw` in `into_capsule`, deleted once (the contract).
    let t = unsafe { Box::from_raw(t) };
    if !t.context().is_null() {
        // SAFETY: the context was made by `Box::into_raw` in `parts`, owned by this tensor only.
        drop(unsafe { Box::from_raw(t.context().cast::<Context>()) });
    }
}

/// The capsule's destructor: deletes the tensor unless a consumer took it (and renamed the
/// capsule `used_dltensor…`).
///
/// # Safety
/// Called by Python on a capsule made by [`Tensor::into_capsule`] for a `T`.
unsafe extern "C" fn capsule<T: Managed>(cap: *mut ffi::PyObject) {
    // SAFETY: `cap` is a live capsule (Python calls this as it frees it); `PyCapsule_IsValid`
    // sets no error, and a valid capsule of `T`'s name holds a `T` of ours.
    unsafe {
        if ffi::PyCapsule_IsValid(cap, T::NAME.as_ptr()) == 1 {
            let t = ffi::PyCapsule_GetPointer(cap, T::NAME.as_ptr());
            delete::<T>(t.cast());
        }
    }
}
