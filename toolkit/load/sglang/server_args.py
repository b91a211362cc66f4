"""Read SGLang's ``server_args=`` dump and ``launch_server`` command lines into plain dicts.

SGLang logs its configuration once per launch, after ``server_args=``, in one of two shapes:

* up to 0.5.18 a dataclass repr, ``ServerArgs(model_path='/m', tp_size=8, ...)``;
* from 0.5.20 a dict repr, ``{'model_path': '/m', 'tp_size': 8, ...}``.

Both are read without ``eval``: a small scanner cuts the text into top-level
``name=value`` (or ``'key': value``) pieces, honouring quotes, escapes and brackets,
and each value piece is turned into Python data by walking its ``ast`` — only
literals, ``inf``/``nan`` and keyword-only calls are accepted. Anything else is kept
as its source text, and a line cut short keeps every field read before the cut.
"""

from __future__ import annotations

import ast
import math
import re
import shlex
import warnings
from dataclasses import dataclass

from toolkit.errors import ToolkitError, shorten

__all__ = ["ServerArgsDump", "ServerArgsError", "parse_launch_command", "parse_server_args"]


class ServerArgsError(ToolkitError):
    """Text that is not a server_args dump, or a command without any ``--flag``."""


@dataclass(frozen=True)
class ServerArgsDump:
    """One parsed ``server_args=`` dump.

    Attributes
    ----------
    args
        Field name → value, in printed order. Values are ``str``, ``int``, ``float``,
        ``bool``, ``None``, ``list`` or ``dict``; a value that is not a plain literal
        is kept as its source text.
    complete
        False when the text ends before the dump closes (a truncated log line);
        ``args`` then holds only the fields read in full before the cut.
    problems
        Human-readable notes on what could not be read as expected.
    style
        ``"dataclass"`` for ``ServerArgs(...)`` (≤0.5.18), ``"dict"`` for ``{...}`` (≥0.5.20).
    """

    args: dict[str, object]
    complete: bool
    problems: tuple[str, ...] = ()
    style: str = "dataclass"


# --------------------------------------------------------------------------- scanner

_CALL_OPEN = "ServerArgs("
# Characters that can change the scanner's state; everything between them is skipped
# by the regex engine, which keeps a 30 KB dump at a few hundred Python steps.
_SPECIAL = re.compile(r"[\"'()\[\]{}<>,=:]")
# Unrolled-loop string literals: a quote, then runs of plain chars or backslash pairs.
_STRING_END = {
    "'": re.compile(r"'[^'\\]*(?:\\.[^'\\]*)*'", re.S),
    '"': re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S),
}
_CLOSER = {"(": ")", "[": "]", "{": "}"}
# A '<' opens an angle repr such as <Backend.FULL: 'full'> only where a value can
# start; elsewhere it is an ordinary character.
_VALUE_START = frozenset("=([{,:")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _scan_piece(text: str, pos: int, sep: str, end: str) -> tuple[int, int, str]:
    """Find where the top-level piece starting at ``pos`` ends.

    Returns ``(sep_at, stop, how)``: the index of the first top-level ``sep`` (or -1),
    the index of the character that ended the piece, and ``","``, ``end`` or ``""``
    when the text ran out first.
    """
    stack: list[str] = []
    sep_at = -1
    n = len(text)
    while True:
        m = _SPECIAL.search(text, pos)
        if m is None:
            return sep_at, n, ""
        i = m.start()
        ch = text[i]
        if ch == "'" or ch == '"':
            s = _STRING_END[ch].match(text, i)
            if s is None:  # the string never closes: the line was cut inside it
                return sep_at, n, ""
            pos = s.end()
            continue
        pos = i + 1
        top = stack[-1] if stack else ""
        if ch in _CLOSER:
            stack.append(_CLOSER[ch])
        elif ch == "<":
            if top == ">" or _previous_char(text, i) in _VALUE_START:
                stack.append(">")
        elif ch == ">":
            if top == ">":
                stack.pop()
        elif ch in ")]}":
            if not stack:
                if ch == end:
                    return sep_at, i, end
            elif top == ch:
                stack.pop()
            elif top != ">":
                # A mismatched closer in garbled text: close the innermost bracket so
                # one bad value does not swallow the rest of the dump.
                stack.pop()
        elif not stack:
            if ch == ",":
                return sep_at, i, ","
            if ch == sep and sep_at < 0:
                sep_at = i


def _previous_char(text: str, i: int) -> str:
    j = i - 1
    while j >= 0 and text[j] in " \t":
        j -= 1
    return text[j] if j >= 0 else ""


# --------------------------------------------------------------------------- values


class _Unreadable(Exception):
    """A value piece that is not plain data."""


_MISSING = object()
_WORDS: dict[str, object] = {
    "None": None,
    "True": True,
    "False": False,
    "inf": math.inf,
    "-inf": -math.inf,
    "nan": math.nan,
}
_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(?:(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+)")
_INT_LIST = re.compile(r"\[ *-?[0-9]+(?: *, *-?[0-9]+)* *\]")
_SPECIAL_FLOATS = {"inf": math.inf, "nan": math.nan}


def _read_value(piece: str) -> tuple[bool, object]:
    """``(True, value)`` for plain data, else ``(False, stripped source text)``."""
    s = piece.strip()
    word = _WORDS.get(s, _MISSING)
    if word is not _MISSING:
        return True, word
    if s == "[]" or s == "{}":  # a fresh object each time: callers may mutate it
        return True, [] if s == "[]" else {}
    try:
        # Fast paths for the shapes that make up most of a dump; ast is the fallback.
        if _INT.fullmatch(s):
            return True, int(s)
        if _FLOAT.fullmatch(s):
            return True, float(s)
        if len(s) >= 2 and s[0] in "'\"" and s[-1] == s[0]:
            inner = s[1:-1]
            if "\\" not in inner and s[0] not in inner:
                return True, inner
        if _INT_LIST.fullmatch(s):  # cuda_graph_bs and friends: long, and common
            return True, [int(x) for x in s[1:-1].split(",")]
        return True, _from_node(ast.parse(s, mode="eval").body)
    except (_Unreadable, SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return False, s


def _from_node(node: ast.AST) -> object:
    """Plain data from an expression node, or raise ``_Unreadable``."""
    if isinstance(node, ast.Constant):
        if node.value is None or isinstance(node.value, str | int | float):
            return node.value  # bool is an int, so True/False pass here too
        raise _Unreadable  # bytes, complex, Ellipsis
    if isinstance(node, ast.Name) and node.id in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _from_node(node.operand)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
        raise _Unreadable
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [_from_node(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[object, object] = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:  # ``**mapping``
                raise _Unreadable
            key = _from_node(k)
            if isinstance(key, list | dict):
                raise _Unreadable
            out[key] = _from_node(v)
        return out
    if isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else ""
        if not node.args and not node.keywords and name in ("set", "frozenset"):
            return []  # the repr of an empty set
        if node.args or any(kw.arg is None for kw in node.keywords):
            raise _Unreadable
        if not isinstance(node.func, ast.Name | ast.Attribute):
            raise _Unreadable
        # A nested dataclass repr such as CudaGraphConfig(decode=PhaseConfig(...)):
        # its fields are what matters, so it becomes a dict of its keywords.
        return {kw.arg: _from_node(kw.value) for kw in node.keywords}
    raise _Unreadable


# --------------------------------------------------------------------------- dump

# A field whose value is a plain string (no escapes), a bare word or number, or a
# list of ints; groups: name, single-quoted text, double-quoted text, other, terminator.
_SCALAR = r"""(?:'([^'\\]*)'|"([^"\\]*)"|([-+.\w]+|\[[-0-9 ,]*\]))"""
_SIMPLE_FIELD = {
    "dataclass": re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)=" + _SCALAR + r"\s*([,)])"),
    "dict": re.compile(r"""\s*('[^'\\]*'|"[^"\\]*")\s*:\s*""" + _SCALAR + r"\s*([,}])"),
}


def parse_server_args(text: str) -> ServerArgsDump:
    """Parse the text after ``server_args=`` in an SGLang log line.

    Parameters
    ----------
    text
        ``ServerArgs(...)`` or ``{...}``, possibly cut short or followed by junk
        (trailing spaces, ``\\r``, a glued code fence).

    Returns
    -------
    ServerArgsDump
        The fields read, whether the dump was complete, and notes on anything odd.

    Raises
    ------
    ServerArgsError
        If the text does not start with ``ServerArgs(`` or ``{`` (nor with a piece of
        ``ServerArgs(``, which is taken as a dump cut before its first field).
    """
    body = text.lstrip()
    if body.startswith("{"):
        style, sep, end, pos = "dict", ":", "}", 1
    elif body.startswith(_CALL_OPEN):
        style, sep, end, pos = "dataclass", "=", ")", len(_CALL_OPEN)
    elif body and _CALL_OPEN.startswith(body.rstrip()):
        return ServerArgsDump({}, False, ("cut before the first field",), "dataclass")
    else:
        raise ServerArgsError(f"not a server_args dump: {shorten(body, 60)!r}")

    args: dict[str, object] = {}
    problems: list[str] = []
    fast = _SIMPLE_FIELD[style]
    last = ""
    with warnings.catch_warnings():
        # ast.parse warns about odd escapes in garbled text; that is not the caller's news.
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.11's category
        while True:
            m = fast.match(body, pos)
            if m is not None:
                # Most fields are a name and a short scalar: one regex match reads them.
                key, single, double, other, how = m.groups()
                name = key if style == "dataclass" else key[1:-1]
                if single is not None:
                    value: object = single
                elif double is not None:
                    value = double
                else:
                    value = _value(name, other, problems)
                field: tuple[str, object] | None = (name, value)
                pos = m.end()
            else:
                sep_at, stop, how = _scan_piece(body, pos, sep, end)
                if not how:
                    where = f"after field {last!r}" if last else "before the first field"
                    problems.append(f"cut {where}")
                    return ServerArgsDump(args, False, tuple(problems), style)
                piece = body[pos:stop]
                rel = sep_at - pos if sep_at >= 0 else -1
                # An empty piece is a trailing ", " before the close.
                field = _read_piece(piece, rel, style, problems) if piece.strip() else None
                pos = stop + 1
            if field is not None:
                if field[0] in args:
                    # Keeping the first keeps a cut dump's fields a prefix of the whole.
                    problems.append(f"field {field[0]!r} repeated; kept the first value")
                else:
                    args[field[0]] = field[1]
                    last = field[0]
            if how == end:
                break
    rest = body[pos:].strip()
    if rest:
        problems.append(f"ignored text after the dump: {shorten(rest, 40)!r}")
    return ServerArgsDump(args, True, tuple(problems), style)


def _read_piece(
    piece: str, sep_at: int, style: str, problems: list[str]
) -> tuple[str, object] | None:
    """Split one top-level piece into ``(name, value)``; note and skip what cannot be."""
    if sep_at < 0:
        problems.append(f"skipped a piece without a name: {shorten(piece.strip(), 40)!r}")
        return None
    raw_name = piece[:sep_at].strip()
    if style == "dataclass":
        if not _NAME.fullmatch(raw_name):
            problems.append(f"skipped a piece with a bad name: {shorten(raw_name, 40)!r}")
            return None
        name = raw_name
    else:
        ok, key = _read_value(raw_name)
        if ok and isinstance(key, str):
            name = key
        else:
            name = raw_name
            problems.append(f"key {raw_name!r} is not a string; kept its text")
    return name, _value(name, piece[sep_at + 1 :], problems)


def _value(name: str, raw: str, problems: list[str]) -> object:
    ok, value = _read_value(raw)
    if not ok:
        problems.append(f"field {name!r}: kept as text")
    return value


# --------------------------------------------------------------------------- command

_ALIASES = {
    "tp": "tp_size",
    "pp": "pp_size",
    "dp": "dp_size",
    "ep": "ep_size",
    "model": "model_path",
}
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_CONTINUATION = re.compile(r"\\\r?\n")
# Shell operators and redirections end the launch command (``... 2>&1 | tee log``).
_SHELL_STOP = re.compile(r"(?:\|\|?|&&?|;|\|&)$|[0-9]*&?(?:>>?|<)")


def parse_launch_command(command: str) -> dict[str, object]:
    """Read the flags of a ``sglang.launch_server`` / ``sglang serve`` command line.

    Parameters
    ----------
    command
        The command as typed, possibly over several lines joined by ``\\``, with
        ``NAME=value`` environment assignments in front.

    Returns
    -------
    dict
        Flag → value with ``-`` turned into ``_`` and the short aliases resolved
        (``--tp`` → ``tp_size``). A flag without a value is True, several values make
        a list, numbers and ``true``/``false`` are typed, everything else stays text.
        Leading environment assignments go under ``"__env__"`` when there are any.

    Raises
    ------
    ServerArgsError
        If the command has no ``--flag`` at all.
    """
    joined = _CONTINUATION.sub(" ", command)
    try:
        tokens = shlex.split(joined)
    except ValueError:
        # An unbalanced quote: fall back to whitespace so the rest is still readable.
        tokens = joined.split()

    env: dict[str, str] = {}
    i = 0
    while i < len(tokens) and (_ENV.match(tokens[i]) or tokens[i] == "env"):
        if tokens[i] != "env":
            key, _, value = tokens[i].partition("=")
            env[key] = value
        i += 1

    flags: dict[str, list[str]] = {}
    current: list[str] | None = None
    for token in tokens[i:]:
        if _SHELL_STOP.match(token):
            break
        if token == "--":  # end-of-options marker, not a value
            continue
        if token.startswith("--") and len(token) > 2:
            name, has_value, value = token[2:].partition("=")
            key = name.replace("-", "_")
            key = _ALIASES.get(key, key)
            current = flags[key] = [value] if has_value else []
        elif current is not None:
            current.append(token)
        # Tokens before the first flag (python, -m, sglang.launch_server, serve) are
        # the program, not settings.
    if not flags:
        raise ServerArgsError(f"no --flag in launch command: {shorten(command, 60)!r}")

    out: dict[str, object] = {"__env__": env} if env else {}
    for key, values in flags.items():
        if not values:
            out[key] = True
        elif len(values) == 1:
            out[key] = _typed(values[0])
        else:
            out[key] = [_typed(v) for v in values]
    return out


def _typed(value: str) -> object:
    """A command-line value as int, float or bool when it plainly is one."""
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        if _INT.fullmatch(value):
            return int(value)
        if _FLOAT.fullmatch(value):
            return float(value)
    except ValueError:  # an absurdly long number: keep its text
        pass
    return value
