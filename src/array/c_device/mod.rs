//! The Arrow C Device Data Interface: batches handed to other GPU code without a copy.
//!
//! The [Arrow C Device Data Interface] is how GPU libraries (cuDF, and anything built on
//! nanoarrow or Arrow C++) pass columns to each other: the C Data Interface's `ArrowArray`
//! wrapped in an [`ArrowDeviceArray`] that says which device its buffers live on and carries an
//! event to wait for before reading them, and an [`ArrowDeviceArrayStream`] of such arrays.
//! The definitions here are our own, written from the specification (arrow-rs has none of the
//! device side); the schema is the C Data Interface's `ArrowSchema`, arrow-rs's
//! [`FFI_ArrowSchema`](arrow::ffi::FFI_ArrowSchema) (re-exported as [`ArrowSchema`]).
//!
//! Exporting ([`LoadedBatch::to_c_device`], [`export_stream`], and
//! [`Scan::c_device_stream`](crate::Scan::c_device_stream)):
//! - a batch becomes one array of struct type (format `+s`), one child per field, with the
//!   batch's buffers themselves: no copy. Device batches are `ARROW_DEVICE_CUDA` with the
//!   device's ordinal; host batches `ARROW_DEVICE_CPU`.
//! - `sync_event` points to a `CUevent` recorded after the last write of the batch (a pointer
//!   to the handle, as the specification asks); null for host batches.
//! - the release callback of the exported struct, and of each child moved out of it, gives
//!   its share of the buffers back; the device memory is freed when the last share, the
//!   caller's own [`LoadedBatch`] included, is gone. It may be called from any thread, sets
//!   `release` to null, and a panic inside it never crosses into the caller.
//! - view types (`Utf8View`, `BinaryView`) of device batches are refused: the specification
//!   leaves where their buffer-size list lives open, and no consumer takes them. Host batches
//!   carry them as the C Data Interface does.
//!
//! Importing ([`import_c_device`], [`DeviceStreamReader`]) is the other side, for our own
//! round-trip tests and for callers that want a host `RecordBatch` back: the exported buffers
//! are read (copied from the device where they live there), validated as Arrow, and released.
//!
//! The module's unsafe code is the interface itself: raw pointers handed across it, and the
//! callbacks the other side calls. Each block says why it holds.
//!
//! [Arrow C Device Data Interface]: https://arrow.apache.org/docs/format/CDeviceDataInterface.html
//! [`LoadedBatch::to_c_device`]: crate::LoadedBatch::to_c_device
//! [`LoadedBatch`]: crate::LoadedBatch

mod export;
mod import;
mod stream;

use std::ffi::{c_char, c_int, c_void};

pub use arrow::ffi::FFI_ArrowSchema as ArrowSchema;
pub use export::export_schema;
pub use import::{import_c_device, DeviceStreamReader};
pub use stream::export_stream;
pub(crate) use stream::panic_text;

/// Where an array's buffers live (the specification's `ArrowDeviceType`, DLPack's values).
pub type ArrowDeviceType = i32;
/// Host memory.
pub const ARROW_DEVICE_CPU: ArrowDeviceType = 1;
/// CUDA device memory.
pub const ARROW_DEVICE_CUDA: ArrowDeviceType = 2;
/// Pinned host memory allocated by CUDA.
pub const ARROW_DEVICE_CUDA_HOST: ArrowDeviceType = 3;

/// The specification's device type and device id of memory at `location`: CUDA and the
/// ordinal, or the host and -1.
pub fn device_of(location: crate::array::Location) -> (ArrowDeviceType, i64) {
    match location {
        crate::array::Location::Host => (ARROW_DEVICE_CPU, -1),
        crate::array::Location::Cuda(n) => (ARROW_DEVICE_CUDA, n as i64),
    }
}

/// The C Data Interface's `struct ArrowArray`, field for field.
///
/// Owned values release themselves when dropped (when `release` is not null), so an exported
/// array that is never handed over frees its buffers.
#[repr(C)]
#[derive(Debug)]
pub struct ArrowArray {
    /// Logical length.
    pub length: i64,
    /// Nulls (-1: not computed).
    pub null_count: i64,
    /// Logical offset into every buffer, in elements.
    pub offset: i64,
    /// Buffers, as the type's layout lists them (the validity bitmap first where it has one).
    pub n_buffers: i64,
    /// Children.
    pub n_children: i64,
    /// `n_buffers` pointers (a null validity pointer: no nulls).
    pub buffers: *mut *const c_void,
    /// `n_children` pointers.
    pub children: *mut *mut ArrowArray,
    /// The dictionary's values, for dictionary-encoded arrays.
    pub dictionary: *mut ArrowArray,
    /// Frees what the producer keeps for this array; null once released.
    pub release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
    /// The producer's.
    pub private_data: *mut c_void,
}

impl ArrowArray {
    /// A released (empty) array, to be filled by a producer.
    pub fn empty() -> Self {
        ArrowArray {
            length: 0,
            null_count: 0,
            offset: 0,
            n_buffers: 0,
            n_children: 0,
            buffers: std::ptr::null_mut(),
            children: std::ptr::null_mut(),
            dictionary: std::ptr::null_mut(),
            release: None,
            private_data: std::ptr::null_mut(),
        }
    }

    /// Whether the array has been released (or never filled).
    pub fn is_released(&self) -> bool {
        self.release.is_none()
    }
}

impl Drop for ArrowArray {
    fn drop(&mut self) {
        if let Some(release) = self.release {
            // SAFETY: a non-null release callback belongs to a live array that this value owns
            // (the specification's contract for whoever holds the struct); it is called once,
            // and it sets `release` to null.
            unsafe { release(self) };
        }
    }
}

// SAFETY: the specification lets an array be released from any thread; the raw pointers are
// owned by the producer's private data, which ours keeps in `Send` types.
unsafe impl Send for ArrowArray {}

/// The C Device Data Interface's `struct ArrowDeviceArray`.
#[repr(C)]
#[derive(Debug)]
pub struct ArrowDeviceArray {
    /// The array, its buffers on `device_type` / `device_id`.
    pub array: ArrowArray,
    /// The device's ordinal (-1 for the host).
    pub device_id: i64,
    /// Where the buffers live.
    pub device_type: ArrowDeviceType,
    /// For CUDA: a pointer to a `CUevent` to wait for before reading the buffers; null when
    /// nothing needs waiting for.
    pub sync_event: *mut c_void,
    /// Zero: reserved by the specification.
    pub reserved: [i64; 3],
}

impl ArrowDeviceArray {
    /// A released (empty) device array, to be filled by a producer.
    pub fn empty() -> Self {
        ArrowDeviceArray {
            array: ArrowArray::empty(),
            device_id: -1,
            device_type: ARROW_DEVICE_CPU,
            sync_event: std::ptr::null_mut(),
            reserved: [0; 3],
        }
    }
}

// SAFETY: as for ArrowArray; the sync event is owned by the array's private data.
unsafe impl Send for ArrowDeviceArray {}

/// `get_schema` of a stream.
pub type GetSchemaFn = unsafe extern "C" fn(*mut ArrowDeviceArrayStream, *mut ArrowSchema) -> c_int;
/// `get_next` of a stream.
pub type GetNextFn =
    unsafe extern "C" fn(*mut ArrowDeviceArrayStream, *mut ArrowDeviceArray) -> c_int;

/// The C Device Data Interface's `struct ArrowDeviceArrayStream`: every array it yields lives
/// on `device_type`. Callbacks return 0 or an errno value; after an error only
/// `get_last_error` and `release` may be called.
#[repr(C)]
#[derive(Debug)]
pub struct ArrowDeviceArrayStream {
    /// Where every array of the stream lives.
    pub device_type: ArrowDeviceType,
    /// Writes the stream's schema (a struct type) into its second argument.
    pub get_schema: Option<GetSchemaFn>,
    /// Writes the next array into its second argument; a released array at the end.
    pub get_next: Option<GetNextFn>,
    /// The message of the last error, valid until the next call on the stream.
    pub get_last_error: Option<unsafe extern "C" fn(*mut ArrowDeviceArrayStream) -> *const c_char>,
    /// Frees the stream; null once released.
    pub release: Option<unsafe extern "C" fn(*mut ArrowDeviceArrayStream)>,
    /// The producer's.
    pub private_data: *mut c_void,
}

impl ArrowDeviceArrayStream {
    /// A released (empty) stream, to be filled by a producer.
    pub fn empty() -> Self {
        ArrowDeviceArrayStream {
            device_type: ARROW_DEVICE_CPU,
            get_schema: None,
            get_next: None,
            get_last_error: None,
            release: None,
            private_data: std::ptr::null_mut(),
        }
    }
}

impl Drop for ArrowDeviceArrayStream {
    fn drop(&mut self) {
        if let Some(release) = self.release {
            // SAFETY: as for ArrowArray: an owned, live stream, released once.
            unsafe { release(self) };
        }
    }
}

// SAFETY: a stream may be moved to another thread and used there (one thread at a time);
// ours keeps its state in `Send` types.
unsafe impl Send for ArrowDeviceArrayStream {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_the_specifications() {
        use std::mem::{align_of, offset_of, size_of};
        // struct ArrowArray: 5 int64, 3 pointers, a function pointer, a pointer
        assert_eq!(size_of::<ArrowArray>(), 80);
        assert_eq!(offset_of!(ArrowArray, buffers), 40);
        assert_eq!(offset_of!(ArrowArray, release), 64);
        assert_eq!(
            size_of::<ArrowArray>(),
            size_of::<arrow::ffi::FFI_ArrowArray>()
        );
        assert_eq!(
            align_of::<ArrowArray>(),
            align_of::<arrow::ffi::FFI_ArrowArray>()
        );
        // struct ArrowDeviceArray: the array, int64 device_id, int32 device_type (padded),
        // void* sync_event, int64 reserved[3]
        assert_eq!(offset_of!(ArrowDeviceArray, device_id), 80);
        assert_eq!(offset_of!(ArrowDeviceArray, device_type), 88);
        assert_eq!(offset_of!(ArrowDeviceArray, sync_event), 96);
        assert_eq!(offset_of!(ArrowDeviceArray, reserved), 104);
        assert_eq!(size_of::<ArrowDeviceArray>(), 128);
        // struct ArrowDeviceArrayStream: int32 device_type (padded), 4 function pointers, a
        // pointer
        assert_eq!(offset_of!(ArrowDeviceArrayStream, get_schema), 8);
        assert_eq!(offset_of!(ArrowDeviceArrayStream, private_data), 40);
        assert_eq!(size_of::<ArrowDeviceArrayStream>(), 48);
    }
}
