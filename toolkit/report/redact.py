"""Redaction of report HTML, and log text made inert.

The scanner and the secret values are ``toolkit.load.redact``'s (the one redactor of every
output); this module applies them to HTML between its tags, and escapes log text for display.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

from toolkit.load.redact import (
    REDACTED,
    is_secret_key,
    redact_args,
    redact_text,
    redact_value,
    scrub,
    secrets_in_args,
    secrets_in_command,
    walk_strings,
)

__all__ = [
    "REDACTED",
    "escape",
    "is_secret_key",
    "redact_args",
    "redact_html",
    "redact_text",
    "redact_value",
    "scrub",
    "secrets_in_args",
    "secrets_in_command",
    "walk_strings",
]


def redact_html(markup: str, secrets: Iterable[str] = ()) -> str:
    """HTML with the text between its tags redacted (entities read as the characters they
    stand for; a script's or style's text as it is); tags and attributes are left alone."""
    secrets = list(secrets)
    out = []
    raw = False  # inside <script> or <style>: text that is no HTML
    for piece in _TAG.split(markup):
        if piece.startswith("<") and _TAG.fullmatch(piece):
            out.append(piece)
            opened = _RAW_ELEMENT.match(piece)
            if opened is not None:
                raw = not opened.group(1)
            continue
        if raw:
            out.append(redact_text(piece, secrets))
            continue
        plain = html.unescape(piece)
        fixed = redact_text(plain, secrets)
        out.append(piece if fixed == plain else html.escape(fixed, quote=False))
    return "".join(out)


_TAG = re.compile(r"(<[^<>]{0,8192}>)")
_RAW_ELEMENT = re.compile(r"(?i)<(/?)(?:script|style)\b")


def escape(text: object) -> str:
    """HTML-escape any value for display: log lines are data, never markup."""
    return html.escape("" if text is None else str(text), quote=True)
