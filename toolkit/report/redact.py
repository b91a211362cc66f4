"""Redaction: secrets out of everything a report shows or saves, and log text made inert.

Two layers, because a secret can travel far from its ServerArgs field (a launch command in
``run.toml``, a log line that echoes the arguments, an evidence table of a finding):

1. Structured: values of secret-looking keys (``api_key``, ``admin_api_key``, keys with a
   ``token``/``secret``/``password`` part) and credentials in URLs are replaced where the data is
   shown (``redact_args``, ``redact_text``).
2. Literal: every secret value found in the runs is then replaced wherever it still occurs in the
   finished notebook, HTML and sidecar (``scrub``), in its raw, HTML-escaped and JSON-escaped
   forms.
"""

from __future__ import annotations

import html
import json
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "REDACTED",
    "escape",
    "is_secret_key",
    "redact_args",
    "redact_text",
    "scrub",
    "secrets_in_args",
    "secrets_in_command",
]

REDACTED = "[redacted]"

# Name parts that mark a secret. Whole parts only: ``max_total_num_tokens`` and
# ``tokenizer_path`` hold no secret, ``hf_token`` and ``auth_token`` do.
_SECRET_PARTS = frozenset(
    {"token", "secret", "password", "passwd", "pwd", "credential", "credentials", "apikey"}
)
_SECRET_NAMES = frozenset({"api_key", "admin_api_key", "authorization"})
_NUMBER = re.compile(r"^[+-]?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?%?$")
_MIN_LITERAL = 6  # shorter values are replaced only where their key is seen, never blindly


def is_secret_key(name: str) -> bool:
    """Whether a ServerArgs field or CLI flag (``--api-key``) names a secret."""
    norm = name.strip().lstrip("-").lower().replace("-", "_")
    parts = [p for p in re.split(r"[^a-z0-9]+", norm) if p]
    if norm in _SECRET_NAMES or any(p in _SECRET_PARTS for p in parts):
        return True
    # *_api_key, *_access_key, *_secret_key, but not e.g. ``sort_key`` or ``lora_keys``
    return len(parts) >= 2 and parts[-1] == "key" and parts[-2] in {"api", "access", "secret"}


def _is_secret_value(value: object) -> bool:
    return isinstance(value, str) and value.strip() not in ("", "None", "null")


def redact_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a ServerArgs dict with secret values replaced (nested dicts too)."""
    out: dict[str, Any] = {}
    for key, value in args.items():
        if is_secret_key(str(key)) and _is_secret_value(value):
            out[key] = REDACTED
        elif isinstance(value, Mapping):
            out[key] = redact_args(value)
        elif isinstance(value, str):
            out[key] = redact_text(value)
        else:
            out[key] = value
    return out


def secrets_in_args(args: Mapping[str, Any]) -> set[str]:
    """The secret values of a ServerArgs dict (nested dicts too)."""
    found: set[str] = set()
    for key, value in args.items():
        if is_secret_key(str(key)) and _is_secret_value(value):
            found.add(str(value))
        elif isinstance(value, Mapping):
            found |= secrets_in_args(value)
    return found


def secrets_in_command(command: str) -> set[str]:
    """Values of secret flags in a launch command: ``--api-key X`` and ``--api-key=X``."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    found: set[str] = set()
    for i, word in enumerate(words):
        if not word.startswith("--"):
            continue
        flag, eq, value = word.partition("=")
        if not is_secret_key(flag):
            continue
        if eq:
            found.add(value)
        elif i + 1 < len(words) and not words[i + 1].startswith("--"):
            found.add(words[i + 1])
    return {s for s in found if s}


# key=value / key: value / "key": "value" / --flag value, where the key names a secret
_ASSIGN = re.compile(
    r"""(?P<key>["']?-{0,2}[A-Za-z_][A-Za-z0-9_\-]*["']?)(?P<sep>\s*[=:]\s*|\s+)"""
    r"""(?P<q>["']?)(?P<value>[^\s"',)}\]\-][^\s"',)}\]]*)(?P=q)"""
)
_URL_CREDENTIALS = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s:@'\"]+(?::[^/\s@'\"]*)?@"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}")
_KNOWN_KEYS = re.compile(r"\b(?:sk|hf|ghp|gho|github_pat|xox[abp])[-_][A-Za-z0-9_\-]{12,}\b")


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with secret assignments, URL credentials, bearer tokens and known key shapes
    (``sk-…``, ``hf_…``, ``ghp_…``) replaced, and each of ``secrets`` wherever it occurs."""

    def assignment(m: re.Match[str]) -> str:
        key = m.group("key").strip("\"'")
        if m.group("sep").isspace() and not key.startswith("--"):
            return m.group(0)  # "token usage 0.10" is prose, not an assignment
        value = m.group("value")
        if (
            not is_secret_key(key)
            or value in ("None", "null", "False", "True")
            or _NUMBER.match(value)
        ):
            return m.group(0)  # "#token: 50112" is a count, not a credential
        q = m.group("q")
        return f"{m.group('key')}{m.group('sep')}{q}{REDACTED}{q}"

    text = scrub(text, secrets)
    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _KNOWN_KEYS.sub(REDACTED, text)
    return _ASSIGN.sub(assignment, text)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """Replace each secret (≥ 6 characters) and its HTML- and JSON-escaped forms in ``text``."""
    for secret in sorted({s for s in secrets if len(s) >= _MIN_LITERAL}, key=len, reverse=True):
        forms = {secret, html.escape(secret), html.escape(secret, quote=False)}
        forms.add(json.dumps(secret)[1:-1])
        forms.add(json.dumps(secret, ensure_ascii=False)[1:-1])
        for form in sorted(forms, key=len, reverse=True):
            text = text.replace(form, REDACTED)
    return text


def escape(text: object) -> str:
    """HTML-escape any value for display: log lines are data, never markup."""
    return html.escape("" if text is None else str(text), quote=True)
