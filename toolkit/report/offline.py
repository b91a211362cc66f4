"""Offline charts: Vega-Lite specs drawn by a vega bundle that ships inside the page.

Altair's default renderer loads vega from a CDN and its ``inline`` template repeats the 0.9 MB
bundle per chart, which breaks on the second chart. Here a chart's output
is only a ``<div>`` and a short script that calls ``vegaEmbed``; the bundle itself is inlined
once: by the nbconvert template in a rendered report, or by ``bundle_html`` (shown once by
``toolkit.report.render.setup``) in a live notebook.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

from toolkit.schema.jsonable import to_json

__all__ = [
    "RENDERER",
    "bundle_html",
    "chart_html",
    "enable",
    "external_refs",
    "json_for_script",
    "vega_bundle",
]

RENDERER = "ppscope"
_counter = itertools.count(1)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ppscope"


def _vl_version() -> str | None:
    """Altair's Vega-Lite major.minor when vl-convert ships it (else its own latest)."""
    import vl_convert as vlc

    schema = _altair_schema_version()
    if schema is None:
        import altair as alt

        schema = alt.SCHEMA_VERSION
    wanted = ".".join(schema.lstrip("v").split(".")[:2])
    return wanted if wanted in vlc.get_vegalite_versions() else None


def _altair_schema_version() -> str | None:
    """Altair's Vega-Lite schema version read from its source, without importing altair
    (whose import costs seconds, mostly for a URI grammar the report never uses)."""
    spec = importlib.util.find_spec("altair")
    if spec is None or spec.origin is None:
        return None
    for schema in sorted(Path(spec.origin).parent.glob("vegalite/v*/schema/__init__.py")):
        m = re.search(r'^SCHEMA_VERSION = "(v[\d.]+)"', schema.read_text(), re.M)
        if m:
            return m.group(1)
    return None


@cache
def vega_bundle() -> str:
    """The vega + vega-lite + vega-embed bundle (≈ 0.9 MB of JavaScript), safe inside <script>.

    Building it takes seconds, so it is cached on disk per vl-convert and Vega-Lite version.
    """
    import vl_convert as vlc

    version = _vl_version()
    key = hashlib.sha256(f"{vlc.__version__}|{version}".encode()).hexdigest()[:16]
    path = _cache_dir() / f"vega-bundle-{key}.js"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        pass
    text = vlc.javascript_bundle(vl_version=version) if version else vlc.javascript_bundle()
    # the bundle is a module-style script with top-level consts: keep them out of the page's
    # global scope so a second copy (a re-run cell in a live notebook) cannot clash
    text = "(function(){\n" + text + "\n})();"
    text = text.replace("</script", "<\\/script")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # a read-only home: rebuild next time
    return text


def bundle_html() -> str:
    """A ``<script>`` that defines ``window.vegaEmbed`` unless the page already has it."""
    return f"<script>if(!window.vegaEmbed){{{vega_bundle()}}}</script>"


def json_for_script(value: Any) -> str:
    """JSON that cannot end a ``<script>`` element or open an HTML comment, whatever it holds."""
    text = to_json(value, indent=None)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def chart_html(spec: dict[str, Any]) -> str:
    """A chart container and the script that draws ``spec`` into it once vegaEmbed exists.

    The id is numbered and hashed so a report renders the same twice; the script waits for the
    bundle (a live notebook may show the chart before the bundle cell has run) for up to 20 s.
    """
    text = json_for_script(spec)
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    div = f"ppscope-chart-{next(_counter)}-{digest}"
    script = (
        "(function(){"
        f"var spec={text};var el=document.getElementById('{div}');var tries=0;"
        "function go(){if(!window.vegaEmbed){if(tries++<200){setTimeout(go,100);}return;}"
        "window.vegaEmbed(el,spec,{actions:false,renderer:'svg'})"
        ".catch(function(e){el.textContent='chart failed: '+e;console.error(e);});}"
        "go();})();"
    )
    return f'<div class="ppscope-chart" id="{div}"></div>\n<script>{script}</script>'


def _render(spec: dict[str, Any], **_meta: Any) -> dict[str, str]:
    title = spec.get("title")
    if isinstance(title, dict):
        title = title.get("text")
    plain = f"<chart: {title}>" if isinstance(title, str) else "<chart>"
    return {"text/html": chart_html(spec), "text/plain": plain}


def enable() -> None:
    """Make altair display charts with ``chart_html`` (no CDN) and allow downsampled frames.

    Frames are downsampled by the library to ≤ ~20k points, above altair's 5000-row guard.
    """
    import altair as alt

    if RENDERER not in alt.renderers.names():
        alt.renderers.register(RENDERER, _render)
    alt.renderers.enable(RENDERER)
    alt.data_transformers.disable_max_rows()


_REF = re.compile(
    r"""<(?:script|link|img|iframe|source|audio|video|embed)\b[^>]*?\b(?:src|href)\s*=\s*["']?"""
    r"""\s*((?:https?:)?//[^"'\s>]+)""",
    re.IGNORECASE,
)
_CSS_URL = re.compile(r"""@import\s+(?:url\()?["']?((?:https?:)?//[^"')\s]+)""", re.IGNORECASE)


def external_refs(html: str) -> list[str]:
    """Network addresses an HTML page would load: ``src``/``href`` of loading tags, CSS imports.

    Plain ``<a href>`` links are not loads and are ignored.
    """
    return sorted({m.group(1) for m in _REF.finditer(html)} | set(_CSS_URL.findall(html)))
