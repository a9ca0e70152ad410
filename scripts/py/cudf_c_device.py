"""cuDF imports cuparquet's device batches through the Arrow C Device Data Interface.

A consumer nobody here wrote: pylibcudf's `Table.from_arrow(obj)`, where
`obj.__arrow_c_device_array__()` returns the schema and device-array capsules that cuparquet's C
API (`libcuparquet.so`, through ctypes) exported. Checks, for every batch of a file pyarrow
writes (flat, string, decimal, timestamp, date, boolean, nested and nullable columns):
- the batch is on CUDA with a sync event;
- cuDF's columns point at cuparquet's own device buffers (no copy) for every non-boolean
  column (libcudf converts booleans, which Arrow packs as bits);
- `to_arrow()` of cuDF's table equals pyarrow's read of the same rows;
- once cuDF drops its tables, cuparquet holds no device memory (`cuparquet_device_memory`):
  cuDF released every array it took, and the release freed it.

Run on the GPU machine (pylibcudf on PYTHONPATH: ../shared/device/README.md):
    python3 scripts/py/cudf_c_device.py LIBCUPARQUET.so DIR
"""

import ctypes
import os
import sys
from ctypes import (CFUNCTYPE, POINTER, Structure, byref, c_char_p, c_int, c_int32,
                    c_int64, c_void_p, sizeof)


class ArrowSchema(Structure):
    pass


ArrowSchema._fields_ = [
    ("format", c_char_p), ("name", c_char_p), ("metadata", c_char_p), ("flags", c_int64),
    ("n_children", c_int64), ("children", POINTER(POINTER(ArrowSchema))),
    ("dictionary", POINTER(ArrowSchema)), ("release", CFUNCTYPE(None, POINTER(ArrowSchema))),
    ("private_data", c_void_p)]


class ArrowArray(Structure):
    pass


ArrowArray._fields_ = [
    ("length", c_int64), ("null_count", c_int64), ("offset", c_int64), ("n_buffers", c_int64),
    ("n_children", c_int64), ("buffers", POINTER(c_void_p)),
    ("children", POINTER(POINTER(ArrowArray))), ("dictionary", POINTER(ArrowArray)),
    ("release", CFUNCTYPE(None, POINTER(ArrowArray))), ("private_data", c_void_p)]


class ArrowDeviceArray(Structure):
    _fields_ = [("array", ArrowArray), ("device_id", c_int64), ("device_type", c_int32),
                ("sync_event", c_void_p), ("reserved", c_int64 * 3)]


class ArrowDeviceArrayStream(Structure):
    pass


ArrowDeviceArrayStream._fields_ = [
    ("device_type", c_int32),
    ("get_schema", CFUNCTYPE(c_int, POINTER(ArrowDeviceArrayStream), POINTER(ArrowSchema))),
    ("get_next", CFUNCTYPE(c_int, POINTER(ArrowDeviceArrayStream), POINTER(ArrowDeviceArray))),
    ("get_last_error", CFUNCTYPE(c_char_p, POINTER(ArrowDeviceArrayStream))),
    ("release", CFUNCTYPE(None, POINTER(ArrowDeviceArrayStream))), ("private_data", c_void_p)]

LIBC = ctypes.CDLL(None)
LIBC.malloc.restype = c_void_p
LIBC.malloc.argtypes = [ctypes.c_size_t]
LIBC.free.argtypes = [c_void_p]
NEW = ctypes.pythonapi.PyCapsule_New
NEW.restype = ctypes.py_object
NEW.argtypes = [c_void_p, c_char_p, c_void_p]
GET = ctypes.pythonapi.PyCapsule_GetPointer
GET.restype = c_void_p
GET.argtypes = [ctypes.py_object, c_char_p]
# the capsule destructors take the capsule as a raw pointer: as a py_object, ctypes would take a
# reference to a capsule being destroyed and destroy it a second time when letting go
GET_RAW = ctypes.PYFUNCTYPE(c_void_p, c_void_p, c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
SCHEMA_NAME, ARRAY_NAME = b"arrow_schema", b"arrow_device_array"
DESTRUCTOR = CFUNCTYPE(None, c_void_p)
RELEASED = {"schema": 0, "array": 0}


@DESTRUCTOR
def _free_schema(capsule):
    p = GET_RAW(capsule, SCHEMA_NAME)
    s = ArrowSchema.from_address(p)
    if s.release:
        s.release(byref(s))
        RELEASED["schema"] += 1
    LIBC.free(p)


@DESTRUCTOR
def _free_array(capsule):
    p = GET_RAW(capsule, ARRAY_NAME)
    a = ArrowDeviceArray.from_address(p)
    if a.array.release:
        a.array.release(byref(a.array))
        RELEASED["array"] += 1
    LIBC.free(p)


def capsule(struct, name, destructor):
    """A capsule owning a heap copy of `struct` (the struct itself is moved: not released)."""
    p = LIBC.malloc(sizeof(struct))
    ctypes.memmove(p, ctypes.addressof(struct), sizeof(struct))
    return NEW(p, name, ctypes.cast(destructor, c_void_p))


class Exported:
    """What pylibcudf asks for: __arrow_c_device_array__ -> (schema, device array) capsules."""

    def __init__(self, schema, array):
        self.capsules = (capsule(schema, SCHEMA_NAME, _free_schema),
                         capsule(array, ARRAY_NAME, _free_array))

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        return self.capsules

    def moved(self):
        """Whether the consumer moved both structs out of the capsules, as the PyCapsule
        protocol asks (their `release` set to null: the consumer releases them)."""
        return all(c_void_p.from_address(GET(cap, name) + off).value is None
                   for cap, name, off in ((self.capsules[0], SCHEMA_NAME,
                                           ArrowSchema.release.offset),
                                          (self.capsules[1], ARRAY_NAME,
                                           ArrowArray.release.offset)))


def write(path):
    import datetime
    import decimal

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    n = 1_500_000
    rng = np.random.default_rng(7)
    mask = rng.random(n) < 0.1
    i = np.arange(n)
    t0 = datetime.datetime(2020, 1, 1)
    table = pa.table({
        "i64": pa.array(i * 3, pa.int64()),
        "i32": pa.array(rng.integers(-1000, 1000, n, dtype=np.int32), mask=mask),
        "f64": pa.array(rng.random(n), mask=np.roll(mask, 1)),
        "s": pa.array([f"str{k % 5000}" for k in range(n)], mask=np.roll(mask, 2)),
        "dec": pa.array([decimal.Decimal(k % 100000) / 100 for k in range(n)],
                        pa.decimal128(12, 2), mask=np.roll(mask, 3)),
        "ts": pa.array(np.datetime64(t0) + i.astype("timedelta64[s]"), pa.timestamp("us"),
                       mask=np.roll(mask, 4)),
        "day": pa.array((i % 20000).astype(np.int32), pa.date32()),
        "flag": pa.array(i % 3 == 0, mask=np.roll(mask, 5)),
        "l": pa.array([None if k % 7 == 0 else list(range(k % 4)) for k in range(n)],
                      pa.list_(pa.int64())),
        "st": pa.StructArray.from_arrays(
            [pa.array(rng.random(n)), pa.array(i, pa.int64())], names=["a", "b"],
            mask=pa.array(np.roll(mask, 6))),
        "ls": pa.array([None if k % 11 == 0 else [f"x{k % 9}"] * (k % 3) for k in range(n)],
                       pa.list_(pa.string())),
    })
    pq.write_table(table, path)  # pyarrow's defaults: SNAPPY, dictionaries, 1Mi-row groups
    return table


def ptr(span):
    if span is None:
        return 0
    p = getattr(span, "ptr", None)
    return p if p is not None else span.__cuda_array_interface__["data"][0]


def exported_ptrs(a):
    """Every buffer pointer of an exported array and its descendants."""
    out = {a.buffers[k] or 0 for k in range(a.n_buffers)}
    for c in range(a.n_children):
        out |= exported_ptrs(a.children[c].contents)
    return out


def cudf_ptrs(col):
    """The device pointers of a cuDF column and its children."""
    out = {ptr(col.data()), ptr(col.null_mask())}
    for c in col.children():
        out |= cudf_ptrs(c)
    return out - {0}


def main():
    lib_path, out_dir = sys.argv[1], sys.argv[2]
    import pyarrow.parquet as pq
    import pylibcudf as plc
    path = os.path.join(out_dir, "c-device-pyarrow.parquet")
    write(path)
    want = pq.read_table(path)
    print(f"wrote {path}: {want.num_rows} rows, {want.num_columns} columns (pyarrow)")
    lib = ctypes.CDLL(lib_path)
    lib.cuparquet_last_error.restype = c_char_p
    lib.cuparquet_device_memory.argtypes = [c_int, POINTER(c_int64), POINTER(c_int64)]

    def live():
        n, peak = c_int64(), c_int64()
        assert lib.cuparquet_device_memory(0, byref(n), byref(peak)) == 0
        return n.value

    lib.cuparquet_stream.argtypes = [c_char_p, c_char_p, c_char_p, c_char_p,
                                     POINTER(ArrowDeviceArrayStream)]
    stream = ArrowDeviceArrayStream()
    if lib.cuparquet_stream(path.encode(), None, None, b"cuda:0", byref(stream)) != 0:
        sys.exit(f"cuparquet_stream: {lib.cuparquet_last_error().decode()}")
    assert stream.device_type == 2, stream.device_type
    print("cuparquet_stream: a stream of CUDA arrays")
    failures, row, nbatch = [], 0, 0
    while True:
        schema = ArrowSchema()
        assert stream.get_schema(byref(stream), byref(schema)) == 0
        names = [schema.children[k].contents.name.decode() for k in range(schema.n_children)]
        arr = ArrowDeviceArray()
        if stream.get_next(byref(stream), byref(arr)) != 0:
            sys.exit(f"get_next: {stream.get_last_error(byref(stream)).decode()}")
        if not arr.array.release:
            schema.release(byref(schema))
            break
        assert arr.device_type == 2 and arr.device_id == 0 and arr.sync_event, "a CUDA array"
        n = arr.array.length
        ours = [exported_ptrs(arr.array.children[k].contents) for k in range(len(names))]
        exported = Exported(schema, arr)
        tbl = plc.Table.from_arrow(exported)
        if not exported.moved():
            failures.append(f"batch {nbatch}: cuDF left the capsules' structs unreleased")
        del exported
        cols = tbl.columns()
        for k, name in enumerate(names):
            theirs = cudf_ptrs(cols[k])
            if name == "flag":
                copied = "converted (booleans: bits to bytes)"
            elif theirs and theirs <= ours[k]:
                copied = "no copy"
            else:
                copied = "COPIED"
                failures.append(f"batch {nbatch} {name}: cuDF's buffers are not ours")
            print(f"batch {nbatch} column {name}: {copied} "
                  f"({len(theirs & ours[k])} of {len(theirs)} cuDF buffers are cuparquet's)")
        got = tbl.to_arrow()  # positional: column names are compared through the schema above
        exp = want.slice(row, n)
        for k, name in enumerate(names):
            g, e = got.column(k).combine_chunks(), exp.column(k).combine_chunks()
            if g.type != e.type:
                # cuDF's own names for struct fields and list items, its own decimal
                # precision: the same layout, read as pyarrow's type
                g = g.view(e.type)
            same = g.equals(e)
            if not same:
                failures.append(f"batch {nbatch} {name}: values differ ({g.type} vs {e.type})")
        held = live()
        print(f"batch {nbatch}: {n} rows, {len(names)} columns compared with pyarrow; "
              f"cuparquet's device memory in use while cuDF holds the batch: {held} bytes")
        if held == 0:
            failures.append(f"batch {nbatch}: no device memory held while cuDF uses it")
        del tbl, cols, got
        row += n
        nbatch += 1
    stream.release(byref(stream))
    import gc
    gc.collect()
    left = live()
    print(f"cuparquet's device memory in use after cuDF dropped its tables and the stream "
          f"was released: {left} bytes")
    if left != 0:
        failures.append(f"{left} bytes still held: an exported array was not released")
    if row != want.num_rows:
        failures.append(f"{row} rows streamed of {want.num_rows}")
    print(f"cuDF imported {nbatch} batches, {row} rows; structs released by the capsules: "
          f"{RELEASED} (0: cuDF took and released every one)")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("cuDF import: all columns equal pyarrow; every non-boolean column without a copy")


if __name__ == "__main__":
    main()
