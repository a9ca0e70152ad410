"""URL sources from Python: `read_table("s3://…", storage_options={...})` against moto's S3
server, started on 127.0.0.1 by the test, equal to pyarrow's read of the local file."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cuparquet


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    moto_server = pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    d = tmp_path_factory.mktemp("s3")
    n = 30_000
    t = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "s": pa.array([f"v{i % 50}" for i in range(n)]),
            "d": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 300) for i in range(n)]),
        }
    )
    local = d / "t.parquet"
    pq.write_table(t, local, row_group_size=5_000)
    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
        region_name="us-east-1",
    )
    client.create_bucket(Bucket="data")
    for key in ("t.parquet", "dir/a.parquet", "dir/b.parquet"):
        client.upload_file(str(local), "data", key)
    options = {
        "aws_endpoint": endpoint,
        "aws_allow_http": "true",
        "aws_access_key_id": "test",
        "aws_secret_access_key": "test",
        "aws_region": "us-east-1",
    }
    yield local, options
    server.stop()


def test_s3_equals_the_local_file(s3):
    local, options = s3
    ours = cuparquet.read_table("s3://data/t.parquet", device="host", storage_options=options)
    assert ours.to_pyarrow().equals(pq.read_table(local))
    load = ours.report["loads"][0]
    assert load["path"] == "s3://data/t.parquet"
    assert list(load["bytes_by_path"]) == ["remote"]
    assert load["io"]["remote"]["gets"] >= 1


def test_s3_prefix_filter_and_scan(s3):
    local, options = s3
    f = [("id", "<", 100), ("s", "in", ["v1", "v2"])]
    ours = cuparquet.read_table("s3://data/dir/", filter=f, device="host", storage_options=options)
    one = pq.read_table(local, filters=f)
    assert ours.to_pyarrow().equals(pa.concat_tables([one, one]))
    batches = list(cuparquet.scan("s3://data/dir/", device="host", storage_options=options))
    assert sum(b.num_rows for b in batches) == 60_000


def test_s3_errors_name_the_url(s3):
    _, options = s3
    with pytest.raises(cuparquet.CuparquetError, match="s3://data/missing.parquet"):
        cuparquet.read_table("s3://data/missing.parquet", device="host", storage_options=options)
    with pytest.raises(cuparquet.CuparquetError, match="no_such_option"):
        cuparquet.read_table("s3://data/t.parquet", device="host", storage_options={"no_such_option": "1"})
    with pytest.raises(TypeError, match="storage_options"):
        cuparquet.read_table("s3://data/t.parquet", storage_options={"aws_region": 3})
