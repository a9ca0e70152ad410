#!/usr/bin/env bash
# The object-store reader's tests (feature `object-store`): tests/remote.rs, SQL over S3
# (cuparquet-datafusion/tests/remote.rs) and 2 distributed workers over one bucket
# (cuparquet-distributed/tests/remote.rs), against moto's S3 server and HTTP servers that the
# tests start on 127.0.0.1 (scripts/py/remote_fixture.py).
# Makes a virtual environment with moto[server] once (VENV, default target/remote-venv), then
# runs the tests with the servers required (CUPARQUET_REQUIRE_REMOTE=1). Needs python3 (>= 3.9)
# with venv, and PyPI. Arguments go to cargo test (e.g. -- --nocapture).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-target/remote-venv}
if ! "$venv/bin/python" -c "import moto.server, boto3" 2> /dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet "moto[server]>=5,<6"
fi
CUPARQUET_TEST_PYTHON="$(cd "$venv" && pwd)/bin/python"
export CUPARQUET_TEST_PYTHON CUPARQUET_REQUIRE_REMOTE=1
# One invocation over the workspace: cargo unifies dependencies' features over the packages it is
# asked for, so `-p cuparquet-datafusion` alone would build DataFusion a second time (other tokio
# features) beside the build `cargo test --workspace` made.
cargo test --workspace --features "cuparquet/object-store cuparquet-datafusion/object-store cuparquet-distributed/object-store cuparquet-python/object-store" --test remote "$@"
