"""Shared fixtures: paths of the test data and a helper to write log files."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# The compiled log pass checks every index in tests (an out-of-range read raises instead of
# reading past a line), compiled into a cache of the session's own.
os.environ.setdefault("NUMBA_BOUNDSCHECK", "1")
os.environ.setdefault("NUMBA_CACHE_DIR", tempfile.mkdtemp(prefix="ppscope-test-numba-"))

import pytest
from helpers import TEST_DATA
from hypothesis import HealthCheck, settings

# Tests run on busy 2-core machines: no deadline, slow generation tolerated, and the same
# examples every run (CI must be reproducible). ``HYPOTHESIS_PROFILE=fuzz`` searches longer.
settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
    print_blob=True,
)
settings.register_profile(
    "fuzz",
    deadline=None,
    max_examples=2_000,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
# A notebook cell of the test data runs in seconds: a hung kernel fails its test in minutes.
os.environ.setdefault("PPSCOPE_CELL_TIMEOUT_S", "600")
# Caches go to one folder of the session, never beside the fixtures in the checkout.
os.environ.setdefault("PPSCOPE_CACHE_DIR", tempfile.mkdtemp(prefix="ppscope-test-cache-"))

DATA = TEST_DATA


@pytest.fixture
def cache_beside_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache where a user's run keeps it, beside the input (tests that copy their input to
    a temp dir read it there)."""
    monkeypatch.delenv("PPSCOPE_CACHE_DIR", raising=False)


@pytest.fixture
def write_log(tmp_path: Path):
    """Write text (or bytes) to a fresh file and return its path."""
    counter = iter(range(1_000_000))

    def write(content: str | bytes, name: str | None = None) -> Path:
        path = tmp_path / (name or f"log{next(counter)}.log")
        if isinstance(content, str):
            content = content.encode()
        path.write_bytes(content)
        return path

    return write
