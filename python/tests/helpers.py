"""What the test modules share (on sys.path: pytest puts this folder there)."""

from __future__ import annotations

import os

import pytest

import cuparquet


def gpu() -> bool:
    """Whether a CUDA device is here; its absence fails the test under CUPARQUET_REQUIRE_GPU=1."""
    probe = cuparquet.cuda_devices()
    have = probe.get("devices", 0) > 0
    if not have and os.environ.get("CUPARQUET_REQUIRE_GPU") == "1":
        pytest.fail(f"CUPARQUET_REQUIRE_GPU=1 but no CUDA device: {probe}")
    return have
