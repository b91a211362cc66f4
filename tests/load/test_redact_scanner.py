"""The one redactor: signed URLs, whitespace between key and value, values found once and
removed wherever they recur, long-form records that name a secret."""

from __future__ import annotations

import pytest

from toolkit.load.redact import (
    REDACTED,
    redact_text,
    redact_value,
    scrub,
    secrets_in_text,
)


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("https://b.s3.amazonaws.com/m.bin?X-Amz-Algorithm=AWS4-HMAC-SHA256"
         "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260501%2Fus-east-1%2Fs3%2Faws4_request"
         "&X-Amz-Security-Token=FwoGZXIvYXdzEBYaDHqa0AP&X-Amz-Signature=4f2a9c0e1b7d"
         "&X-Amz-Expires=3600", "4f2a9c0e1b7d"),
        ("https://d111.cloudfront.net/m.bin?Expires=1777777777&Signature=Nm8q~Zr0-xY_"
         "&Key-Pair-Id=K2JCJMDEHXQW5F", "Nm8q~Zr0-xY_"),
        ("https://acct.blob.core.windows.net/models/m.bin?sv=2022-11-02&ss=b&sig=Ab3%2Bk9%3D"
         "&se=2026-05-02", "Ab3%2Bk9%3D"),
    ],
)  # fmt: skip
def test_signed_url_parameters_are_redacted(url: str, secret: str) -> None:
    out = redact_text(f"downloading {url} ...")
    assert secret not in out and "AKIAIOSFODNN7EXAMPLE" not in out and "FwoGZXIv" not in out
    assert "X-Amz-Expires=3600" in out or "Key-Pair-Id=K2" in out or "se=2026-05-02" in out
    assert secret in secrets_in_text(url)


@pytest.mark.parametrize(
    "line",
    ["api_key\tQm7pZr41xv", "api_key:\tQm7pZr41xv", "api_key =\t\tQm7pZr41xv",
     "--api-key\tQm7pZr41xv", "password \t Qm7pZr41xv"],
)  # fmt: skip
def test_any_whitespace_between_key_and_value(line: str) -> None:
    assert "Qm7pZr41xv" not in redact_text(line)


@pytest.mark.parametrize(
    "line",
    ["password was wrong, retrying", "#token: 1234, token usage: 0.95", "api_key\tNone"],
)
def test_prose_and_counts_after_a_key_stay(line: str) -> None:
    assert redact_text(line) == line


def test_a_value_seen_once_is_removed_where_it_recurs_without_its_key() -> None:
    seen = secrets_in_text("python -m sglang.launch_server --api-key Zx81TokenV")
    assert seen == {"Zx81TokenV"}
    assert (
        redact_text("request from Zx81TokenV rejected", seen) == f"request from {REDACTED} rejected"
    )


def test_numbers_are_never_scrubbed_blindly() -> None:
    assert scrub("max_total_num_tokens 4800001", {"480000"}) == "max_total_num_tokens 4800001"


def test_a_record_naming_a_secret_setting_has_its_values_redacted() -> None:
    rows = [
        {"flag": "api_key", "intended": '"abc"', "effective": '"def"', "note": "as logged"},
        {"flag": "tp_size", "intended": "8", "effective": "1", "note": "as logged"},
    ]
    out = redact_value(rows)
    assert out[0] == {"flag": "api_key", "intended": REDACTED, "effective": REDACTED,
                      "note": "as logged"}  # fmt: skip
    assert out[1] == rows[1]
