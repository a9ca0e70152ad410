"""`column(name)` for array libraries: NumPy on host columns (``__array_interface__``,
``__dlpack__``), CuPy and PyTorch on device columns (``__cuda_array_interface__``,
``__dlpack__``), nulls as a separate mask; `doctor()` as a dict. Device checks run where a
GPU is and the library is installed (CUPARQUET_REQUIRE_GPU=1 makes a missing GPU a failure)."""

from __future__ import annotations

import datetime as dt
import gc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import cuparquet
from helpers import gpu


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    n = 5_000
    t = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "x": pa.array([i % 97 for i in range(n)], pa.int32()),
            "f": pa.array([None if i % 11 == 0 else i / 8 for i in range(n)], pa.float64()),
            "u": pa.array([i % 200 for i in range(n)], pa.uint8()),
            "g": pa.array([i * 0.5 for i in range(n)], pa.float32()),
            "d": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 400) for i in range(n)]),
            "s": pa.array([["a", "b"][i % 2] for i in range(n)]),
            "b": pa.array([i % 3 == 0 for i in range(n)]),
        }
    )
    path = tmp_path_factory.mktemp("cols") / "cols.parquet"
    pq.write_table(t, path, row_group_size=1_000)
    return path


def want(path: Path, name: str) -> pa.Array:
    return pq.read_table(path, columns=[name])[name].combine_chunks()


@pytest.mark.parametrize("name, dtype", [("id", "<i8"), ("x", "<i4"), ("u", "|u1"), ("g", "<f4"), ("d", "<i4")])
def test_host_column_is_numpy_in_place(sample, name, dtype):
    t = cuparquet.read_table(sample, device="host", batch_rows=1_000)
    b = t.batches[2]
    col = b.column(name)
    assert col.dtype == dtype and len(col) == 1_000 and col.device == "host"
    a = np.asarray(col)  # __array_interface__: no copy
    assert a.ctypes.data == col.data_ptr
    theirs = want(sample, name).slice(2_000, 1_000)
    if name == "d":
        theirs = theirs.cast(pa.int32())
    assert a.tolist() == theirs.to_pylist()
    d = np.from_dlpack(col)  # __dlpack__ on the host
    assert d.ctypes.data == col.data_ptr and d.tolist() == a.tolist()
    assert col.__dlpack_device__() == (1, 0)
    assert col.validity is None
    with pytest.raises(AttributeError, match="__array_interface__"):
        col.__cuda_array_interface__


def test_host_nulls_are_a_separate_mask(sample):
    t = cuparquet.read_table(sample, columns=["f"], device="host")
    col = t.column("f")  # five batches? one: 5,000 rows under the default batch size
    assert col.null_count == pc.sum(pc.is_null(want(sample, "f"))).as_py()
    mask = np.asarray(col.validity)
    assert mask.dtype == np.bool_
    assert mask.tolist() == pc.is_valid(want(sample, "f")).to_pylist()
    values = np.asarray(col)
    theirs = want(sample, "f")
    assert [v if m else None for v, m in zip(values.tolist(), mask.tolist())] == theirs.to_pylist()
    assert col.to_pyarrow().equals(theirs)


def test_table_column_joins_batches(sample):
    t = cuparquet.read_table(sample, device="host", batch_rows=1_000)
    assert len(t.batches) == 5
    col = t.column("id")
    assert len(col) == 5_000
    assert np.asarray(col).tolist() == list(range(5_000))
    assert t.column(-3).name == "d"  # positions count from the end too
    with pytest.raises(KeyError, match="nope"):
        t.column("nope")
    with pytest.raises(TypeError, match="bit-packed"):
        t.column("b")
    with pytest.raises(TypeError, match="not fixed-width"):
        t.column("s")


def test_dlpack_refuses_a_copy_or_another_device(sample):
    col = cuparquet.read_table(sample, device="host").column("id")
    with pytest.raises(BufferError, match="copy"):
        col.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="device"):
        col.__dlpack__(dl_device=(2, 0))
    # both capsule kinds, freed unconsumed without a leak or a crash
    assert "dltensor" in repr(col.__dlpack__())
    assert "dltensor_versioned" in repr(col.__dlpack__(max_version=(1, 0)))


def test_column_outlives_its_table(sample):
    col = cuparquet.read_table(sample, device="host").column("x")
    gc.collect()
    a = np.from_dlpack(col)
    del col
    gc.collect()
    assert a.tolist() == want(sample, "x").to_pylist()


def test_doctor_is_a_dict():
    r = cuparquet.doctor()
    assert isinstance(r["ok"], bool)
    names = [c["name"] for c in r["checks"]]
    # without a GPU one line ("GPU") says what loads do instead of the GPU stack's checks
    assert ("CUDA driver" if gpu() else "GPU") in names and "settings" in names
    for c in r["checks"]:
        assert c["status"] in ("ok", "warn", "fail") and isinstance(c["detail"], str)
    if not gpu():
        assert r["ok"], r  # no GPU is a warning, not a failure


# --- device: CuPy and PyTorch read the columns in place -------------------------------------


def test_cupy_reads_device_columns_in_place(sample):
    if not gpu():
        pytest.skip("no CUDA device")
    cp = pytest.importorskip("cupy")
    t = cuparquet.read_table(sample, device="cuda:0", batch_rows=1_000)
    col = t.batches[1].column("id")
    assert col.device == "cuda:0"
    cai = col.__cuda_array_interface__
    assert cai["data"][0] == col.data_ptr and cai["shape"] == (1_000,)
    a = cp.asarray(col)
    assert a.data.ptr == col.data_ptr
    assert a.get().tolist() == list(range(1_000, 2_000))
    d = cp.from_dlpack(col)
    assert d.data.ptr == col.data_ptr
    f = t.column("f")  # five batches joined on the device
    values, mask = cp.asarray(f).get(), cp.asarray(f.validity).get()
    assert mask.tolist() == pc.is_valid(want(sample, "f")).to_pylist()
    theirs = want(sample, "f").to_pylist()
    assert [v if m else None for v, m in zip(values.tolist(), mask.tolist())] == theirs


def test_torch_reads_device_columns_in_place(sample):
    if not gpu():
        pytest.skip("no CUDA device")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this torch has no CUDA")
    col = cuparquet.read_table(sample, device="cuda:0").column("g")
    x = torch.from_dlpack(col)
    assert x.device.type == "cuda" and x.data_ptr() == col.data_ptr
    assert x.cpu().tolist() == want(sample, "g").to_pylist()


def test_device_memory_goes_back(sample):
    if not gpu():
        pytest.skip("no CUDA device")
    gc.collect()
    before = cuparquet.device_memory()["cuda:0"]["live_bytes"]
    t = cuparquet.read_table(sample, device="cuda:0")
    col = t.column("id")
    caps = [col.__dlpack__(), col.__dlpack__(max_version=(1, 0))]
    held = cuparquet.device_memory()["cuda:0"]["live_bytes"]
    assert held > before
    del t, col, caps
    gc.collect()
    assert cuparquet.device_memory()["cuda:0"]["live_bytes"] == before


def plc_to_pyarrow(plc, tbl, names):
    """A pylibcudf table as a pyarrow table (whichever conversion this pylibcudf has)."""
    for how in ("method", "interop"):
        try:
            out = tbl.to_arrow() if how == "method" else plc.interop.to_arrow(tbl)
            break
        except (AttributeError, TypeError):
            continue
    else:
        raise AssertionError("this pylibcudf converts no table to Arrow")
    if not isinstance(out, (pa.Table, pa.RecordBatch)):
        out = pa.table(out)
    return pa.table(out).rename_columns(names)


def test_pylibcudf_takes_device_batches_without_a_copy(sample):
    if not gpu():
        pytest.skip("no CUDA device")
    plc = pytest.importorskip("pylibcudf")
    names = ["id", "x", "f", "u", "g", "d", "s"]  # every column but the boolean
    t = cuparquet.read_table(sample, columns=names, device="cuda:0")
    (b,) = t.batches
    tbl = plc.Table.from_arrow(b)  # __arrow_c_device_array__
    cols = tbl.columns()
    assert len(cols) == len(names)
    for name, c in zip(names, cols):
        if name != "s":  # fixed width: the same device buffer
            assert c.data().ptr == b.column(name).data_ptr, name
    theirs = pq.read_table(sample, columns=names)
    got = plc_to_pyarrow(plc, tbl, names)
    assert got.cast(theirs.schema).equals(theirs.replace_schema_metadata(None).combine_chunks())
    del tbl, cols
    gc.collect()
