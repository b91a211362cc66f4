"""Property tests: mutated request records never raise anything but ``ParseError`` and never
lose a line (every non-blank line is a row or a counted skip)."""

from __future__ import annotations

from pathlib import Path

from helpers import TEST_DATA
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit import load_sglang_log
from toolkit.errors import ParseError
from toolkit.load.requests import load_server_requests

DATA = TEST_DATA / "requests"
SEEDS = [
    line
    for name in ("sglang-request-metrics-20251120_14.log", "gpu-node-3_0.log")
    for line in (DATA / name).read_text().splitlines()
] + (DATA / "server-request-lines.log").read_text().splitlines()[3:]
SETTINGS = settings(max_examples=40, deadline=None)


@st.composite
def mutated(draw) -> str:
    line = draw(st.sampled_from(SEEDS))
    op = draw(st.sampled_from(["cut", "insert", "delete", "keep"]))
    at = draw(st.integers(0, len(line)))
    if op == "cut":
        return line[:at]
    if op == "insert":
        junk = draw(st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=8))
        return line[:at] + junk + line[at:]
    if op == "delete":
        return line[:at] + line[at + draw(st.integers(1, 20)) :]
    return line


@SETTINGS
@given(st.lists(mutated(), min_size=1, max_size=12), st.booleans())
def test_request_file_accounts_for_every_line(
    tmp_path_factory, lines: list[str], strict: bool
) -> None:
    path = Path(tmp_path_factory.mktemp("req")) / "r.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        got = load_server_requests(path, strict=strict)
    except ParseError:
        assert strict
        return
    nonblank = sum(1 for line in lines if line.strip())
    assert got.lines == nonblank
    assert got.table.height + sum(got.skipped.values()) == nonblank


@SETTINGS
@given(st.lists(mutated(), min_size=1, max_size=12))
def test_log_request_rows_match_their_counted_lines(tmp_path_factory, lines: list[str]) -> None:
    path = Path(tmp_path_factory.mktemp("log")) / "server.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    log = load_sglang_log(path, cache=False)
    counts = log.request_counts()
    finished = sum(counts.get(k, 0) for k in ("time-stats", "finish", "log-json"))
    assert log.requests.height == finished
    assert log.coverage()["lines"] == len(lines)
