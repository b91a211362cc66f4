"""Every finding's text stays readable: bounded length, no runaway lists, no cut sentence.

Runs over every finding diagnosed on the sample incident (``data/incident``) and on every
scenario of the independent family (``helpers.scenarios``).
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from helpers import SAMPLE
from helpers.scenarios import build, names

from toolkit.diagnose import Finding, diagnose
from toolkit.diagnose.prose import loads
from toolkit.run_analysis import RunAnalysis

LIMITS = {"title": 160, "summary": 1500, "remedy": 600}
"""Characters a finding's title, summary and remedy may hold."""

MAX_REPEAT = 5
"""The same word (or list item) this many times in a row is a runaway list."""

_END = re.compile(r"[.!?][)\"'”]?$")


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Finding]]:
    """Case → its findings: the sample's three runs and every scenario, diagnosed once."""
    root = tmp_path_factory.mktemp("prose")
    dirs = {f"sample/{d.name}": d for d in sorted(SAMPLE.iterdir()) if d.is_dir()}
    dirs |= {name: build(name, root / name) for name in names()}
    return {case: diagnose([RunAnalysis(Path(d))]) for case, d in dirs.items()}


def _problems(f: Finding) -> list[str]:
    out = []
    for part, limit in LIMITS.items():
        text = getattr(f, part) or ""
        if len(text) > limit:
            out.append(f"{part} holds {len(text)} characters (> {limit})")
        # list items are separated by ", "; a value such as a layer partition (4,4,4,...) is
        # one word, exact as the user will paste it
        words = [w for w in re.split(r"[\s;]+|,\s+", text) if w]
        run = 1
        for a, b in itertools.pairwise(words):
            run = run + 1 if a == b else 1
            if run > MAX_REPEAT:
                out.append(f"{part} repeats {a!r} more than {MAX_REPEAT} times in a row")
                break
        if "…" in text or "..." in text:
            out.append(f"{part} is cut: {text[-60:]!r}")
        if part != "title" and text and not _END.search(text.rstrip()):
            out.append(f"{part} ends mid-sentence: {text[-60:]!r}")
    return out


def test_every_finding_of_the_sample_and_the_scenarios_reads_as_whole_sentences(
    findings: dict[str, list[Finding]],
) -> None:
    assert any(case.startswith("sample/") for case in findings) and len(findings) > 10
    bad = {
        f"{case}: {f.id}": problems
        for case, found in findings.items()
        for f in found
        if (problems := _problems(f))
    }
    assert not bad, bad
    assert sum(len(found) for found in findings.values()) > 40  # the check saw real texts


def test_a_check_catches_what_it_is_for() -> None:
    """The checks themselves: a runaway list, a cut sentence and an overlong title fail."""
    runaway = Finding("x", "info", "t", "At " + "64, " * 1191 + "requests.", None, "r.")
    cut = Finding("x", "info", "t", "It costs 30 % at 32 requests; a static cap trades", None, "r.")
    long = Finding("x", "info", "t" * 200, "s.", None, "r.")
    assert any("repeats '64'" in p for p in _problems(runaway))
    assert any("mid-sentence" in p for p in _problems(cut))
    assert any("title holds 200" in p for p in _problems(long))


def test_lists_are_summarized_not_repeated() -> None:
    assert loads([64] * 1191, " requests", "windows") == "64 requests in 1,191 windows"
    assert loads([32, 64, 32], " requests") == "32, 64 requests"
    assert loads(range(1, 11)) == "1, 2, 3, 4, 5, 6 and 4 more"
