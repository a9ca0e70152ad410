"""Servers for the remote-read tests (tests/remote.rs), on 127.0.0.1, real ones:

- an S3-compatible server (moto's, in this process), with bucket BUCKET holding the files given;
- an HTTP server that answers range requests (`Range: bytes=a-b`, `bytes=a-`, `bytes=-n`),
  serving the same files under the same keys;
- a second HTTP server that misbehaves on request: `/fault/KIND/KEY` is KEY served with the
  fault KIND on every ranged GET but the footer's suffix GET — `503once` (a 503, then the right answer), `reset` (the
  connection closed mid-body), `short` (fewer bytes than the range), `long` (more bytes than
  the range), `stall` (headers, then nothing).

    python3 scripts/py/remote_fixture.py [--bucket data] KEY=PATH ... [DIRKEY/=DIR ...]

`KEY=PATH` serves file PATH as KEY; `PREFIX/=DIR` serves every file of DIR (recursively) under
PREFIX/. Prints one JSON line {"s3": URL, "http": URL, "faults": URL, "bucket": NAME} once every
server answers, then serves until stdin closes. Needs `moto[server]` (pip install
"moto[server]") for the S3 server.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import socketserver
import sys
import threading
import time


def parse_range(header: str, size: int):
    """(start, end) of a `bytes=` range header, end exclusive; None when unsatisfiable."""
    if not header or not header.startswith("bytes="):
        return None
    spec = header[len("bytes="):].split(",")[0].strip()
    a, _, b = spec.partition("-")
    if a == "":
        n = int(b)
        return (max(size - n, 0), size) if n > 0 else None
    start = int(a)
    end = size if b == "" else min(int(b) + 1, size)
    return (start, end) if start < size and start < end else None


class Files:
    def __init__(self):
        self.by_key: dict[str, str] = {}
        self.fail_once: set[str] = set()
        self.lock = threading.Lock()


def handler(files: Files, faults: bool):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def send_body(self, data: bytes, start: int, end: int, size: int, kind: str | None):
            self.send_response(206)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
            body = data[start:end]
            if kind == "short":
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2])
                self.close_connection = True
                return
            if kind == "long":
                extra = data[end : end + 1024] or b"\0" * 1024
                self.send_header("Content-Length", str(len(body) + len(extra)))
                self.end_headers()
                self.wfile.write(body + extra)
                return
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if kind == "reset":
                self.wfile.write(body[: len(body) // 3])
                self.wfile.flush()
                self.connection.shutdown(2)
                self.close_connection = True
                return
            if kind == "stall":
                self.wfile.flush()
                time.sleep(3600)
                return
            self.wfile.write(body)

        def target(self):
            path = self.path.split("?", 1)[0].lstrip("/")
            kind = None
            if faults and path.startswith("fault/"):
                _, kind, path = path.split("/", 2)
            return path, kind

        def do_HEAD(self):
            key, _ = self.target()
            p = files.by_key.get(key)
            if p is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(os.path.getsize(p)))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()

        def do_GET(self):
            key, kind = self.target()
            p = files.by_key.get(key)
            if p is None:
                self.send_error(404, f"no object {key}")
                return
            if kind and (self.headers.get("Range") or "").startswith("bytes=-"):
                kind = None  # the footer's suffix GET is answered: faults hit the column chunks
            if kind == "503once":
                with files.lock:
                    first = (key, self.headers.get("Range")) not in files.fail_once
                    files.fail_once.add((key, self.headers.get("Range")))
                if first:
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                kind = None
            with open(p, "rb") as f:
                data = f.read()
            r = self.headers.get("Range")
            if r is None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            rng = parse_range(r, len(data))
            if rng is None:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_body(data, rng[0], rng[1], len(data), kind)

    return H


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(h) -> str:
    s = Server(("127.0.0.1", 0), h)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{s.server_address[1]}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bucket", default="data")
    ap.add_argument("--no-s3", action="store_true", help="the HTTP servers only")
    ap.add_argument("--s3-optional", action="store_true", help="without moto, the HTTP servers only")
    ap.add_argument("items", nargs="*", help="KEY=PATH or PREFIX/=DIR")
    a = ap.parse_args()

    files = Files()
    for item in a.items:
        key, _, path = item.partition("=")
        if key.endswith("/"):
            for root, _, names in os.walk(path):
                for n in names:
                    full = os.path.join(root, n)
                    files.by_key[key + os.path.relpath(full, path)] = full
        else:
            files.by_key[key] = path

    http_url = serve(handler(files, faults=False))
    faults_url = serve(handler(files, faults=True))
    s3_url = None
    if not a.no_s3:
        import logging

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        try:
            from moto.server import ThreadedMotoServer
            import boto3
        except ImportError as e:
            if not a.s3_optional:
                raise
            print(f"no S3 server: {e}", file=sys.stderr)
            a.no_s3 = True
    if not a.no_s3:
        moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        moto.start()
        host, port = moto.get_host_and_port()
        s3_url = f"http://{host}:{port}"
        s3 = boto3.client(
            "s3",
            endpoint_url=s3_url,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            region_name="us-east-1",
        )
        s3.create_bucket(Bucket=a.bucket)
        for key, path in files.by_key.items():
            s3.upload_file(path, a.bucket, key)
    print(json.dumps({"s3": s3_url, "http": http_url, "faults": faults_url, "bucket": a.bucket}), flush=True)
    sys.stdin.read()  # until the test closes it
    return 0


if __name__ == "__main__":
    sys.exit(main())
