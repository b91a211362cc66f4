"""Offline HTML charts: Vega specs drawn by a vega bundle that ships inside the page.

Altair's default renderer loads vega from a CDN and its ``inline`` template repeats the 0.9 MB
bundle per chart, which breaks on the second chart. In the HTML report a chart is only a
``<div>`` and a short script that calls ``vegaEmbed``; the bundle itself is inlined once, in
the head, by the nbconvert template.

A notebook's chart outputs carry a Vega part and a static image (``toolkit.report.display``);
``inline_charts`` turns a copy of the executed notebook into the HTML form for the export only.
No altair renderer is registered or enabled: the notebook kept beside the report, and any
kernel, see altair as the user left it.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

from toolkit.report.mime import IMAGE_MIMES, VEGA_MIME, vl_version
from toolkit.schema.jsonable import to_json

__all__ = [
    "bundle_html",
    "chart_html",
    "external_refs",
    "inline_charts",
    "json_for_script",
    "vega_bundle",
]

_counter = itertools.count(1)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ppscope"


@cache
def vega_bundle() -> str:
    """The vega + vega-lite + vega-embed bundle (≈ 0.9 MB of JavaScript), safe inside <script>.

    Building it takes seconds, so it is cached on disk per vl-convert and Vega-Lite version.
    """
    import vl_convert as vlc

    version = vl_version()
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
    """A chart container and the script that draws ``spec`` (Vega, or Vega-Lite without a
    ``$schema`` naming Vega) into it once vegaEmbed exists.

    The id is numbered and hashed so a report renders the same twice; the script waits for the
    bundle for up to 20 s. ``$schema`` is dropped and the mode given instead: the page's bundle
    may be a newer Vega than the version a spec names, which vegaEmbed would warn about.
    """
    spec = dict(spec)
    schema = str(spec.pop("$schema", ""))
    mode = "vega" if "/schema/vega/" in schema else "vega-lite"
    text = json_for_script(spec)
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    div = f"ppscope-chart-{next(_counter)}-{digest}"
    script = (
        "(function(){"
        f"var spec={text};var el=document.getElementById('{div}');var tries=0;"
        "function go(){if(!window.vegaEmbed){if(tries++<200){setTimeout(go,100);}return;}"
        f"window.vegaEmbed(el,spec,{{actions:false,renderer:'svg',mode:'{mode}'}})"
        ".catch(function(e){el.textContent='chart failed: '+e;console.error(e);});}"
        "go();})();"
    )
    return f'<div class="ppscope-chart" id="{div}"></div>\n<script>{script}</script>'


def inline_charts(nb: Any) -> Any:
    """A copy of an executed notebook whose chart outputs are offline HTML (``chart_html``),
    for the HTML export: the static images are left out, the page draws the live chart."""
    out = copy.deepcopy(nb)
    for cell in out.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if VEGA_MIME not in data:
                continue
            for mime in (*IMAGE_MIMES, "text/html"):
                data.pop(mime, None)
            data["text/html"] = chart_html(data.pop(VEGA_MIME))
    return out


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
