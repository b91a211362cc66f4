"""The MIME types a chart travels as, and the Vega-Lite version that compiles it; importing this
costs nothing (altair is read from its source, not imported: its import takes seconds)."""

from __future__ import annotations

import importlib.util
import re
from functools import cache
from pathlib import Path

__all__ = ["IMAGE_MIMES", "VEGA_MIME", "vl_version"]

VEGA_MIME = "application/vnd.vega.v5+json"
IMAGE_MIMES = ("image/svg+xml", "image/png")


@cache
def vl_version() -> str | None:
    """Altair's Vega-Lite major.minor when vl-convert ships it (else None: vl-convert's
    latest)."""
    import vl_convert as vlc

    schema = _altair_schema_version()
    if schema is None:
        import altair as alt

        schema = alt.SCHEMA_VERSION
    wanted = ".".join(schema.lstrip("v").split(".")[:2])
    return wanted if wanted in vlc.get_vegalite_versions() else None


def _altair_schema_version() -> str | None:
    """Altair's Vega-Lite schema version read from its source, without importing altair."""
    spec = importlib.util.find_spec("altair")
    if spec is None or spec.origin is None:
        return None
    for schema in sorted(Path(spec.origin).parent.glob("vegalite/v*/schema/__init__.py")):
        m = re.search(r'^SCHEMA_VERSION = "(v[\d.]+)"', schema.read_text(), re.M)
        if m:
            return m.group(1)
    return None
