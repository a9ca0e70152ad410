"""Read a Parquet file onto the GPU, hand it to cuDF and to PyTorch, look at the report.

    python python/examples/quickstart.py [FILE]      (default: the bundled lineitem sample)

Runs anywhere: without a GPU the read lands in host memory (and the report says why), and the
steps whose library is missing say so and go on. pylibcudf (cuDF), PyTorch or CuPy, and pyarrow
are used where installed.
"""

import sys
from pathlib import Path

import cuparquet

path = sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "testdata" / "lineitem-sample.parquet"

# 1. Read: columns, a filter in pyarrow's form, the device left to cuparquet ("auto").
t = cuparquet.read_table(path, columns=["l_orderkey", "l_quantity", "l_extendedprice", "l_returnflag"],
                         filter=[("l_quantity", ">", 40)])
print(t)

# 2. The report: which device and why, the bytes each I/O path moved, the times.
load = t.report["loads"][0]
print("device:", load["device"]["location"], "-", load["device"]["reason"])
print("bytes by I/O path:", load["bytes_by_path"])
print(f"read {load['bytes_read']:,} bytes of {path} in {load['load_time'] * 1e3:.1f} ms")

# 3. cuDF: a device batch goes to pylibcudf without a copy (the Arrow C Device interface).
try:
    import pylibcudf as plc

    for batch in t.batches:
        tbl = plc.Table.from_arrow(batch)
        print(f"pylibcudf table: {tbl.num_rows()} rows x {tbl.num_columns()} columns")
except ImportError:
    print("no pylibcudf here: pip install pylibcudf-cu13 to hand batches to cuDF")

# 4. PyTorch (or CuPy): a fixed-width column in place, through DLPack / the CUDA array interface.
price = t.column("l_extendedprice")
print(price)
if price.device.startswith("cuda"):
    try:
        import torch

        x = torch.from_dlpack(price)
        print("torch:", x.device, x.dtype, "mean price", float(x.mean()))
    except ImportError:
        try:
            import cupy

            x = cupy.asarray(price)
            print("cupy:", x.device, x.dtype, "mean price", float(x.mean()))
        except ImportError:
            print("neither torch nor cupy here: pip install torch (or cupy-cuda13x)")
else:
    import numpy as np

    x = np.asarray(price)  # a host read: NumPy reads the column in place
    print("numpy (host read):", x.dtype, "mean price", float(x.mean()))

# 5. A host copy for anything else (pandas, Polars, DuckDB): pyarrow.
try:
    print(t.to_pyarrow().slice(0, 3).to_pydict())
except ImportError:
    print("no pyarrow here: pip install pyarrow for host copies")
