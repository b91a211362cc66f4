"""Redaction: secret ServerArgs fields, launch flags, URL credentials; nothing else touched."""

from __future__ import annotations

import json

import pytest

from toolkit.report.redact import (
    REDACTED,
    escape,
    is_secret_key,
    redact_args,
    redact_text,
    scrub,
    secrets_in_args,
    secrets_in_command,
)


@pytest.mark.parametrize(
    "name",
    ["api_key", "admin_api_key", "hf_token", "auth_token", "client_secret", "db_password",
     "ssl_keyfile_password", "--api-key", "--hf-token", "aws_secret_access_key"],
)  # fmt: skip
def test_secret_names(name: str) -> None:
    assert is_secret_key(name)


@pytest.mark.parametrize(
    "name",
    ["max_total_num_tokens", "tokenizer_path", "skip_tokenizer_init", "max_prefill_tokens",
     "num_reserved_decode_tokens", "ssl_keyfile", "sort_key", "tp_size"],
)  # fmt: skip
def test_ordinary_names(name: str) -> None:
    assert not is_secret_key(name)


def test_redact_args_keeps_numbers_and_paths() -> None:
    args = {
        "api_key": "sk-abc",
        "admin_api_key": None,
        "max_total_num_tokens": 480000,
        "tokenizer_path": "/models/k",
        "nested": {"hf_token": "hf_x", "dist_init_addr": "tcp://u:p@10.0.0.1:5000"},
    }
    out = redact_args(args)
    assert out["api_key"] == REDACTED and out["admin_api_key"] is None
    assert out["max_total_num_tokens"] == 480000 and out["tokenizer_path"] == "/models/k"
    assert out["nested"]["hf_token"] == REDACTED
    assert out["nested"]["dist_init_addr"] == f"tcp://{REDACTED}@10.0.0.1:5000"
    assert secrets_in_args(args) == {"sk-abc", "hf_x"}


def test_redact_text_forms() -> None:
    text = (
        "server_args=ServerArgs(api_key='sk-live-0123456789abcdef', tp_size=8, "
        "max_total_num_tokens=1000) {'password': 'hunter22'} "
        "--api-key flagvalue123 --port 30000 http://bob:pw@host/x Bearer abcdefghijkl"
    )
    out = redact_text(text)
    for secret in (
        "sk-live-0123456789abcdef",
        "hunter22",
        "flagvalue123",
        "bob:pw",
        "abcdefghijkl",
    ):
        assert secret not in out
    assert "tp_size=8" in out and "max_total_num_tokens=1000" in out and "--port 30000" in out


def test_batch_lines_survive() -> None:
    line = "Decode batch, #running-req: 32, #token: 50112, token usage: 0.10, #new-token: 8192"
    assert redact_text(line) == line


def test_secrets_in_command() -> None:
    cmd = "python -m sglang.launch_server --api-key abc123xyz --admin-api-key=zzz999 --tp 8"
    assert secrets_in_command(cmd) == {"abc123xyz", "zzz999"}


def test_scrub_escaped_forms() -> None:
    secret = 'p<a"ss&word'
    html = f"{escape(secret)} {json.dumps(secret)} {secret}"
    out = scrub(html, {secret})
    assert "ss&" not in out and "ss&amp;" not in out and out.count(REDACTED) == 3
    assert scrub("short abc", {"abc"}) == "short abc", "short values are never replaced blindly"


def test_escape() -> None:
    assert escape("<script>x</script>") == "&lt;script&gt;x&lt;/script&gt;"
    assert escape(None) == ""
