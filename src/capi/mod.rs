//! The C API: Parquet files read as an Arrow C Device Data Interface stream, from C, C++ or
//! Python (ctypes, cffi).
//!
//! The header is `include/cuparquet.h`; the shared library is built with the `capi` feature,
//! which exports these functions under their C names:
//!
//! ```text
//! cargo rustc --release --lib --features capi --crate-type cdylib   # target/release/libcuparquet.so
//! cc app.c -Iinclude -Ltarget/release -lcuparquet
//! ```
//!
//! Every function returns `CUPARQUET_OK` (0) or an error code, and the failing call's message
//! is then [`cuparquet_last_error`] (per thread). No panic crosses into the caller: one is an
//! error, `CUPARQUET_ERROR_INTERNAL`. Strings are UTF-8 and NUL-terminated; a null `columns`
//! reads every column, a null `filter` keeps every row, a null `device` is `auto`.
//!
//! Without the feature the same functions are Rust functions here (the crate's tests call
//! them), unexported.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::AssertUnwindSafe;

use crate::array::c_device::{
    device_of, export_schema, panic_text, ArrowDeviceArrayStream, ArrowDeviceType, ArrowSchema,
};
use crate::device::Device;
use crate::error::Error;
use crate::scan::Scan;

/// Success.
pub const CUPARQUET_OK: c_int = 0;
/// A null pointer, a string that is not UTF-8, an unknown column or device, a bad filter or
/// setting.
pub const CUPARQUET_ERROR_INVALID_ARGUMENT: c_int = 1;
/// The file could not be opened or read.
pub const CUPARQUET_ERROR_IO: c_int = 2;
/// The file is not valid Parquet, or files read together differ.
pub const CUPARQUET_ERROR_FORMAT: c_int = 3;
/// The file uses something cuparquet does not read (encryption, ...).
pub const CUPARQUET_ERROR_UNSUPPORTED: c_int = 4;
/// The device cannot be used (no GPU, a CUDA or cuFile call failed).
pub const CUPARQUET_ERROR_DEVICE: c_int = 5;
/// A row group does not fit the memory budget.
pub const CUPARQUET_ERROR_MEMORY: c_int = 6;
/// A bug in cuparquet (a panic, caught at the boundary).
pub const CUPARQUET_ERROR_INTERNAL: c_int = 7;

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// A reader opened by [`cuparquet_open`]: one file, or every `*.parquet` file of a directory
/// read as one stream. Opaque to C.
#[derive(Debug)]
pub struct CuparquetReader {
    scan: Scan,
}

/// The C API's code for `e`.
fn code_of(e: &Error) -> c_int {
    match e {
        Error::Io { .. } | Error::ShortRead { .. } | Error::Output { .. } => CUPARQUET_ERROR_IO,
        Error::Footer { .. }
        | Error::BadColumnChunk { .. }
        | Error::Decode { .. }
        | Error::SchemaMismatch { .. } => CUPARQUET_ERROR_FORMAT,
        Error::UnknownColumn { .. }
        | Error::RowGroupSelection { .. }
        | Error::Filter { .. }
        | Error::Setting { .. }
        | Error::NoFiles { .. }
        | Error::Interface { .. } => CUPARQUET_ERROR_INVALID_ARGUMENT,
        Error::MemoryBudget { .. } => CUPARQUET_ERROR_MEMORY,
        Error::Device { .. } | Error::CuFile { .. } => CUPARQUET_ERROR_DEVICE,
        Error::Unsupported { .. } => CUPARQUET_ERROR_UNSUPPORTED,
    }
}

type Failure = (c_int, String);

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        (code_of(&e), e.to_string())
    }
}

fn invalid(msg: impl Into<String>) -> Failure {
    (CUPARQUET_ERROR_INVALID_ARGUMENT, msg.into())
}

/// The advice of the crate's messages in the C API's terms: its own arguments (the `device`
/// string), not the command line's flags or the Rust API's settings.
const IN_C_TERMS: &[(&str, &str)] = &[
    (
        "with Device::Host (`--device host`), or let Device::Auto (`--device auto`) choose",
        "with device \"host\", or let device \"auto\" (or NULL) choose",
    ),
    (
        "(CUPARQUET_MAX_PAGE_SIZE or with_max_page_size raise the cap)",
        "(the environment variable CUPARQUET_MAX_PAGE_SIZE raises the cap)",
    ),
];

/// `msg` in the C API's terms ([`IN_C_TERMS`]).
fn in_c_terms(mut msg: String) -> String {
    for (rust, c) in IN_C_TERMS {
        if msg.contains(rust) {
            msg = msg.replace(rust, c);
        }
    }
    msg
}

/// Runs `f`: its failure, or a panic, becomes the thread's last error and its code.
fn guard(f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    let (code, msg) = match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => return CUPARQUET_OK,
        Ok(Err(failure)) => failure,
        Err(p) => (
            CUPARQUET_ERROR_INTERNAL,
            format!("internal error: {}", panic_text(p.as_ref())),
        ),
    };
    let msg = CString::new(in_c_terms(msg).replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = Some(msg));
    code
}

/// The UTF-8 string at `p`, or `None` for a null pointer.
///
/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn text(p: *const c_char, what: &str) -> Result<Option<String>, Failure> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map(|s| Some(s.to_string()))
        .map_err(|_| invalid(format!("{what} is not UTF-8")))
}

/// Opens `path` with the arguments of [`cuparquet_open`].
///
/// # Safety
/// As for [`cuparquet_open`].
unsafe fn open(
    path: *const c_char,
    columns: *const c_char,
    filter: *const c_char,
    device: *const c_char,
) -> Result<Scan, Failure> {
    // SAFETY: the caller's contract, for each string
    let (path, columns, filter, device) = unsafe {
        (
            text(path, "path")?.ok_or_else(|| invalid("path is null"))?,
            text(columns, "columns")?,
            text(filter, "filter")?,
            text(device, "device")?,
        )
    };
    // every failure names the path it was opening
    let named = |(code, msg): Failure| -> Failure {
        if msg.contains(&path) {
            (code, msg)
        } else {
            (code, format!("{path}: {msg}"))
        }
    };
    let device: Device = device
        .as_deref()
        .unwrap_or("auto")
        .parse()
        .map_err(|e: Error| named(invalid(e.to_string())))?;
    let mut b = Scan::builder(&path).with_device(device);
    if let Some(c) = columns {
        let names = crate::plan::split_column_list(&c);
        if names.is_empty() {
            return Err(named(invalid(format!(
                "columns {c:?} names no column (pass NULL to read every column)"
            ))));
        }
        b = b.with_columns(names);
    }
    if let Some(f) = filter {
        b = b.with_row_filter(f);
    }
    b.build().map_err(|e| named(e.into()))
}

/// Opens `path` (a Parquet file; a directory whose `*.parquet` files, at any depth, are read
/// as one, in path order, hive `key=value` directories giving columns; or a glob) to read `columns` (comma-separated names or dotted paths; NULL: all) of the
/// rows where `filter` is true (SQL's WHERE in cuparquet's predicate language, e.g.
/// `"x > 5 AND s = 'a'"`; NULL: every row) onto `device` (`"auto"`, `"host"`, `"cuda:N"`;
/// NULL: auto). The footers are read and the load planned here; nothing is read yet. On
/// success `*out` is the reader, to be closed with [`cuparquet_close`].
///
/// # Safety
/// Each string is null or NUL-terminated; `out` is null or points to writable memory.
#[cfg_attr(feature = "capi", unsafe(no_mangle))]
pub unsafe extern "C" fn cuparquet_open(
    path: *const c_char,
    columns: *const c_char,
    filter: *const c_char,
    device: *const c_char,
    out: *mut *mut CuparquetReader,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return Err(invalid("out is null"));
        }
        // SAFETY: the caller's contract
        let scan = unsafe { open(path, columns, filter, device) }?;
        // SAFETY: `out` is writable (the caller's contract)
        unsafe { out.write(Box::into_raw(Box::new(CuparquetReader { scan }))) };
        Ok(())
    })
}

/// The reader, or an error for a null pointer.
///
/// # Safety
/// `reader` is null or came from [`cuparquet_open`] and is not closed.
unsafe fn reader_ref<'a>(reader: *const CuparquetReader) -> Result<&'a CuparquetReader, Failure> {
    // SAFETY: the caller's contract
    unsafe { reader.as_ref() }.ok_or_else(|| invalid("reader is null"))
}

/// Writes the schema of the reader's batches (a struct type, one child per column) into
/// `out`, which the caller releases.
///
/// # Safety
/// `reader` came from [`cuparquet_open`] and is not closed; `out` points to writable memory
/// for an `ArrowSchema` (whatever it holds is overwritten, not released).
#[cfg_attr(feature = "capi", unsafe(no_mangle))]
pub unsafe extern "C" fn cuparquet_reader_schema(
    reader: *const CuparquetReader,
    out: *mut ArrowSchema,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract
        let r = unsafe { reader_ref(reader) }?;
        if out.is_null() {
            return Err(invalid("out is null"));
        }
        let schema = export_schema(r.scan.schema())?;
        // SAFETY: `out` is writable (the caller's contract)
        unsafe { out.write(schema) };
        Ok(())
    })
}

/// Where the reader's batches will live: `ARROW_DEVICE_CUDA` and the device's ordinal, or
/// `ARROW_DEVICE_CPU` and -1 (what `auto` chose). Either pointer may be null.
///
/// # Safety
/// `reader` came from [`cuparquet_open`] and is not closed; the pointers are null or writable.
#[cfg_attr(feature = "capi", unsafe(no_mangle))]
pub unsafe extern "C" fn cuparquet_reader_device(
    reader: *const CuparquetReader,
    device_type: *mut ArrowDeviceType,
    device_id: *mut i64,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract
        let r = unsafe { reader_ref(reader) }?;
        let (t, id) = device_of(r.scan.location());
        // SAFETY: null or writable (the caller's contract)
        unsafe {
            if let Some(p) = device_type.as_mut() {
                *p = t;
            }
            if let Some(p) = device_id.as_mut() {
                *p = id;
            }
        }
        Ok(())
    })
}

/// Starts reading: `out` becomes an `ArrowDeviceArrayStream` of the reader's batches (about
/// 2^20 rows each, on the reader's device, without a copy), which the caller releases. A
/// reader may be streamed more than once, and closed while a stream of it is still in use.
///
/// # Safety
/// `reader` came from [`cuparquet_open`] and is not closed; `out` points to writable memory
/// for an `ArrowDeviceArrayStream` (overwritten, not released).
#[cfg_attr(feature = "capi", unsafe(no_mangle))]
pub unsafe extern "C" fn cuparquet_reader_stream(
    reader: *const CuparquetReader,
    out: *mut ArrowDeviceArrayStream,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract
        let r = unsafe { reader_ref(reader) }?;
        if out.is_null() {
            return Err(invalid("out is null"));
        }
        // SAFETY: `out` is writable (the caller's contract)
        unsafe { out.write(r.scan.c_device_stream()) };
        Ok(())
    })
}

/// Closes a reader (null: nothing). Streams already started go on.
///
/// # Safety
/// `reader` is null or came from [`cuparquet_open`] and is closed only once.
#[cfg_attr(feature = "capi", unsafe(no_mangle))]
pub unsafe extern "C" fn cuparquet_close(reader: *mut CuparquetReader) {
    if !reader.is_null() {
        let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: made by `Box::into_raw` in `cuparquet_open`, closed once
            drop(unsafe { Box::from_raw(reader) });
        }));
    }
}

/// [`cuparquet_open`] and [`cuparquet_reader_stream`] in one call: `out` becomes the stream
/// of `path`'s batches.
///
/// # Safety
/// As for [`cuparquet_open`]; `out` points to writable memory for an
/// `ArrowDeviceArrayStream` (overwritten, not released).
#[cfg_attr(feature = "capi", unsafe(no_mangle))]
pub unsafe extern "C" fn cuparquet_stream(
    path: *const c_char,
    columns: *const c_char,
    filter: *const c_char,
    device: *const c_char,
    out: *mut ArrowDeviceArrayStream,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return Err(invalid("out is null"));
        }
        // SAFETY: the caller's contract
        let scan = unsafe { open(path, columns, filter, device) }?;
        // SAFETY: `out` is writable (the caller's contract)
        unsafe { out.write(scan.c_device_stream()) };
        Ok(())
    })
}

/// The bytes of device memory cuparquet's allocations on CUDA device `device` hold now
/// (`*live`: loads in flight and batches not yet released, by cuparquet or by the consumers
/// they were exported to) and the most they held at once since the device was opened
/// (`*peak`). Either pointer may be null. After every stream and every exported array is
/// released, `*live` is 0: a leak check for consumers.
///
/// # Safety
/// The pointers are null or writable.
#[cfg_attr(feature = "capi", unsafe(no_mangle))]
pub unsafe extern "C" fn cuparquet_device_memory(
    device: c_int,
    live: *mut i64,
    peak: *mut i64,
) -> c_int {
    guard(|| {
        let n = usize::try_from(device).map_err(|_| invalid(format!("device {device}")))?;
        let g = crate::device::gpu(n)?;
        // SAFETY: null or writable (the caller's contract)
        unsafe {
            if let Some(p) = live.as_mut() {
                *p = g.live_bytes() as i64;
            }
            if let Some(p) = peak.as_mut() {
                *p = g.peak_live_bytes() as i64;
            }
        }
        Ok(())
    })
}

/// The message of the last call that failed on this thread (valid until the next failing
/// call on it), or null when none has.
#[cfg_attr(feature = "capi", unsafe(no_mangle))]
pub extern "C" fn cuparquet_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ref().map_or(std::ptr::null(), |m| m.as_ptr()))
}

/// cuparquet's version, e.g. `"0.1.0"`.
#[cfg_attr(feature = "capi", unsafe(no_mangle))]
pub extern "C" fn cuparquet_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
