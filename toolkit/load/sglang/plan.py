"""The streaming plan that types every line of one SGLang log file.

One lazy polars query per file: cut the wrapper (journald, docker, ...), find SGLang's
``[date time RANKS]`` bracket anywhere in the line (tqdm bars may be glued in front), classify
the message by its first characters, and type batch fields by position against the key
*shapes* seen in a sample of the file. The few capture regexes are anchored, so they give up at
the first character of every line they do not concern.

Batch lines whose shape was not sampled are flagged ``unresolved``; ``type_by_key`` types them
afterwards, key by key, and the Python reference reader settles what is left.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

import polars as pl

from toolkit.load.limits import python_time
from toolkit.load.sglang.batch_line import GRAPH_LABELS, KEY_COLUMN, batch_shape
from toolkit.load.sglang.overrides import OVERRIDE_PREFIXES, REFUSED_MARK, REFUSED_PREFIX
from toolkit.load.sglang.wrappers import Wrapper, byte_slice

# SGLang's prefix: [2025-05-25 21:40:21(.123)( DP0 PP3 TP0 ...)] — or time only (0.2.15–0.3.0).
BRACKET = (
    r"\[(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?:\.\d{1,6})?"
    r"(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*\]"
)
_ANSI = r"\x1b\[[0-9;?]*[A-Za-z]"
# Control characters other than tab/CR/ESC, or U+FFFD (what invalid UTF-8 was read as).
ODD_TEXT = r"[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f\x{FFFD}]"


def unreadable(lines: pl.LazyFrame) -> pl.LazyFrame:
    """Lines holding invalid UTF-8, or control characters outside batch lines."""
    odd_text = ~pl.col("kind").is_in(["decode", "prefill"]) & pl.col("message").str.contains(
        ODD_TEXT
    )
    return lines.filter(pl.col("odd") | odd_text)


Shape = tuple[str, tuple[str, ...]]
# Shapes of current SGLang releases, used when a file's sample shows none.
DEFAULT_SHAPES: tuple[Shape, ...] = (
    (
        "decode",
        ("#running-req", "#token", "token usage", "cuda graph", "gen throughput (token/s)",
         "#queue-req"),
    ),
    (
        "prefill",
        ("#new-seq", "#new-token", "#cached-token", "token usage", "#running-req", "#queue-req",
         "cuda graph", "input throughput (token/s)"),
    ),
)  # fmt: skip
MAX_SHAPES = 6
# A shape becomes columns of the plan: a line with more keys (or one key twice) is not a
# shape but an oddity, typed by the key-by-key tiers in time linear in its length.
MAX_SHAPE_KEYS = 48

# Message starts that make a line a startup fact; the rest of the kinds are settled later.
STARTUP_PREFIXES = (
    "Init torch distributed",
    "Load weight begin",
    "Load weight end",
    "KV Cache is allocated",
    "Memory pool end",
    "Capture ",
    "max_total_num_tokens=",
    "The server is fired up",
)
_ERROR = (
    r"Traceback \(most recent call last\)|^\s+File \"|^(?:WARNING|ERROR|CRITICAL)\b"
    r"|^[A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt)(?::|$)|Received sigquit"
    r"|hit an exception|^\s*(?:raise|assert) |^\s+\^+\s*$|:\d+: [A-Z]\w*Warning: "
)
_PROGRESS = r"\d+%\||it/s\]|s/it\]|\d+/\d+ \[\d\d:\d\d"
_LEVEL_SOURCE = r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+[\w./-]+\.py:\d+:\s+"


def sample_shapes(lines: Iterable[str]) -> list[Shape]:
    """The most frequent batch-line shapes in a sample of lines (at most ``MAX_SHAPES``)."""
    seen: Counter[Shape] = Counter()
    for line in lines:
        for word in ("Decode batch", "Prefill batch"):
            i = line.find(word)
            if i >= 0:
                shape = batch_shape(line[i:].rstrip())
                if shape is not None and len(set(shape[1])) == len(shape[1]) <= MAX_SHAPE_KEYS:
                    seen[shape] += 1
    shapes = [s for s, _ in seen.most_common(MAX_SHAPES)]
    return shapes or list(DEFAULT_SHAPES)


def line_plan(
    lines: pl.LazyFrame,
    wrapper: Wrapper,
    year: int | None,
    shapes: list[Shape],
    *,
    ansi: bool = True,
) -> pl.LazyFrame:
    """Per line: kind, timestamps, wrapper fields, rank text, message and typed batch fields.

    Each step materializes its intermediate columns once: the streaming engine does not share
    repeated sub-expressions.
    """
    raw = pl.col("line")
    lf = lines.with_columns(
        _line=raw.str.replace_all(_ANSI, "") if ansi else raw,
        # Invalid UTF-8 was read as U+FFFD; control characters are looked for later, on the
        # few non-batch lines only (a character-class scan of every line costs a tenth of the pass).
        odd=raw.str.contains("\ufffd", literal=True),
    )
    split = wrapper.split(pl.col("_line"), year)
    for marks in split.marks:
        lf = lf.with_columns(**marks)
    lf = lf.with_columns(
        _rest=split.rest, wrapper_ts=split.wrapper_ts, header=split.header, stream=split.stream
    )
    for step in _bracket(pl.col("_rest")):
        lf = lf.with_columns(**step)
    lf = lf.with_columns(**_stamp(pl.col("_content")))
    lf = lf.with_columns(**_gpu_and_message(pl.col("_msg")))
    lf = lf.with_columns(kind=_kind(pl.col("message"), raw))
    width = max(len(keys) for _, keys in shapes)
    lf = lf.with_columns(
        _parts=_tail(pl.col("message"), pl.col("kind"), trim=False).str.splitn(", ", width + 1)
    )
    lf = lf.with_columns(
        pl.col("_parts").struct.field(f"field_{i}").alias(f"_p{i}") for i in range(width + 1)
    )
    lf = lf.with_columns(**_shape_matches(shapes, width))
    lf = lf.with_columns(**_typed_by_shape(pl.col("message"), shapes))
    lf = lf.with_columns(unresolved=_unresolved(pl.col("kind"), shapes))
    return lf.select(pl.exclude("^_.*$", "line"))


def _bracket(rest: pl.Expr) -> list[dict[str, pl.Expr]]:
    """Steps that find SGLang's prefix anywhere in the line and cut the message after it.

    A line with no SGLang prefix but a batch header further in (an unknown logging format)
    keeps the text from the header on, so its batch is still typed.
    """
    at, header_at = pl.col("_at"), pl.col("_header_at")
    # find() counts bytes and slice() characters: cut as bytes so glued "███" bars stay exact.
    glued = byte_slice(rest, at)
    from_header = byte_slice(rest, header_at)
    inner = pl.col("_inner")
    close = inner.str.find("]", literal=True)
    headers = [rest.str.find(h, literal=True) for h in ("Decode batch", "Prefill batch")]
    return [
        {"_at": rest.str.find(BRACKET), "_header_at": pl.min_horizontal(headers)},
        {"_inner": pl.when(at > 0).then(glued).when(at == 0).then(rest)},
        {"_close": close},
        {
            "_content": inner.str.slice(1, pl.col("_close") - 1),
            "_msg": pl.coalesce(
                inner.str.slice(pl.col("_close") + 2),
                pl.when((header_at > 0) & ~rest.str.starts_with("[gpu")).then(from_header),
                rest,
            ),
            "has_prefix": at.is_not_null(),
            "glued": at > 0,  # text before the prefix: a tqdm bar, an unknown wrapper
        },
    ]


def _stamp(content: pl.Expr) -> dict[str, pl.Expr]:
    """``ts`` (dated prefix), ``clock`` (time-only prefix) and the rank text after them.

    SGLang prints milliseconds as exactly three digits (``%(msecs)03d``).
    """
    dated = content.str.slice(4, 1) == "-"
    clock_len = pl.when(dated).then(19).otherwise(8)
    has_ms = content.str.slice(clock_len, 1) == "."
    millis = content.str.slice(clock_len + 1, 3).cast(pl.Int64, strict=False)
    stamp = content.str.head(19).str.strptime(pl.Datetime("ms"), "%Y-%m-%d %H:%M:%S", strict=False)
    stamp = python_time(stamp)
    return {
        "ts": pl.when(dated).then(
            stamp + pl.duration(milliseconds=pl.when(has_ms).then(millis).otherwise(0))
        ),
        "clock": pl.when(~dated).then(content.str.head(8).str.to_time("%H:%M:%S", strict=False)),
        "ranks": content.str.slice(clock_len + pl.when(has_ms).then(4).otherwise(0)),
    }


def _gpu_and_message(msg: pl.Expr) -> dict[str, pl.Expr]:
    """The message without what some setups put in front of it.

    0.1.20/0.2.7 put the GPU into the message (``[gpu_id=0] Decode batch. ...``); a custom
    logging config may add a level and source (``INFO engine.py:177: server_args=...``), kept
    in ``level``.
    """
    gpu = msg.str.starts_with("[gpu")
    end = msg.str.find("] ", literal=True)
    message = pl.when(gpu & end.is_not_null()).then(msg.str.slice(end + 2)).otherwise(msg)
    return {
        "gpu_id": pl.when(gpu).then(
            msg.str.extract(r"^\[gpu(?:_id)?=(\d+)\] ").cast(pl.Int32, strict=False)
        ),
        "level": msg.str.extract(_LEVEL_SOURCE, 1),
        "message": message.str.replace(_LEVEL_SOURCE, ""),
    }


def _kind(msg: pl.Expr, raw: pl.Expr) -> pl.Expr:
    """The line's kind from its first characters; ``other`` is refined by ``refine_kind``."""
    startup = pl.any_horizontal(*(msg.str.starts_with(p) for p in STARTUP_PREFIXES))
    return (
        pl.when(raw.is_null() | (msg == ""))
        .then(pl.lit("blank"))
        .when(msg.str.starts_with("Decode batch"))
        .then(pl.lit("decode"))
        .when(msg.str.starts_with("Prefill batch"))
        .then(pl.lit("prefill"))
        .when(msg.str.starts_with("INFO:") & msg.str.contains(' - "', literal=True))
        .then(pl.lit("http"))
        .when(msg.str.starts_with("server_args="))
        .then(pl.lit("server_args"))
        .when(startup)
        .then(pl.lit("startup"))
        .when(
            pl.any_horizontal(*(msg.str.starts_with(p) for p in OVERRIDE_PREFIXES))
            | (msg.str.starts_with(REFUSED_PREFIX) & msg.str.contains(REFUSED_MARK))
        )
        .then(pl.lit("override"))
        .otherwise(pl.lit("other"))
    )


def refine_kind(message: pl.Expr, has_prefix: pl.Expr, level: pl.Expr) -> pl.Expr:
    """Kind of a line the fast pass called ``other``: error, marker, progress or other."""
    return (
        pl.when(message.str.contains(_ERROR) | level.is_in(["WARNING", "ERROR", "CRITICAL"]))
        .then(pl.lit("error"))
        .when(~has_prefix & message.str.starts_with("-- ") & message.str.ends_with(" --"))
        .then(pl.lit("marker"))
        .when(~has_prefix & message.str.contains(_PROGRESS))
        .then(pl.lit("progress"))
        .otherwise(pl.lit("other"))
    )


def _tail(msg: pl.Expr, kind: pl.Expr, *, trim: bool = True) -> pl.Expr:
    """``key: value, ...`` of a batch line (null elsewhere).

    The header is ``Decode batch`` then ``.``/``,`` (old/new), `` [forward_ct],`` or, for the
    0.2/0.3 mixed-chunk prefill, ``(mixed #running-req: N).``. Versions that end the line with
    ``", "`` leave an empty last part unless ``trim`` removes it.
    """
    after = pl.when(kind == "decode").then(12).otherwise(13)
    mark = msg.str.slice(after, 1)
    start = (
        pl.when(mark.is_in([".", ","]))
        .then(after + 2)
        .when(mark == " ")
        .then(msg.str.find("], ", literal=True) + 3)
        .when(mark == "(")
        .then(msg.str.find("). ", literal=True) + 3)
    )
    tail = msg.str.slice(start)
    if trim:
        tail = tail.str.strip_chars_end(", ")
    return pl.when(kind.is_in(["decode", "prefill"])).then(tail)


def _part(i: int) -> pl.Expr:
    return pl.col(f"_p{i}")


def _shape_matches(shapes: list[Shape], width: int) -> dict[str, pl.Expr]:
    """``_s{j}``: the line has exactly shape j's keys, in order.

    A line ending in ``", "`` (older versions) has an empty part after its last key.
    """
    matches = {}
    for j, (kind, keys) in enumerate(shapes):
        tests = [pl.col("kind") == kind]
        tests += [_part(i).str.starts_with(f"{k}: ") for i, k in enumerate(keys)]
        if len(keys) <= width:
            after = _part(len(keys))
            tests.append(after.is_null() | (after == ""))
        matches[f"_s{j}"] = pl.all_horizontal(*tests)
    return matches


def _typed(field_text: pl.Expr, key: str) -> pl.Expr:
    field = KEY_COLUMN[key]
    if field.dtype == pl.Boolean:
        return pl.when(field_text == "True").then(True).when(field_text == "False").then(False)
    if field.column.endswith("_pct"):
        field_text = field_text.str.strip_suffix("%")
    return field_text.cast(field.dtype, strict=False)


def _typed_by_shape(msg: pl.Expr, shapes: list[Shape]) -> dict[str, pl.Expr]:
    """Batch columns: the value text at the key's position in the matching shape, cast once."""
    by_key: dict[str, list[tuple[int, pl.Expr]]] = {}
    device: list[tuple[int, pl.Expr]] = []
    for j, (_, keys) in enumerate(shapes):
        for i, key in enumerate(keys):
            by_key.setdefault(key, []).append((j, _part(i).str.slice(len(key) + 2)))
            if key in GRAPH_LABELS:
                device.append((j, pl.lit(key.split()[0])))
    typed: dict[str, list[pl.Expr]] = {}
    for key, options in by_key.items():
        typed.setdefault(KEY_COLUMN[key].column, []).append(_typed(_chain(options), key))
    out = {c: v[0] if len(v) == 1 else pl.coalesce(v) for c, v in typed.items()}
    if device:
        out["graph_device"] = _chain(device)
    out.update(_header_numbers(msg))
    return out


def _chain(options: list[tuple[int, pl.Expr]]) -> pl.Expr:
    """The option of the first matching shape (``_s{j}``), else null."""
    chain = pl.when(pl.col(f"_s{options[0][0]}")).then(options[0][1])
    for j, value in options[1:]:
        chain = chain.when(pl.col(f"_s{j}")).then(value)
    return chain


def _unresolved(kind: pl.Expr, shapes: list[Shape]) -> pl.Expr:
    """A batch line that matched no shape, or whose value did not cast (``#token: 12x``)."""
    settled = [
        pl.col(f"_s{j}")
        & pl.all_horizontal(*(pl.col(KEY_COLUMN[k].column).is_not_null() for k in keys))
        for j, (_, keys) in enumerate(shapes)
    ]
    return kind.is_in(["decode", "prefill"]) & ~pl.any_horizontal(*settled)


def _header_numbers(msg: pl.Expr) -> dict[str, pl.Expr]:
    """``forward_ct`` (``Decode batch [N],``) and ``mixed_running_req`` (0.2/0.3 mixed chunk)."""
    fct = pl.coalesce(
        pl.when(msg.str.slice(12, 2) == " [").then(msg.str.extract(r"^Decode batch \[(\d+)\]")),
        pl.when(msg.str.slice(13, 2) == " [").then(msg.str.extract(r"^Prefill batch \[(\d+)\]")),
    )
    mixed = pl.when(msg.str.starts_with("Prefill batch(mixed")).then(
        msg.str.extract(r"^Prefill batch\(mixed #running-req: (\d+)\)")
    )
    return {
        "forward_ct": fct.cast(pl.Int64, strict=False),
        "mixed_running_req": mixed.cast(pl.Int64, strict=False),
    }


def type_by_key(lf: pl.LazyFrame, keys: Iterable[str]) -> pl.LazyFrame:
    """Type batch messages key by key (any order, any subset); ``unresolved`` where unsure.

    The second tier, for lines whose shape was not sampled: one literal-prefixed extract per
    key, so it suits any key order but costs more per line than the positional plan.
    """
    msg = pl.col("message")
    lf = lf.with_columns(_tail=_tail(msg, pl.col("kind")))
    ordered = sorted(set(keys))
    texts = {
        f"_k{i}": pl.concat_str(pl.lit(", "), pl.col("_tail")).str.extract(
            f", {re.escape(k)}: ([^,]*)"
        )
        for i, k in enumerate(ordered)
    }
    lf = lf.with_columns(**texts)
    by_column: dict[str, list[pl.Expr]] = {}
    found, broken = [], []
    for i, key in enumerate(ordered):
        text = pl.col(f"_k{i}")
        value = _typed(text, key)
        found.append(text.is_not_null().cast(pl.Int32))
        broken.append(text.is_not_null() & value.is_null())
        by_column.setdefault(KEY_COLUMN[key].column, []).append(value)
        if key in GRAPH_LABELS:
            by_column.setdefault("graph_device", []).append(
                pl.when(text.is_not_null()).then(pl.lit(key.split()[0]))
            )
    typed = {c: (v[0] if len(v) == 1 else pl.coalesce(v)) for c, v in by_column.items()}
    parts = pl.col("_tail").str.count_matches(", ", literal=True) + 1
    n_found = pl.sum_horizontal(*found) if found else pl.lit(0)
    settled = (pl.col("_tail") != "") & (n_found == parts)
    if broken:
        settled = settled & ~pl.any_horizontal(*broken)
    lf = lf.with_columns(**typed, **_header_numbers(msg), unresolved=~settled.fill_null(False))
    return lf.select(pl.exclude("^_.*$"))
