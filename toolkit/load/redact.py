"""The one redactor: secrets out of everything ppscope prints, writes or renders.

Every output (command text, Markdown, JSON, the Perfetto trace, the report's HTML, sidecar and
kept notebook) passes through ``redact_text`` or ``redact_value`` with the secret values found
in the run's inputs (``Run.secrets``). Two layers, because a secret travels far from its key (a
launch command in ``run.toml``, a log line that echoes the arguments, a finding's evidence):

1. A scanner (``redact_text``) that finds secrets in any free text, wherever they sit in a
   line:

   - the value of a secret-bearing key (``api_key``, ``x-api-key``, ``password``,
     ``passphrase``, ``private_key``, keys with a ``token``/``secret``/``credential`` part,
     signed-URL parameters such as ``X-Amz-Signature``, ``Signature`` and ``sig``), whatever
     the separator (``=``, ``:``, spaces or tabs after a ``--flag`` or around ``=``), quoted or
     not, even when another ``key=`` precedes it on the line;
   - every ``Authorization:``/``Cookie:``/``Set-Cookie:`` value and ``Bearer``/``Basic``
     credentials;
   - credentials in URLs, with or without a user (``redis://:pw@host``), passwords holding
     ``/`` or ``@``;
   - tokens by their shape (``sk-…``, ``hf_…``, ``ghp_…``, ``github_pat_…``, ``xox…``,
     ``AKIA…``, JWTs) and long hex/base64 strings right after a secret word.

   Counts stay: ``#token: 1234`` and ``token usage: 0.95`` are SGLang's, not credentials.
   Every pattern is linear in the text (bounded repetition, no nested quantifiers), so a
   1 MB line costs what its length does.
2. Literal: every secret value found in the inputs is replaced wherever it still occurs, with
   or without its key (``scrub``), in its raw, HTML-escaped and JSON-escaped forms.
"""

from __future__ import annotations

import html
import json
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from toolkit.load.secrets import COUNT_PARTS, REDACTED, is_secret_key, name_parts

__all__ = [
    "REDACTED",
    "is_secret_key",
    "redact_args",
    "redact_text",
    "redact_value",
    "scrub",
    "secrets_in_args",
    "secrets_in_command",
    "secrets_in_text",
    "walk_strings",
]

_NUMBER = re.compile(r"[+-]?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?%?")
_MIN_LITERAL = 6  # shorter values are replaced only where their key is seen, never blindly
_NOT_SECRET = frozenset(
    {"", "none", "null", "nil", "false", "true", "empty", "***", "xxx", "<redacted>", REDACTED}
)
_MAX_VALUE = 4096
"""Longest value replaced at once; a longer one is replaced up to here (its start is enough)."""


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


# ----------------------------------------------------------------------------- the scanner
# A key and its separator. The value is read by ``_value`` from where the match ends, and the
# search goes on from there too, so ``retrying with api_key=…`` finds ``api_key`` even though
# ``with`` came first.
_KEY = re.compile(
    r"""(?<![\w.\-])(?P<key>-{0,2}[A-Za-z_][A-Za-z0-9_.\-]{0,63})(?P<kq>\\?["']?)"""
    r"""(?P<sep>[^\S\r\n]{0,8}[:=][^\S\r\n]{0,8})"""
)
# ``--api-key VALUE``: a flag takes the next word as its value.
_FLAG = re.compile(
    r"(?<![\w\-])(?P<key>--[A-Za-z][A-Za-z0-9_\-]{0,63})(?P<kq>)(?P<sep>[^\S\r\n]{1,8})"
)
# ``api_key<TAB>VALUE``: a key and a token-like value with only whitespace between (a table, a
# ``key value`` config line); ``_key_spans`` keeps it only when the value looks random.
_BARE = re.compile(
    r"(?<![\w.\-])(?P<key>[A-Za-z_][A-Za-z0-9_.\-]{0,63})(?P<kq>)(?P<sep>[^\S\r\n]{1,8})"
)
# Headers whose whole value is a credential, to the end of the line or the closing quote.
# A quoted name may also be followed by a comma: ``("Authorization", "Token …")``.
_HEADER = re.compile(
    r"""(?i)(?<![\w\-])(?P<name>proxy-authorization|authorization|set-cookie|cookie|"""
    r"""x-api-key|api-key|x-auth-token)(?P<kq>\\?["']?)"""
    r"""(?P<sep>[^\S\r\n]{0,8}[:=,][^\S\r\n]{0,8})"""
)
_SCHEME = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]{0,30}://")
_URL_REST = re.compile(r"""[^\s"'<>\\`]{1,1024}""")
_HOST = re.compile(
    r"(?:\[[0-9A-Fa-f:.]{2,64}\]|[A-Za-z0-9._~%\-]{1,253})(?::\d{1,5})?(?=[/?#,;)\]}]|$)"
)
_PORT_PATH = re.compile(r"\d{1,5}(?:/.*)?", re.S)
_BEARER = re.compile(
    r"(?i)\b(?P<kind>bearer|basic)[ \t]{1,3}(?P<value>[A-Za-z0-9._~+/=\-]{8,4096})"
)
_SHAPES = re.compile(
    r"\b(?:sk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{16,512}"
    r"|hf_[A-Za-z0-9]{30,64}"
    r"|gh[pousr]_[A-Za-z0-9]{30,255}"
    r"|github_pat_[A-Za-z0-9_]{40,255}"
    r"|xox[abprs]-[A-Za-z0-9\-]{10,255}"
    r"|AKIA[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_\-]{35}"
    r"|eyJ[A-Za-z0-9_\-]{8,2048}\.[A-Za-z0-9_\-]{8,4096}\.[A-Za-z0-9_\-]{8,2048})"
)
# A PEM private key: the block up to its END line (or as far as it goes).
_PEM = re.compile(
    r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY-----[^-]{0,16384}"
    r"(?:-----END (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY-----)?"
)
_NEAR_WORD = re.compile(
    r"(?i)\b(?:api[ _-]?key|token|secret|password|passwd|passphrase|credential)s?\b"
    r"[^\w\r\n]{0,3}(?:is[ \t]{1,3})?(?P<value>[A-Za-z0-9+/_=\-]{20,512})"
)
_STOP = frozenset(" \t\r\n,;)}]\"'<>\\&`")


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every secret the scanner finds replaced by ``[redacted]``, and each of
    ``secrets`` wherever it occurs.

    >>> redact_text("ERROR: retrying with api_key=sk-abc123 in 2s")
    'ERROR: retrying with api_key=[redacted] in 2s'
    >>> redact_text("Decode batch, #running-req: 8, #token: 1234, token usage: 0.95")
    'Decode batch, #running-req: 8, #token: 1234, token usage: 0.95'
    >>> redact_text("redis://:hunter22@cache:6379/0 and Authorization: Token abc def")
    'redis://[redacted]@cache:6379/0 and Authorization: [redacted]'
    """
    if not text:
        return text
    text = scrub(text, secrets)
    spans: list[tuple[int, int]] = []
    _header_spans(text, spans)
    _url_spans(text, spans)
    _key_spans(text, spans)
    for m in _BEARER.finditer(text):
        value = m.group("value")
        if m.group("kind").lower() == "bearer" or value.endswith("=") or _looks_random(value):
            spans.append(m.span("value"))  # "basic functionality" is prose
    spans += [m.span() for m in _SHAPES.finditer(text)]
    spans += [m.span() for m in _PEM.finditer(text)]
    spans += [m.span("value") for m in _NEAR_WORD.finditer(text) if _looks_random(m.group("value"))]
    return _replace(text, spans)


def _replace(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the union of ``spans`` replaced, one ``[redacted]`` per run."""
    if not spans:
        return text
    spans.sort()
    out, last = [], 0
    start, end = spans[0]
    for s, e in spans[1:]:
        if s <= end:
            end = max(end, e)
            continue
        out += [text[last:start], REDACTED]
        last, (start, end) = end, (s, e)
    out += [text[last:start], REDACTED, text[end:]]
    return "".join(out)


def _value_span(text: str, at: int) -> tuple[int, int] | None:
    """Where the value that starts at ``at`` lies: inside its quotes (``\\"`` too, inside
    JSON text), or up to a stop character. None when there is none, or it is redacted."""
    if at >= len(text) or text.startswith(REDACTED, at):
        return None
    escaped = text.startswith(("\\'", '\\"'), at)
    quote = text[at + 1] if escaped else text[at] if text[at] in "\"'" else ""
    if quote:
        start = at + (2 if escaped else 1)
        close = ("\\" + quote) if escaped else quote
        end = text.find(close, start, start + _MAX_VALUE)
        if end < 0:
            newline = text.find("\n", start, start + _MAX_VALUE)
            end = newline if newline >= 0 else min(len(text), start + _MAX_VALUE)
        return (start, end) if end > start else None
    end, limit = at, min(len(text), at + _MAX_VALUE)
    while end < limit and text[end] not in _STOP:
        end += 1
    return (at, end) if end > at else None


def _key_spans(text: str, spans: list[tuple[int, int]]) -> None:
    bare = [m for m in _BARE.finditer(text) if not m.group("key").startswith("-")]
    for m in (*_KEY.finditer(text), *_FLAG.finditer(text), *bare):
        key, sep = m.group("key"), m.group("sep")
        if not is_secret_key(key):
            continue
        found = _value_span(text, m.end())
        if found is None:
            continue
        value = text[found[0] : found[1]]
        if sep.strip() == "" and value.startswith("--"):
            continue  # the next flag, not this one's value
        if not _is_secret_text(value, key):
            continue
        if m.re is _BARE and not _looks_random(value):
            continue  # "password was wrong" is prose
        spans.append(found)


def _is_secret_text(value: str, key: str) -> bool:
    if value.strip().lower() in _NOT_SECRET or value.startswith(("$", "${", "<")):
        return False  # absent, a placeholder or an environment variable named, not its value
    # "#token: 50112" is a count
    return not (_NUMBER.fullmatch(value.strip()) and COUNT_PARTS & set(name_parts(key)))


def _header_spans(text: str, spans: list[tuple[int, int]]) -> None:
    for m in _HEADER.finditer(text):
        if "," in m.group("sep") and not m.group("kq"):
            continue  # "missing authorization, retrying" is prose
        at = m.end()
        if text.startswith(("\\'", '\\"', "'", '"'), at):
            found = _value_span(text, at)
        elif text.startswith(REDACTED, at):
            continue
        else:  # an unquoted header value runs to the end of the line (or a closing quote)
            end, limit = at, min(len(text), at + _MAX_VALUE)
            closing = m.group("kq")[-1:] if m.group("kq") else ""
            while end < limit and text[end] not in "\r\n" and text[end] != (closing or "\n"):
                end += 1
            while end > at and text[end - 1] in " \t,;":
                end -= 1
            found = (at, end) if end > at else None
        if found is not None and _is_secret_text(text[found[0] : found[1]], "authorization"):
            spans.append(found)


def _url_spans(text: str, spans: list[tuple[int, int]]) -> None:
    """Userinfo of ``scheme://user:password@host``: at the first ``@`` that a host follows and
    whose user part holds no ``/``; the password may hold ``/`` and ``@``."""
    for m in _SCHEME.finditer(text):
        rest = _URL_REST.match(text, m.end())
        if rest is None:
            continue
        token = rest.group(0)
        at = token.find("@")
        while at > 0:
            if _userinfo(token[:at]) and _HOST.match(token, at + 1):
                spans.append((m.end(), m.end() + at))
                break
            at = token.find("@", at + 1)


def _userinfo(info: str) -> bool:
    user, colon, password = info.partition(":")
    if "/" in user or "@" in user:
        return False  # a path before the @: "host/u@x" holds no credentials
    return not (colon and _PORT_PATH.fullmatch(password))  # "host:8080/a@b" neither


def _looks_random(value: str) -> bool:
    """A token-like string: letters and digits mixed (a hash, a key), not a word or a path."""
    body = value.strip("/=")
    return any(c.isdigit() for c in body) and any(c.isalpha() for c in body) and "/" not in body


def scrub(text: str, secrets: Iterable[str]) -> str:
    """Replace each secret (≥ 6 characters) and its HTML- and JSON-escaped forms in ``text``."""
    # a number is never replaced blindly: it would change measurements that happen to match it
    chosen = {s for s in secrets if len(s) >= _MIN_LITERAL and not _NUMBER.fullmatch(s)}
    for secret in sorted(chosen, key=len, reverse=True):
        forms = {secret, html.escape(secret), html.escape(secret, quote=False)}
        forms.add(json.dumps(secret)[1:-1])
        forms.add(json.dumps(secret, ensure_ascii=False)[1:-1])
        for form in sorted(forms, key=len, reverse=True):
            text = text.replace(form, REDACTED)
    return text


def walk_strings(value: Any, fix: Callable[[str], str]) -> Any:
    """``value`` (JSON-like: dicts, lists, strings) with ``fix`` applied to every string."""
    if isinstance(value, str):
        return fix(value)
    if isinstance(value, list | tuple):
        return [walk_strings(v, fix) for v in value]
    if isinstance(value, dict):
        return {k: walk_strings(v, fix) for k, v in value.items()}
    return value


_NAMING_FIELDS = ("flag", "key", "name", "setting", "arg", "field", "parameter")
"""Fields of a long-form record (an evidence row, a config diff row) that name a setting: when
one names a secret, the record's other texts are its values."""


def redact_value(value: Any, secrets: Iterable[str] = ()) -> Any:
    """``value`` (JSON-like: dicts, lists, strings) with every secret out.

    A secret-named key's text is replaced; a record whose naming field (``flag``, ``key``,
    ``name``...) names a secret has its other texts replaced; every other string goes through
    ``redact_text`` with ``secrets``.

    >>> redact_value({"flag": "api_key", "intended": "abc", "note": None, "n": 3})
    {'flag': 'api_key', 'intended': '[redacted]', 'note': None, 'n': 3}
    """
    known = frozenset(secrets)
    return _redact_value(value, known)


def _redact_value(value: Any, secrets: frozenset[str]) -> Any:
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, list | tuple):
        return [_redact_value(v, secrets) for v in value]
    if not isinstance(value, Mapping):
        return value
    named = any(isinstance(value.get(f), str) and _names_secret(value[f]) for f in _NAMING_FIELDS)
    out: dict[Any, Any] = {}
    for key, item in value.items():
        # beside a naming field, prose (a note) is no value: a passphrase is scrubbed by value
        secret = (
            named and key not in _NAMING_FIELDS and isinstance(item, str) and " " not in item
        ) or is_secret_key(str(key))
        if secret and isinstance(item, str) and _is_secret_value(item):
            out[key] = REDACTED
        else:
            out[key] = _redact_value(item, secrets)
    return out


def _names_secret(text: str) -> bool:
    """A setting's name (one word, no spaces) that names a secret."""
    return 0 < len(text) <= 64 and not any(c.isspace() for c in text) and is_secret_key(text)


def secrets_in_text(text: str) -> set[str]:
    """The values the scanner finds beside a secret key, header or URL in free text (a log line
    that echoes a command, a client's command field), to be removed wherever they recur."""
    if not text:
        return set()
    spans: list[tuple[int, int]] = []
    _header_spans(text, spans)
    _url_spans(text, spans)
    _key_spans(text, spans)
    found = {text[s:e].strip() for s, e in spans}
    return {v for v in found if v and v != REDACTED}
