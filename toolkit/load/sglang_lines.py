"""The streaming plan that types every line of one SGLang log file.

One lazy polars query per file: cut the wrapper (journald, docker, ...), find SGLang's
``[date time RANKS]`` bracket anywhere in the line (tqdm bars and fences may be glued in front),
classify the message with literal prefix tests, and type the batch fields with literal
``find``/``slice``. No capture regex runs over every line; the few lines the plan cannot settle
are flagged ``unresolved`` and typed afterwards by the Python reference reader.
"""

from __future__ import annotations

import re

import polars as pl

from toolkit.load.batch_line import GRAPH_LABELS, KEY_COLUMN
from toolkit.load.wrappers import Wrapper

# SGLang's prefix: [2025-05-25 21:40:21(.123)( DP0 PP3 TP0 ...)] — or time only (0.2.15–0.3.0).
BRACKET = (
    r"\[(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?:\.\d{1,6})?"
    r"(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*\]"
)
_ANSI = r"\x1b\[[0-9;?]*[A-Za-z]"

# Keys always typed by the fast path; others only when a file's first lines show them.
CORE_KEYS = (
    "#new-seq",
    "#new-token",
    "#cached-token",
    "token usage",
    "#running-req",
    "#queue-req",
    "#token",
    "cuda graph",
    "gen throughput (token/s)",
    "input throughput (token/s)",
)
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
    r"|hit an exception|^\s*(?:raise|assert) |^\s+\^+\s*$"
)
_PROGRESS = r"\d+%\||it/s\]|s/it\]|\d+/\d+ \[\d\d:\d\d"
_ERROR_WORDS = [
    "Traceback",
    'File "',
    "WARNING",
    "ERROR",
    "CRITICAL",
    "Error",
    "Exception",
    "Warning",
    "Interrupt",
    "sigquit",
    "exception",
    "raise ",
    "assert ",
    "^",
]
_PROGRESS_WORDS = ["%|", "it/s]", "s/it]", "<"]
_KEY_IN_SAMPLE = re.compile(r"(?:, |\. |^)([#A-Za-z][^:,]*?): ")


def sample_keys(lines: list[str]) -> set[str]:
    """Batch-line keys seen in a sample of lines, limited to the keys ppscope knows."""
    keys: set[str] = set()
    for line in lines:
        i = line.find(" batch")
        if i < 0 or ("Decode" not in line and "Prefill" not in line):
            continue
        keys.update(k for k in _KEY_IN_SAMPLE.findall(line[i:]) if k in KEY_COLUMN)
    return keys


def line_plan(
    lines: pl.LazyFrame,
    wrapper: Wrapper,
    year: int | None,
    keys: set[str],
    *,
    ansi: bool = True,
) -> pl.LazyFrame:
    """Per line: kind, timestamps, wrapper fields, rank text, message and typed batch fields.

    Each step materializes its intermediate columns once (the streaming engine does not share
    repeated sub-expressions), and expensive steps run only where they can matter.
    """
    raw = pl.col("line")
    text = raw.str.replace_all(_ANSI, "") if ansi else raw
    lf = lines.with_columns(_line=text.str.strip_chars_end())
    split = wrapper.split(pl.col("_line"), year)
    lf = lf.with_columns(
        _rest=split.rest, wrapper_ts=split.wrapper_ts, header=split.header, stream=split.stream
    )
    rest = pl.col("_rest")
    lf = lf.with_columns(_at=rest.str.find(BRACKET))
    at = pl.col("_at")
    # find() counts bytes and slice() characters: cut as bytes so glued "███" bars stay exact.
    inner = (
        pl.when(at == 0).then(rest).otherwise(rest.cast(pl.Binary).bin.slice(at).cast(pl.String))
    )
    lf = lf.with_columns(_inner=inner).with_columns(
        _close=pl.col("_inner").str.find("]", literal=True)
    )
    inner, close = pl.col("_inner"), pl.col("_close")
    lf = lf.with_columns(
        _content=inner.str.slice(1, close - 1),
        _msg=pl.when(at.is_not_null()).then(inner.str.slice(close + 2)).otherwise(rest),
    )
    content = pl.col("_content")
    lf = lf.with_columns(
        _dated=content.str.slice(4, 1) == "-",
        _frac=content.str.slice(19, 1) == ".",
        _tfrac=content.str.slice(8, 1) == ".",
    )
    dated, clock_len = pl.col("_dated"), pl.when(pl.col("_dated")).then(19).otherwise(8)
    has_ms = pl.when(dated).then(pl.col("_frac")).otherwise(pl.col("_tfrac"))
    fraction = content.str.slice(clock_len + 1, 7)
    ms_len = pl.when(has_ms).then(
        fraction.str.find(" ", literal=True).fill_null(fraction.str.len_chars())
    )
    ms_text = fraction.str.head(ms_len).str.pad_end(3, "0").str.head(3)
    stamp = content.str.head(19).str.strptime(pl.Datetime("ms"), "%Y-%m-%d %H:%M:%S", strict=False)
    msg = pl.col("_msg")
    lf = lf.with_columns(
        ts=pl.when(dated).then(
            stamp + pl.duration(milliseconds=ms_text.cast(pl.Int64, strict=False).fill_null(0))
        ),
        clock=pl.when(~dated).then(content.str.head(8).str.to_time("%H:%M:%S", strict=False)),
        ranks=content.str.slice(clock_len + (ms_len + 1).fill_null(0)),
        has_prefix=at.is_not_null(),
        # 0.1.20/0.2.7 put the GPU into the message: "[gpu_id=0] Decode batch. ..."
        _gpu=msg.str.starts_with("[gpu"),
    )
    gpu = pl.col("_gpu")
    gpu_end = msg.str.find("] ", literal=True)
    lf = lf.with_columns(
        gpu_id=pl.when(gpu).then(
            msg.str.extract(r"^\[gpu(?:_id)?=(\d+)\] ").cast(pl.Int32, strict=False)
        ),
        message=pl.when(gpu & gpu_end.is_not_null())
        .then(msg.str.slice(gpu_end + 2))
        .otherwise(msg),
    )
    lf = lf.with_columns(kind=_kind(pl.col("message"), pl.col("has_prefix"), raw))
    lf = lf.with_columns(_body=_body(pl.col("message"), pl.col("kind")))
    for step in _batch_fields(pl.col("message"), pl.col("_body"), keys):
        lf = lf.with_columns(**step)
    return lf.select(pl.exclude("^_k\\d+$")).drop(
        "line",
        "_line",
        "_rest",
        "_at",
        "_inner",
        "_close",
        "_content",
        "_msg",
        "_dated",
        "_frac",
        "_tfrac",
        "_gpu",
        "_body",
    )


def _kind(msg: pl.Expr, has_prefix: pl.Expr, raw: pl.Expr) -> pl.Expr:
    head = msg.str.head(24)
    return (
        pl.when(raw.is_null() | (msg == ""))
        .then(pl.lit("blank"))
        .when(head.str.starts_with("Decode batch"))
        .then(pl.lit("decode"))
        .when(head.str.starts_with("Prefill batch"))
        .then(pl.lit("prefill"))
        .when(head.str.starts_with("server_args="))
        .then(pl.lit("server_args"))
        .when(
            head.str.contains_any(list(STARTUP_PREFIXES)) & _starts_with_any(msg, STARTUP_PREFIXES)
        )
        .then(pl.lit("startup"))
        .when(head.str.starts_with("INFO:") & msg.str.contains(' - "', literal=True))
        .then(pl.lit("http"))
        .when(msg.str.contains_any(_ERROR_WORDS) & msg.str.contains(_ERROR))
        .then(pl.lit("error"))
        .when(~has_prefix & msg.str.starts_with("-- ") & msg.str.ends_with(" --"))
        .then(pl.lit("marker"))
        .when(~has_prefix & msg.str.contains_any(_PROGRESS_WORDS) & msg.str.contains(_PROGRESS))
        .then(pl.lit("progress"))
        .otherwise(pl.lit("other"))
    )


def _starts_with_any(msg: pl.Expr, prefixes: tuple[str, ...]) -> pl.Expr:
    return pl.any_horizontal(*(msg.str.starts_with(p) for p in prefixes))


def _body(msg: pl.Expr, kind: pl.Expr) -> pl.Expr:
    """``, key: value, ...`` of a batch line (null elsewhere), trailing separator removed.

    The header is ``Decode batch`` then ``.``/``,`` (old/new), `` [forward_ct],`` or, for the
    0.2/0.3 mixed-chunk prefill, ``(mixed #running-req: N).``.
    """
    after = pl.when(kind == "decode").then(12).otherwise(13)
    mark = msg.str.slice(after, 1)
    start = (
        pl.when(mark.is_in([".", ","]))
        .then(after + 1)
        .when(mark == " ")
        .then(msg.str.find("], ", literal=True) + 2)
        .when(mark == "(")
        .then(msg.str.find("). ", literal=True) + 2)
    )
    body = pl.concat_str(pl.lit(", "), msg.str.slice(start).str.strip_chars_start(" "))
    return pl.when(kind.is_in(["decode", "prefill"])).then(body.str.strip_chars_end(", "))


def _batch_fields(msg: pl.Expr, body: pl.Expr, keys: set[str]) -> list[dict[str, pl.Expr]]:
    """Steps that type the batch columns and set ``unresolved`` where Python must decide."""
    ordered = sorted(set(CORE_KEYS) | keys)
    texts = {
        f"_k{i}": body.str.extract(f", {re.escape(k)}: ([^,]*)") for i, k in enumerate(ordered)
    }
    found: list[pl.Expr] = []
    broken: list[pl.Expr] = []
    by_column: dict[str, list[pl.Expr]] = {}
    for i, key in enumerate(ordered):
        field, text = KEY_COLUMN[key], pl.col(f"_k{i}")
        if field.dtype == pl.Boolean:
            value = pl.when(text == "True").then(True).when(text == "False").then(False)
        elif field.column.endswith("_pct"):
            value = text.str.strip_suffix("%").cast(field.dtype, strict=False)
        else:
            value = text.cast(field.dtype, strict=False)
        found.append(text.is_not_null())
        broken.append(text.is_not_null() & value.is_null())
        by_column.setdefault(field.column, []).append(value)
        if key in GRAPH_LABELS:
            by_column.setdefault("graph_device", []).append(
                pl.when(text.is_not_null()).then(pl.lit(key.split()[0]))
            )
    typed = {c: (v[0] if len(v) == 1 else pl.coalesce(v)) for c, v in by_column.items()}
    n_found = pl.sum_horizontal(*(f.cast(pl.Int32) for f in found))
    parts = body.str.count_matches(", ", literal=True)
    is_batch = msg.str.starts_with("Decode batch") | msg.str.starts_with("Prefill batch")
    typed["unresolved"] = is_batch & (
        body.is_null() | (parts == 0) | (n_found != parts) | pl.any_horizontal(*broken)
    )
    typed["forward_ct"] = (
        pl.when(body.is_not_null() & (msg.str.slice(12, 2) == " ["))
        .then(msg.str.extract(r"^Decode batch \[(\d+)\]").cast(pl.Int64, strict=False))
        .when(body.is_not_null() & (msg.str.slice(13, 2) == " ["))
        .then(msg.str.extract(r"^Prefill batch \[(\d+)\]").cast(pl.Int64, strict=False))
    )
    typed["mixed_running_req"] = pl.when(msg.str.starts_with("Prefill batch(mixed")).then(
        msg.str.extract(r"^Prefill batch\(mixed #running-req: (\d+)\)").cast(pl.Int64, strict=False)
    )
    return [texts, typed]
