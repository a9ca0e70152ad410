#!/usr/bin/env bash
# The Python module's tests: builds `cuparquet` (python/) into a fresh virtual environment with
# maturin (a debug build, sharing target/ with cargo's), installs pytest, pyarrow (the oracle),
# NumPy, DuckDB and Polars (they write and read test files) and moto (an S3 server) there, and
# runs python/tests. Needs python3 (>= 3.10) with venv, and PyPI. VENV: where the environment
# goes (default target/py-venv, made afresh); PYTEST_ARGS: passed to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-target/py-venv}
rm -rf "$venv"
python3 -m venv "$venv"
VIRTUAL_ENV=$(cd "$venv" && pwd)
export VIRTUAL_ENV
export PATH="$VIRTUAL_ENV/bin:$PATH"
python -m pip install --quiet --upgrade pip
python -m pip install --quiet "maturin>=1.9,<2" pytest "pyarrow>=14" numpy duckdb polars "moto[server]>=5,<6"
maturin develop --quiet --manifest-path python/Cargo.toml
# shellcheck disable=SC2086
python -m pytest -q python/tests ${PYTEST_ARGS:-}
# the README's example runs as written (here on the host)
python python/examples/quickstart.py > /dev/null
