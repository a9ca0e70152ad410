//! Exporting a stream of batches as an `ArrowDeviceArrayStream`.

use std::ffi::{c_char, c_int, CString};
use std::panic::AssertUnwindSafe;
use std::ptr::null_mut;

use arrow::datatypes::SchemaRef;

use super::export::export_schema;
use super::{device_of, ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema};
use crate::array::{LoadedBatch, Location};
use crate::error::{Error, Result};

/// What a stream's `private_data` points to.
struct StreamState {
    schema: SchemaRef,
    location: Location,
    batches: Box<dyn Iterator<Item = Result<LoadedBatch>> + Send>,
    last_error: Option<CString>,
}

/// The errno value the C side gets for `e`.
fn errno_of(e: &Error) -> c_int {
    match e {
        Error::MemoryBudget { .. } => libc::ENOMEM,
        Error::Device { .. } => libc::ENODEV,
        Error::Setting { .. } | Error::Filter { .. } | Error::UnknownColumn { .. } => libc::EINVAL,
        Error::Unsupported { .. } => libc::ENOTSUP,
        _ => libc::EIO,
    }
}

/// The message of a caught panic.
pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    match (p.downcast_ref::<&str>(), p.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_string(),
        (_, Some(s)) => s.clone(),
        _ => "a panic".to_string(),
    }
}

/// Runs `f` on the stream's state: an error (or a panic, which never crosses into the caller)
/// is kept for `get_last_error` and returned as an errno value.
///
/// # Safety
/// `stream` is null or a stream made by [`export_stream`] and not released.
unsafe fn with_state(
    stream: *mut ArrowDeviceArrayStream,
    f: impl FnOnce(&mut StreamState) -> Result<()>,
) -> c_int {
    if stream.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller's contract
    let state = unsafe { (*stream).private_data.cast::<StreamState>() };
    if state.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: made by `export_stream` from a Box, not released (the caller's contract); the
    // specification lets one thread at a time call a stream
    let state = unsafe { &mut *state };
    state.last_error = None;
    let r = std::panic::catch_unwind(AssertUnwindSafe(|| f(state)));
    let (code, msg) = match r {
        Ok(Ok(())) => return 0,
        Ok(Err(e)) => (errno_of(&e), e.to_string()),
        Err(p) => (
            libc::EIO,
            format!("internal error: {}", panic_text(p.as_ref())),
        ),
    };
    state.last_error = Some(CString::new(msg.replace('\0', " ")).unwrap_or_default());
    code
}

unsafe extern "C" fn get_schema(
    stream: *mut ArrowDeviceArrayStream,
    out: *mut ArrowSchema,
) -> c_int {
    // SAFETY: the specification's contract for whoever calls a stream's callbacks
    unsafe {
        with_state(stream, |s| {
            if out.is_null() {
                return Err(Error::interface("get_schema", "a null schema to fill"));
            }
            let schema = export_schema(&s.schema)?;
            // SAFETY: `out` is the consumer's struct to fill; whatever it held is not ours
            // to release (the specification: it is released or uninitialised)
            out.write(schema);
            Ok(())
        })
    }
}

unsafe extern "C" fn get_next(
    stream: *mut ArrowDeviceArrayStream,
    out: *mut ArrowDeviceArray,
) -> c_int {
    // SAFETY: the specification's contract for whoever calls a stream's callbacks
    unsafe {
        with_state(stream, |s| {
            if out.is_null() {
                return Err(Error::interface("get_next", "a null array to fill"));
            }
            let array = match s.batches.next() {
                None => ArrowDeviceArray {
                    device_type: device_of(s.location).0,
                    ..ArrowDeviceArray::empty()
                },
                Some(Err(e)) => return Err(e),
                Some(Ok(b)) if b.location() != s.location => {
                    return Err(Error::interface(
                        "get_next",
                        format!("a batch in {} in a stream of {}", b.location(), s.location),
                    ))
                }
                Some(Ok(b)) => b.to_c_device_array()?,
            };
            // SAFETY: as in get_schema
            out.write(array);
            Ok(())
        })
    }
}

unsafe extern "C" fn get_last_error(stream: *mut ArrowDeviceArrayStream) -> *const c_char {
    if stream.is_null() {
        return std::ptr::null();
    }
    // SAFETY: a stream made by `export_stream` (the specification's contract)
    let state = unsafe { (*stream).private_data.cast::<StreamState>() };
    if state.is_null() {
        return std::ptr::null();
    }
    // SAFETY: as above; the message lives until the next call on the stream
    match unsafe { &(*state).last_error } {
        Some(m) => m.as_ptr(),
        None => std::ptr::null(),
    }
}

unsafe extern "C" fn release_stream(stream: *mut ArrowDeviceArrayStream) {
    if stream.is_null() {
        return;
    }
    // SAFETY: a stream made by `export_stream`, released once (the specification)
    let s = unsafe { &mut *stream };
    let state = std::mem::replace(&mut s.private_data, null_mut()).cast::<StreamState>();
    s.release = None;
    if !state.is_null() {
        let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: made by `Box::into_raw` in `export_stream`, swapped for null above:
            // freed exactly once (dropping the batches stops their reads)
            drop(unsafe { Box::from_raw(state) });
        }));
    }
}

/// `batches` (every one at `location`, with `schema`) as an Arrow C Device Data Interface
/// stream: `get_next` exports each batch as [`LoadedBatch::to_c_device`] does, an error is an
/// errno value (`EIO` for a bad file, `ENOMEM` for a memory budget, `ENODEV` for a device, ...)
/// with the message from `get_last_error`, and releasing the stream drops the batches not yet
/// taken (a reader's stream then stops its reads). Arrays already handed out live on until
/// their own release.
pub fn export_stream<I>(schema: SchemaRef, location: Location, batches: I) -> ArrowDeviceArrayStream
where
    I: IntoIterator<Item = Result<LoadedBatch>>,
    I::IntoIter: Send + 'static,
{
    let state = Box::new(StreamState {
        schema,
        location,
        batches: Box::new(batches.into_iter()),
        last_error: None,
    });
    ArrowDeviceArrayStream {
        device_type: device_of(location).0,
        get_schema: Some(get_schema),
        get_next: Some(get_next),
        get_last_error: Some(get_last_error),
        release: Some(release_stream),
        private_data: Box::into_raw(state).cast(),
    }
}
