"""What several test modules share: where things are, and builders of real-shaped inputs."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The repository checkout."""
TEST_DATA = REPO / "tests" / "data"
"""Small fixtures, one per format variant and version profile (``tests/data/<case>/``)."""
SAMPLE = REPO / "data" / "incident"
"""The synthetic sample incident the demo report renders."""
