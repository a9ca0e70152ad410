"""Writes testdata/contradiction-arrow-hint.parquet (issue 18): a file pyarrow wrote with an
INT96 timestamp column, its physical type then changed to INT32 in the schema and the column
metadata alike, so that only the embedded Arrow schema (ARROW:schema, still saying timestamp)
contradicts it. arrow-rs would label the 32-bit values as timestamps; the load must refuse it.
Installs pyarrow with pip when it is missing.  Usage: python3 scripts/py/contradictions.py"""
import os
import subprocess
import sys

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "pyarrow"])
    import pyarrow as pa
    import pyarrow.parquet as pq

out = os.path.join(
    os.path.dirname(__file__), "..", "..", "testdata", "contradiction-arrow-hint.parquet"
)
t = pa.table({"ts": pa.array([1, 2, 3], pa.timestamp("ns"))})
pq.write_table(t, out, use_deprecated_int96_timestamps=True, compression="none")
b = bytearray(open(out, "rb").read())
footer_len = int.from_bytes(b[-8:-4], "little")
start = len(b) - 8 - footer_len
# compact Thrift: field 1 (type), i32, zigzag(3 = INT96) = 6; in the schema element and in the
# column metadata; INT32 is 1, zigzag 2
hits = [i for i in range(start, len(b) - 9) if b[i : i + 2] == b"\x15\x06"]
assert len(hits) == 2, hits
for i in hits:
    b[i + 1] = 2
open(out, "wb").write(b)
print(out, len(b), "bytes; pyarrow reads it as", pq.read_table(out).schema.field("ts").type)
