"""Ctrl-C during a read: `read_table`, `scan()` and a scanner's `next()` return
`KeyboardInterrupt` at once, against an HTTP server on 127.0.0.1 that stalls (the footer's
request answered or not, column chunks never), the read going on unseen behind it."""

from __future__ import annotations

import _thread
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cuparquet


class Stalling(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the handler's name
        data = self.server.data
        rng = self.headers.get("Range", "")
        if self.server.footer and rng.startswith("bytes=-"):
            n = min(int(rng[len("bytes=-") :]), len(data))
            start = len(data) - n
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            self.wfile.write(data[start:])
            return
        self.server.stalled.set()
        time.sleep(30)

    def log_message(self, *args):
        pass


@pytest.fixture()
def server(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": pa.array(range(50_000), pa.int64())}), path)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Stalling)
    srv.daemon_threads = True
    srv.data = path.read_bytes()
    srv.footer = False
    srv.stalled = threading.Event()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()


OPTIONS = {"allow_http": "true", "timeout": "120s"}


def interrupted(srv, call):
    """Runs `call`, Ctrl-C'd once the server stalls; the seconds it took to return."""

    def ctrl_c():
        srv.stalled.wait(20)
        time.sleep(0.2)
        _thread.interrupt_main()

    threading.Thread(target=ctrl_c, daemon=True).start()
    t = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        call()
    return time.perf_counter() - t


def url(srv):
    return f"http://127.0.0.1:{srv.server_address[1]}/t.parquet"


def test_read_table_returns_at_ctrl_c(server):
    took = interrupted(
        server, lambda: cuparquet.read_table(url(server), device="host", storage_options=OPTIONS)
    )
    assert took < 10, took


def test_scan_returns_at_ctrl_c(server):
    took = interrupted(
        server, lambda: cuparquet.scan(url(server), device="host", storage_options=OPTIONS)
    )
    assert took < 10, took


def test_next_returns_at_ctrl_c_and_the_scan_ends(server):
    server.footer = True
    scanner = cuparquet.scan(url(server), device="host", storage_options=OPTIONS)
    assert pa.schema(scanner.schema).names == ["x"]
    took = interrupted(server, lambda: next(scanner))
    assert took < 10, took
    # interrupted, the scan has ended: no waiting for the stalled read
    t = time.perf_counter()
    with pytest.raises(StopIteration):
        next(scanner)
    scanner.close()
    assert time.perf_counter() - t < 1
