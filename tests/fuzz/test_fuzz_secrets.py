"""Secrets planted in any input, after any key spelling and separator: no command output (diagnose
text, markdown, JSON) holds them. The report and the Perfetto trace have their planted test in
``tests/report`` and ``tests/cli``."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
from helpers import TEST_DATA
from helpers.fuzz import budget
from hypothesis import given
from hypothesis import strategies as st

from toolkit.cli.main import main

pytestmark = pytest.mark.fuzz

RUN = TEST_DATA / "diagnose" / "pp8-not-applied"
FORMS = ([], ["--format", "markdown"], ["--json"])
KEYS = ("api_key", "hf_token", "admin_api_key", "db_password", "X-Amz-Signature", "sig")
SEPARATORS = ("=", ": ", ":\t", "\t", " = ", "=\t")

secrets = st.text(
    alphabet="ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789_-", min_size=12, max_size=40
).filter(lambda s: any(c.isdigit() for c in s) and any(c.isalpha() for c in s) and s[0] != "-")


def _plant(run: Path, where: str, key: str, sep: str, secret: str) -> None:
    log = run / "server.log"
    lines = log.read_text().splitlines()
    if where == "server_args":
        lines[0] = lines[0].replace("'port': 30000,", f"'port': 30000, '{key}': '{secret}',")
    elif where == "log line":
        lines.insert(2, f"[2026-05-01 10:05:00] WARNING: upstream refused {key}{sep}{secret}")
    elif where == "echoed command":
        flag = "--" + key.lower().replace("_", "-")
        lines.insert(0, f"[2026-05-01 10:00:00] python -m sglang.launch_server {flag} {secret}")
    elif where == "run.toml":
        toml = run / "run.toml"
        flag = "--" + key.lower().replace("_", "-")
        toml.write_text(toml.read_text().replace('size 4"', f'size 4 {flag} {secret}"'))
    elif where == "server_info":
        call = {"ts": "2026-05-01T10:05:30.000", "phase": None, "when": "start",
                "endpoint": "/server_info", "info": {"pp_size": 8, key: secret}}  # fmt: skip
        (run / "server_info.jsonl").write_text(json.dumps(call) + "\n")
    elif where == "bench command":
        bench = run / "bench.jsonl"
        record = json.loads(bench.read_text())
        command = f"python -m sglang.bench_serving --backend sglang {key}{sep}{secret}"
        bench.write_text(json.dumps({**record, "command": command}) + "\n")
    log.write_text("\n".join(lines) + "\n")


@budget(4)
@given(
    where=st.sampled_from(
        ("server_args", "log line", "echoed command", "run.toml", "server_info", "bench command")
    ),
    key=st.sampled_from(KEYS),
    sep=st.sampled_from(SEPARATORS),
    secret=secrets,
    form=st.sampled_from(FORMS),
)
def test_no_output_holds_a_planted_secret(
    tmp_path_factory: pytest.TempPathFactory,
    where: str,
    key: str,
    sep: str,
    secret: str,
    form: list[str],
) -> None:
    run = Path(shutil.copytree(RUN, tmp_path_factory.mktemp("secrets") / "run"))
    _plant(run, where, key, sep, secret)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["diagnose", "-q", str(run), *form])
    assert code in (0, 1), err.getvalue()
    assert secret not in out.getvalue() + err.getvalue(), (where, key, sep)
    shutil.rmtree(run.parent, ignore_errors=True)
