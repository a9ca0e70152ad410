//! The C API's entry points with what a C caller can pass: null pointers, strings that are not
//! UTF-8, huge column lists, any filter and device text, and a stream used after its release.
//! Every call returns a code (an error with a message naming what was wrong), never a panic or
//! a crash; every array and stream handed out is released once.
#![no_main]
use std::ffi::{c_char, CString};

use cuparquet::array::c_device::{ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema};
use cuparquet::capi;
use libfuzzer_sys::fuzz_target;

const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../testdata/lineitem-sample.parquet"
);
const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata");

/// The bytes as a C string (cut at the first NUL), or `None` (a null pointer).
fn arg(bytes: Option<&[u8]>) -> Option<CString> {
    bytes.map(|b| {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        CString::new(&b[..end]).unwrap()
    })
}

fn ptr(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr())
}

/// The thread's last error: there is one, and it is UTF-8.
fn last_error() -> String {
    let p = capi::cuparquet_last_error();
    assert!(!p.is_null(), "an error code without a message");
    // SAFETY: a NUL-terminated string the C API keeps until the thread's next call
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_str()
        .expect("the message is UTF-8")
        .to_string()
}

/// Reads `stream` (at most `batches` arrays), releases what it hands out and the stream, then
/// calls it again: a released stream answers EINVAL and has no message.
fn drain(stream: &mut ArrowDeviceArrayStream, batches: u8) {
    // SAFETY: a stream the C API filled; each callback is called as the specification says
    unsafe {
        // (arrow-rs's schema struct releases itself when dropped)
        let mut schema = ArrowSchema::empty();
        let _ = (stream.get_schema.unwrap())(stream, &mut schema);
        for _ in 0..batches {
            let mut array = ArrowDeviceArray::empty();
            let rc = (stream.get_next.unwrap())(stream, &mut array);
            if rc != 0 {
                assert!(!(stream.get_last_error.unwrap())(stream).is_null());
                break;
            }
            match array.array.release {
                Some(r) => r(&mut array.array),
                None => break, // the end
            }
        }
        let (get_next, last) = (stream.get_next.unwrap(), stream.get_last_error.unwrap());
        (stream.release.unwrap())(stream);
        assert!(stream.release.is_none());
        let mut array = ArrowDeviceArray::empty();
        assert_eq!(get_next(stream, &mut array), libc::EINVAL);
        assert!(array.array.release.is_none());
        assert!(last(stream).is_null());
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let (how, rest) = (data[0], &data[3..]);
    let batches = data[1];
    // the rest: columns, filter and device, split at 0xFF bytes
    let mut parts = rest.split(|&b| b == 0xFF);
    let mut next = |null: bool| -> Option<Vec<u8>> {
        let p = parts.next().map(|p| p.to_vec());
        if null {
            None
        } else {
            p
        }
    };
    let columns = match data[2] % 4 {
        // a huge list of names, repeated
        0 => Some(b"l_orderkey,".repeat(20_000)),
        _ => next(how & 2 != 0),
    };
    let filter = next(how & 4 != 0);
    let device = match how >> 6 {
        0 => Some(b"host".to_vec()),
        1 => next(false),
        2 => None,
        _ => Some(b"cuda:99".to_vec()),
    };
    let path: Option<&[u8]> = match (how >> 3) & 7 {
        0 | 1 | 2 => Some(SAMPLE.as_bytes()),
        3 => Some(DIR.as_bytes()),
        4 => Some(b"/no/such/file.parquet"),
        5 => Some(b"/tmp/\xff\xfe.parquet"),
        6 => None,
        _ => Some(rest),
    };
    let (path, columns, filter, device) = (
        arg(path),
        arg(columns.as_deref()),
        arg(filter.as_deref()),
        arg(device.as_deref()),
    );
    if how & 1 == 0 {
        let mut stream = ArrowDeviceArrayStream::empty();
        // SAFETY: C strings or nulls, and a stream to fill
        let rc = unsafe {
            capi::cuparquet_stream(
                ptr(&path),
                ptr(&columns),
                ptr(&filter),
                ptr(&device),
                &mut stream,
            )
        };
        if rc == capi::CUPARQUET_OK {
            drain(&mut stream, batches);
        } else {
            let _ = last_error();
            assert!(stream.release.is_none(), "a stream filled on error");
        }
        return;
    }
    let mut reader = std::ptr::null_mut();
    // SAFETY: C strings or nulls, and a reader to fill
    let rc = unsafe {
        capi::cuparquet_open(
            ptr(&path),
            ptr(&columns),
            ptr(&filter),
            ptr(&device),
            &mut reader,
        )
    };
    if rc != capi::CUPARQUET_OK {
        let _ = last_error();
        assert!(reader.is_null());
        return;
    }
    // SAFETY: a reader from cuparquet_open, closed once at the end
    unsafe {
        let mut schema = ArrowSchema::empty();
        let _ = capi::cuparquet_reader_schema(reader, &mut schema);
        // null outs are errors
        assert_ne!(
            capi::cuparquet_reader_schema(reader, std::ptr::null_mut()),
            capi::CUPARQUET_OK
        );
        assert_ne!(
            capi::cuparquet_reader_stream(reader, std::ptr::null_mut()),
            capi::CUPARQUET_OK
        );
        let mut stream = ArrowDeviceArrayStream::empty();
        if capi::cuparquet_reader_stream(reader, &mut stream) == capi::CUPARQUET_OK {
            // closing the reader first: its streams go on
            if batches & 1 == 1 {
                capi::cuparquet_close(reader);
                reader = std::ptr::null_mut();
            }
            drain(&mut stream, batches);
        }
        capi::cuparquet_close(reader);
    }
});
