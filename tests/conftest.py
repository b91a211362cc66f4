"""Shared fixtures: paths of the test data and a helper to write log files."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


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
