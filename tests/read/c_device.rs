//! The Arrow C Device Data Interface and the C API: batches exported without a copy, read back
//! by arrow-rs's own C Data Interface importer (host batches) and by ours (host and device),
//! equal to what was loaded and to arrow-rs's read of the file; release callbacks that give
//! every share back exactly once, from any thread; streams over files and directories; the C
//! API's errors. On the host and, where there is one, on the GPU.

use crate::common;

use std::ffi::{CStr, CString};
use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, StructArray};
use arrow::record_batch::RecordBatch;
use common::*;
use cuparquet::array::c_device::{
    import_c_device, ArrowArray, ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema,
    DeviceStreamReader, ARROW_DEVICE_CPU, ARROW_DEVICE_CUDA,
};
use cuparquet::capi;
use cuparquet::{Device, LoadedBatch, Scan};

fn devices() -> Vec<Device> {
    let mut v = vec![Device::Host];
    if gpu_available("the C Device Data Interface on cuda:0") {
        v.push(Device::Cuda(0));
    }
    v
}

/// arrow-rs's own C Data Interface import of a host export (a consumer we did not write).
fn arrow_rs_import(schema: &ArrowSchema, array: ArrowDeviceArray) -> RecordBatch {
    assert_eq!(array.device_type, ARROW_DEVICE_CPU);
    assert!(array.sync_event.is_null());
    let ArrowDeviceArray { array, .. } = array;
    // SAFETY: ArrowArray is the specification's struct ArrowArray, as FFI_ArrowArray is (the
    // crate's layout test checks sizes and offsets); ownership moves to arrow-rs, which releases
    // it when the imported data is dropped
    let ffi = unsafe { std::mem::transmute::<ArrowArray, arrow::ffi::FFI_ArrowArray>(array) };
    // SAFETY: a live array of struct type that `schema` describes
    let data = unsafe { arrow::ffi::from_ffi(ffi, schema) }.expect("arrow-rs imports it");
    let st = StructArray::from(data);
    let schema = Arc::new(arrow::datatypes::Schema::try_from(schema).unwrap());
    let opts = arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(st.len()));
    RecordBatch::try_new_with_options(schema, st.columns().to_vec(), &opts).unwrap()
}

/// Exports `b`, checks what the interface says of it, and reads it back with our importer (and
/// arrow-rs's, on the host).
fn round_trip(what: &str, b: &LoadedBatch) -> RecordBatch {
    let want = b.to_host().unwrap();
    let (schema, array) = b.to_c_device().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(array.array.length as usize, b.num_rows(), "{what}");
    assert_eq!(array.array.n_children as usize, b.num_columns(), "{what}");
    assert_eq!(array.reserved, [0; 3], "{what}");
    assert_eq!(schema.format(), "+s", "{what}");
    match b.location() {
        cuparquet::Location::Host => {
            assert_eq!((array.device_type, array.device_id), (ARROW_DEVICE_CPU, -1));
            let (schema2, array2) = b.to_c_device().unwrap();
            assert_same(what, &arrow_rs_import(&schema2, array2), &want);
        }
        cuparquet::Location::Cuda(n) => {
            assert_eq!(
                (array.device_type, array.device_id),
                (ARROW_DEVICE_CUDA, n as i64)
            );
            assert!(
                !array.sync_event.is_null(),
                "{what}: a CUDA array has its event"
            );
            // zero copy: the exported buffers are the batch's own device memory
            let dev = b.as_device().unwrap();
            for (i, col) in dev.columns.iter().enumerate() {
                // SAFETY: n_children valid child pointers
                let child = unsafe { &**array.array.children.add(i) };
                let n = child.n_buffers as usize;
                // SAFETY: each child has n_buffers buffer pointers
                let ptrs = unsafe { std::slice::from_raw_parts(child.buffers, n) };
                let data: Vec<u64> = ptrs.iter().map(|p| *p as u64).collect();
                for (buf, _) in &col.buffers {
                    assert!(
                        data.contains(&buf.device_ptr()),
                        "{what}: column {i}'s buffer {:#x} exported in place",
                        buf.device_ptr()
                    );
                }
            }
        }
    }
    // SAFETY: an array just exported, described by `schema`
    let got = unsafe { import_c_device(&schema, array) }.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_same(what, &got, &want);
    got
}

#[test]
fn every_batch_of_every_file_round_trips_equal_to_arrow_rs() {
    let (files, _dir) = all_files(false);
    let mut checked = 0;
    for device in devices() {
        for path in &files {
            let Ok(want) = oracle(path, &Projection::All, None) else {
                continue;
            };
            let Ok(reader) = Scan::builder(path)
                .with_device(device)
                .with_batch_rows(4000)
                .build()
            else {
                continue;
            };
            let Ok(loaded) = reader.load() else { continue };
            let what = format!("{} on {device}", path.display());
            let got: Vec<RecordBatch> = loaded
                .batches
                .iter()
                .enumerate()
                .map(|(i, b)| round_trip(&format!("{what}, batch {i}"), b))
                .collect();
            if want.num_rows() > 0 {
                assert_same(&what, &concat(&want.schema(), &got), &want);
            }
            checked += 1;
        }
    }
    assert!(checked > 60, "only {checked} files read");
}

#[test]
fn release_gives_every_share_back_once_from_any_thread() {
    let dir = scratch_dir();
    let path = dir.path().join("nested.parquet");
    write(
        &path,
        &[nested_batch(3000)],
        parquet::file::properties::WriterProperties::builder().build(),
    );
    for device in devices() {
        let loaded = Scan::builder(&path)
            .with_device(device)
            .build()
            .unwrap()
            .load()
            .unwrap();
        let b = loaded.batches[0].clone();
        // whether the batch's buffers are still held by anyone
        let alive: Box<dyn Fn() -> bool> = match b.as_device() {
            Some(d) => {
                let w = Arc::downgrade(d);
                Box::new(move || w.upgrade().is_some())
            }
            None => {
                let w = Arc::downgrade(b.as_host().unwrap().column(0));
                Box::new(move || w.upgrade().is_some())
            }
        };
        let (_schema, mut exported) = b.to_c_device().unwrap();
        drop(loaded);
        drop(b);
        assert!(alive(), "{device}: the export holds the batch");
        // the consumer moves a child out (the specification allows it), then releases the rest
        // SAFETY: the struct array has children; the first is a live array
        let child = unsafe { &mut **exported.array.children };
        let moved = std::mem::replace(child, ArrowArray::empty());
        let release = exported.array.release.unwrap();
        // SAFETY: releasing the array we were given, once
        unsafe { release(&mut exported.array) };
        assert!(exported.array.release.is_none() && exported.array.private_data.is_null());
        assert!(alive(), "{device}: the moved child holds its share");
        // the last share, released on another thread
        std::thread::spawn(move || drop(moved)).join().unwrap();
        assert!(!alive(), "{device}: every share given back");
    }
}

/// Exports `reader`'s stream and reads it back.
fn read_stream(stream: ArrowDeviceArrayStream) -> (i32, Vec<RecordBatch>) {
    // SAFETY: a stream our exporter just made
    let reader = unsafe { DeviceStreamReader::new(stream) }.unwrap();
    let t = reader.device_type();
    (t, reader.collect::<cuparquet::Result<Vec<_>>>().unwrap())
}

#[test]
fn streams_of_files_and_directories_equal_their_loads() {
    let dir = scratch_dir();
    let props = || {
        parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(700))
            .build()
    };
    for k in 0..3 {
        write(
            &dir.path().join(format!("part-{k}.parquet")),
            &[flat_batch(2000, k)],
            props(),
        );
    }
    let file = dir.path().join("part-1.parquet");
    for device in devices() {
        let reader = Scan::builder(&file)
            .with_device(device)
            .with_batch_rows(1500)
            .build()
            .unwrap();
        let want: Vec<RecordBatch> = reader.load().unwrap().to_host().unwrap();
        let (t, got) = read_stream(reader.c_device_stream());
        let expected_type = match device {
            Device::Host => ARROW_DEVICE_CPU,
            _ => ARROW_DEVICE_CUDA,
        };
        assert_eq!(t, expected_type);
        assert_eq!(got.len(), want.len(), "{device}: batches");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_same(&format!("{device}: batch {i}"), g, w);
        }
        let ds = Scan::builder([dir.path()])
            .with_device(device)
            .build()
            .unwrap();
        let want = ds.load().unwrap();
        let want: Vec<RecordBatch> = want.batches.iter().map(|b| b.to_host().unwrap()).collect();
        let (_, got) = read_stream(ds.c_device_stream());
        let schema = ds.schema().clone();
        assert_same(
            &format!("{device}: the directory"),
            &concat(&schema, &got),
            &concat(&schema, &want),
        );
    }
}

/// A copy of a generated file whose first page header is overwritten: the footer reads, the
/// decode fails.
fn broken_file(dir: &Path) -> std::path::PathBuf {
    let good = dir.join("good.parquet");
    write(
        &good,
        &[flat_batch(3000, 1)],
        parquet::file::properties::WriterProperties::builder().build(),
    );
    let meta = cuparquet::scan::read_footer(&good, false).unwrap();
    let start = meta.metadata.row_group(0).column(0).byte_range().0 as usize;
    let mut bytes = std::fs::read(&good).unwrap();
    bytes[start..start + 24].fill(0xff);
    let bad = dir.join("broken.parquet");
    std::fs::write(&bad, bytes).unwrap();
    bad
}

#[test]
fn a_failing_stream_says_why_through_get_last_error() {
    let dir = scratch_dir();
    let bad = broken_file(dir.path());
    for device in devices() {
        let reader = Scan::builder(&bad).with_device(device).build().unwrap();
        let mut stream = reader.c_device_stream();
        let mut array = ArrowDeviceArray::empty();
        let get_next = stream.get_next.unwrap();
        // SAFETY: a live stream and an array to fill
        let rc = unsafe { get_next(&mut stream, &mut array) };
        assert_eq!(rc, libc::EIO, "{device}");
        assert!(array.array.is_released(), "{device}: nothing handed out");
        // SAFETY: as above
        let msg = unsafe { CStr::from_ptr(stream.get_last_error.unwrap()(&mut stream)) };
        let msg = msg.to_str().unwrap();
        assert!(msg.contains("broken.parquet"), "{device}: {msg}");
    }
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn last_error() -> String {
    let p = capi::cuparquet_last_error();
    assert!(!p.is_null());
    // SAFETY: a message of this thread's last failing call
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string()
}

#[test]
fn the_c_api_reads_with_columns_filter_and_device() {
    let sample = Path::new("testdata/lineitem-sample.parquet");
    let path = c(sample.to_str().unwrap());
    let columns = c("l_orderkey, l_quantity");
    let filter = c("l_quantity < 10");
    for device in devices() {
        let dev = c(&device.to_string());
        let mut reader = std::ptr::null_mut();
        // SAFETY: NUL-terminated strings and a pointer to fill
        let rc = unsafe {
            capi::cuparquet_open(
                path.as_ptr(),
                columns.as_ptr(),
                filter.as_ptr(),
                dev.as_ptr(),
                &mut reader,
            )
        };
        assert_eq!(rc, capi::CUPARQUET_OK, "{device}");
        let (mut t, mut id) = (0, 0);
        // SAFETY: an open reader and two values to fill
        let rc = unsafe { capi::cuparquet_reader_device(reader, &mut t, &mut id) };
        assert_eq!(rc, 0);
        assert_eq!(
            (t, id),
            match device {
                Device::Cuda(n) => (ARROW_DEVICE_CUDA, n as i64),
                _ => (ARROW_DEVICE_CPU, -1),
            }
        );
        let mut schema = ArrowSchema::empty();
        // SAFETY: as above
        let rc = unsafe { capi::cuparquet_reader_schema(reader, &mut schema) };
        assert_eq!(rc, 0);
        assert_eq!(schema.n_children, 2);
        assert_eq!(schema.child(0).name(), Some("l_orderkey"));
        let mut stream = ArrowDeviceArrayStream::empty();
        // SAFETY: as above
        let rc = unsafe { capi::cuparquet_reader_stream(reader, &mut stream) };
        assert_eq!(rc, 0);
        // the stream outlives its reader
        // SAFETY: opened above, closed once
        unsafe { capi::cuparquet_close(reader) };
        let (_, got) = read_stream(stream);
        let want = Scan::builder(sample)
            .with_columns(["l_orderkey", "l_quantity"])
            .with_row_filter("l_quantity < 10")
            .with_device(Device::Host)
            .build()
            .unwrap()
            .load()
            .unwrap()
            .to_host()
            .unwrap();
        let schema = want[0].schema();
        let want = concat(&schema, &want);
        assert!(want.num_rows() > 0 && want.num_rows() < 20_000);
        assert_same(&format!("C API on {device}"), &concat(&schema, &got), &want);
    }
}

#[test]
fn the_c_api_reports_errors_by_code_and_message() {
    let mut stream = ArrowDeviceArrayStream::empty();
    let call = |path: &str, columns: Option<&str>, filter: Option<&str>, device: Option<&str>| {
        let (p, cols, f, d) = (c(path), columns.map(c), filter.map(c), device.map(c));
        let ptr = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
        let mut out = ArrowDeviceArrayStream::empty();
        // SAFETY: NUL-terminated strings or nulls, and a stream to fill
        let rc =
            unsafe { capi::cuparquet_stream(p.as_ptr(), ptr(&cols), ptr(&f), ptr(&d), &mut out) };
        (rc, if rc == 0 { String::new() } else { last_error() })
    };
    let sample = "testdata/lineitem-sample.parquet";
    let (rc, msg) = call("no/such/file.parquet", None, None, Some("host"));
    assert_eq!(rc, capi::CUPARQUET_ERROR_IO);
    assert!(msg.contains("no/such/file.parquet"), "{msg}");
    // every message names the path opened
    let (rc, msg) = call(sample, Some("nope"), None, Some("host"));
    assert_eq!(rc, capi::CUPARQUET_ERROR_INVALID_ARGUMENT);
    assert!(
        msg.contains("unknown column 'nope'") && msg.contains(sample),
        "{msg}"
    );
    let (rc, msg) = call(sample, Some(" , "), None, Some("host"));
    assert_eq!(rc, capi::CUPARQUET_ERROR_INVALID_ARGUMENT);
    assert!(
        msg.contains("names no column") && msg.contains(sample),
        "{msg}"
    );
    let (rc, msg) = call(sample, None, Some("l_quantity <"), Some("host"));
    assert_eq!(rc, capi::CUPARQUET_ERROR_INVALID_ARGUMENT);
    assert!(msg.contains("filter") && msg.contains(sample), "{msg}");
    let (rc, msg) = call(sample, None, None, Some("tpu"));
    assert_eq!(rc, capi::CUPARQUET_ERROR_INVALID_ARGUMENT);
    assert!(
        msg.contains("expected auto, host, cuda or cuda:N") && msg.contains(sample),
        "{msg}"
    );
    if cuparquet::device::probe_cuda().devices == 0 {
        // the advice speaks of the C API's device argument, not the command line's flags
        let (rc, msg) = call(sample, None, None, Some("cuda:0"));
        assert_eq!(rc, capi::CUPARQUET_ERROR_DEVICE, "{msg}");
        assert!(
            msg.contains(sample)
                && msg.contains("with device \"host\", or let device \"auto\"")
                && !msg.contains("--device")
                && !msg.contains("Device::"),
            "{msg}"
        );
    }
    let dir = scratch_dir();
    let bad = dir.path().join("not.parquet");
    std::fs::write(&bad, b"this is not parquet").unwrap();
    let (rc, msg) = call(bad.to_str().unwrap(), None, None, Some("host"));
    assert_eq!(rc, capi::CUPARQUET_ERROR_FORMAT);
    assert!(msg.contains("not.parquet"), "{msg}");
    // null pointers
    // SAFETY: nulls are what is tested
    let rc = unsafe {
        capi::cuparquet_stream(
            std::ptr::null(),
            std::ptr::null(),
            std::ptr::null(),
            std::ptr::null(),
            &mut stream,
        )
    };
    assert_eq!(rc, capi::CUPARQUET_ERROR_INVALID_ARGUMENT);
    assert!(last_error().contains("path is null"));
    let p = c(sample);
    // SAFETY: as above
    let rc = unsafe {
        capi::cuparquet_stream(
            p.as_ptr(),
            std::ptr::null(),
            std::ptr::null(),
            std::ptr::null(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, capi::CUPARQUET_ERROR_INVALID_ARGUMENT);
    // SAFETY: as above
    let rc = unsafe { capi::cuparquet_reader_stream(std::ptr::null(), &mut stream) };
    assert_eq!(rc, capi::CUPARQUET_ERROR_INVALID_ARGUMENT);
    assert!(last_error().contains("reader is null"));
    assert!(stream.release.is_none(), "nothing filled on error");
    // device memory: an error without a device, naming it
    let mut live = -1;
    // SAFETY: a value to fill
    let rc = unsafe { capi::cuparquet_device_memory(-1, &mut live, std::ptr::null_mut()) };
    assert_eq!(rc, capi::CUPARQUET_ERROR_INVALID_ARGUMENT);
    if cuparquet::device::probe_cuda().devices == 0 {
        // SAFETY: as above
        let rc = unsafe { capi::cuparquet_device_memory(0, &mut live, std::ptr::null_mut()) };
        assert_eq!(rc, capi::CUPARQUET_ERROR_DEVICE);
        assert!(last_error().contains("cuda:0"));
    }
    // SAFETY: the version is a static string
    let v = unsafe { CStr::from_ptr(capi::cuparquet_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
}
