"""The sample incident wherever ppscope is installed: ``data/incident`` of a checkout, else the
same runs written once into the user's cache (the generator is deterministic, so the copy is
byte-identical to the committed one)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from toolkit._version import __version__
from toolkit.synth.runs import INCIDENT_RUNS, write_incident

__all__ = ["SAMPLE_PREFIX", "sample_root"]

SAMPLE_PREFIX = "data/incident"
"""How notebooks and commands name the sample's run directories."""


def _cache_home() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ppscope"


def sample_root(*, cache: Path | None = None) -> Path:
    """A directory holding the sample's runs (``tp8``, ``pp8``, ``pp8-fixed``): the checkout's
    ``data/incident`` when ppscope runs from one, else a copy written once under the cache
    (atomically: a half-written copy is never used)."""
    checkout = Path(__file__).resolve().parents[2] / SAMPLE_PREFIX
    if all((checkout / name / "server.log").is_file() for name in INCIDENT_RUNS):
        return checkout
    home = cache or _cache_home()
    root = home / f"sample-{__version__}"
    if all((root / name / "run.toml").is_file() for name in INCIDENT_RUNS):
        return root
    home.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".sample-", dir=home))
    try:
        write_incident(work)
        try:
            work.rename(root)
        except OSError:  # another process finished first: theirs is as good
            shutil.rmtree(work, ignore_errors=True)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return root
