"""Redaction: secret ServerArgs fields, launch flags, URL credentials; nothing else touched."""

from __future__ import annotations

import json

import pytest

from toolkit.report.redact import (
    REDACTED,
    escape,
    is_secret_key,
    redact_args,
    redact_html,
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
     "num_reserved_decode_tokens", "ssl_keyfile", "sort_key", "tp_size", "token_usage",
     "new_token_ratio", "token_count"],
)  # fmt: skip
def test_ordinary_names(name: str) -> None:
    assert not is_secret_key(name)


def test_a_chart_tooltip_expression_survives() -> None:
    # Vega-Lite writes a tooltip as an expression naming its fields; mangling it breaks the chart.
    spec = '{"expr": "\\"; token_usage: \\" + (format(datum[\\"token_usage\\"], \\".0%\\"))"}'
    assert redact_text(spec) == spec
    assert redact_html(f"<script>{spec}</script>") == f"<script>{spec}</script>"


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


# ----------------------------------------------------------------------------- the corpus
# (line, secrets that must be gone)
SECRETS_IN_FREE_TEXT = [
    ("ERROR: password=hunter2pass", ["hunter2pass"]),
    ("[2026-01-01 10:00:00] ERROR: password=hunter2pass in config", ["hunter2pass"]),
    ("WARNING: retrying with api_key=sk-live-9f8e7d6c5b4a in 5s", ["sk-live-9f8e7d6c5b4a"]),
    ("WARNING: retrying with api_key=plainvalue42 now", ["plainvalue42"]),
    ("request headers: x-api-key: abcd1234efgh", ["abcd1234efgh"]),
    ("X-Api-Key=topsecretvalue", ["topsecretvalue"]),
    ("connecting to redis://:s3cretpw@cache.local:6379/0", ["s3cretpw"]),
    ("connecting to redis://default:s3cretpw@cache.local:6379/0", ["s3cretpw", "default"]),
    ("postgres://admin:pa/ss@word@db.internal:5432/app", ["pa/ss@word", "admin"]),
    ("mongodb://u:p@ss@w0rd@10.0.0.5/db?x=1", ["p@ss@w0rd"]),
    ("https://ghp_abcdefabcdefabcdefabcdefabcdef123456@github.com/org/repo", ["ghp_abcdef"]),
    ("Authorization: Token 8c1f2e3d4c5b6a7f", ["8c1f2e3d4c5b6a7f"]),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", ["dXNlcjpwYXNzd29yZA=="]),
    ("headers={'Authorization': 'Bearer abc.def.ghi123', 'x': 1}", ["abc.def.ghi123"]),
    ('{"authorization": "Token zzz999yyy888"}', ["zzz999yyy888"]),
    ('password="correct horse battery staple"', ["correct horse", "battery staple"]),
    ("password='correct horse battery staple' user=bob", ["correct horse"]),
    ("secret=-leadingdash99", ["-leadingdash99", "leadingdash99"]),
    ("--api-key -dashvalue7", ["dashvalue7"]),
    ("passphrase=open sesame", ["open"]),
    ("private_key=MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", ["MIIEvQIBADANBgkq"]),
    ("Cookie: session=abc123def456; theme=dark", ["abc123def456", "theme=dark"]),
    ("Set-Cookie: sid=Zm9vYmFy42; Path=/; HttpOnly", ["Zm9vYmFy42"]),
    ("loaded hf_abcdefghijklmnopqrstuvwxyz0123456789 from env", ["hf_abcdefghijklmnop"]),
    (
        "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        ["eyJhbGci", "dozjgNry"],
    ),
    ("using token 4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a99 for hub", ["4f3c2b1a0e9d8c7b"]),
    ("the secret is Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5", ["Zm9vYmFyYmF6"]),
    ("AWS key AKIAIOSFODNN7EXAMPLE in use", ["AKIAIOSFODNN7EXAMPLE"]),
    ("slack xoxb-1234567890-abcdefghij", ["xoxb-1234567890"]),
    (
        "server_args=ServerArgs(tp_size=8, api_key='k3y-v4lue', hf_token='hf_zz')",
        ["k3y-v4lue", "hf_zz"],
    ),
    ('{\\"api_key\\": \\"json-escaped-1\\"}', ["json-escaped-1"]),
    ("apiKey: camelCaseSecret1", ["camelCaseSecret1"]),
    ("clientSecret=cs-123-abc", ["cs-123-abc"]),
    ("db_password: 123456", ["123456"]),
    ("OPENAI_API_KEY=sk-proj-abcdefghijklmnop1234", ["sk-proj-abcdefgh"]),
    ("auth_token=\ttabbed99", ["tabbed99"]),
    ("--hf-token=hf_qwertyuiopasdfghjklzxcvbnm0123456789", ["hf_qwertyuiop"]),
]

# lines that hold no secret and must come out unchanged
NOT_SECRETS = [
    "Decode batch, #running-req: 32, #token: 50112, token usage: 0.10, #new-token: 8192",
    "[2026-05-25 21:40:21 PP3] Decode batch, #running-req: 8, #token: 1234, token usage: 0.95, "
    "cuda graph: True, gen throughput (token/s): 248.10, #queue-req: 0",
    "Prefill batch, #new-seq: 4, #new-token: 8192, #cached-token: 0, token usage: 0.12, "
    "#running-req: 8, #queue-req: 2",
    "max_total_num_tokens=327680, chunked_prefill_size=8192, max_prefill_tokens=16384",
    "tokenizer_path=/models/Kimi-K2, tokenizer_mode='auto', skip_tokenizer_init=False",
    "server_args=ServerArgs(model_path='/m/k2', api_key=None, hf_token=None, tp_size=8)",
    "{'api_key': None, 'admin_api_key': null, 'ssl_keyfile_password': None}",
    "#running-req: 8",
    "token usage: 0.95",
    "#token: 1234",
    "KV cache pool: max_total_num_tokens=480000, token_to_kv_pool: 480000",
    "POST /v1/chat/completions HTTP/1.1 200 OK",
    "uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
    "see https://docs.sglang.ai/backend/server_arguments.html#api-key for details",
    "file at https://host:8080/a@b.txt",
    "email bob@example.com about it",
    "basic functionality works, bearer of bad news",
    "api_key=$OPENAI_API_KEY and password=${DB_PASSWORD}",
    "token_budget: 4096, num_tokens=512, tokens=42",
    "The server is fired up and ready to roll!",
    "torch.distributed: init_method=tcp://10.0.0.1:5000",
    "sort_key=lineno, lora_keys=[]",
    "Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32]",
    "password: [redacted]",
]


@pytest.mark.parametrize(("line", "secrets"), SECRETS_IN_FREE_TEXT)
def test_secrets_in_free_text_are_redacted(line: str, secrets: list[str]) -> None:
    out = redact_text(line)
    for secret in secrets:
        assert secret not in out, out
    assert REDACTED in out


@pytest.mark.parametrize("line", NOT_SECRETS)
def test_ordinary_log_text_survives(line: str) -> None:
    assert redact_text(line) == line


def test_redaction_is_idempotent() -> None:
    for line, _ in SECRETS_IN_FREE_TEXT:
        once = redact_text(line)
        assert redact_text(once) == once


def test_the_key_before_a_secret_keeps_its_text() -> None:
    assert redact_text("WARNING: retrying with api_key=abc123") == (
        "WARNING: retrying with api_key=[redacted]"
    )
    assert redact_text("tcp://u:p@10.0.0.1:5000") == "tcp://[redacted]@10.0.0.1:5000"


def test_json_stays_valid() -> None:
    doc = {"msg": 'password="a b" api_key=x1y2z3 "token": "t0k3n"', "n": [1, "#token: 5"]}
    text = json.dumps(doc)
    out = json.loads(redact_text(text))
    assert "x1y2z3" not in out["msg"] and "t0k3n" not in out["msg"] and "a b" not in out["msg"]
    assert out["n"] == [1, "#token: 5"]


def test_redact_html_keeps_markup() -> None:
    markup = '<td class="x">ERROR: password=&quot;p &amp; q&quot;</td><td>#token: 5</td>'
    out = redact_html(markup)
    assert out.startswith('<td class="x">ERROR: password=') and "p &amp; q" not in out
    assert out.endswith("<td>#token: 5</td>")


@pytest.mark.parametrize(
    "line",
    [
        "a=" + "b" * 1_000_000,
        "password=" + "x" * 1_000_000,
        "https://" + "u" * 500_000 + "@" * 500_000,
        "token " * 200_000,
        ":" * 1_000_000,
        "a:" * 500_000,
        "Authorization: " + "x " * 500_000,
        "redis://:" + "/@" * 500_000,
        "eyJ" + "a" * 999_000 + "." * 1000,
    ],
)
def test_long_lines_cost_their_length(line: str) -> None:
    """Patterns are linear: each of these would take minutes if one were quadratic."""
    out = redact_text(line)
    assert isinstance(out, str)


def test_redact_html_leaves_scripts_working() -> None:
    markup = (
        '<div id="c"></div><script>var spec={"title":"api_key=abc123"};'
        "if(tries++<200){go();}</script><p>a &lt; b, token=t0k3n99</p>"
    )
    out = redact_html(markup)
    assert "abc123" not in out and "t0k3n99" not in out
    assert "tries++<200" in out and "<p>a &lt; b, token=[redacted]</p>" in out


MORE_SECRETS = [
    ("headers=[('Authorization', 'Token tuple-tok-123'), ('x', 'y')]", ["tuple-tok-123"]),
    ('("x-api-key", "tuple-key-456")', ["tuple-key-456"]),
    (
        "key file: -----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAA\n-----END RSA PRIVATE KEY-----",
        ["MIIEow", "IBAA"],
    ),
    ("maps key AIzaSyA1234567890abcdefghijklmnopqrstuv", ["AIzaSyA1234567890"]),
    ("GET /v1/models?api_key=query-secret-1&limit=5", ["query-secret-1"]),
    ("https://oauth2:glpat-abcdef123456@gitlab.example.com/repo.git", ["glpat-abcdef123456"]),
    ("amqp://guest:guest-pw-2@localhost:5672//", ["guest-pw-2"]),
    ("http://u:ipv6-pw-3@[::1]:8080/x", ["ipv6-pw-3"]),
    ("PASSWORD=UPPER-CASE-9", ["UPPER-CASE-9"]),
    ("refresh_token: rt-0a1b2c", ["rt-0a1b2c"]),
]


@pytest.mark.parametrize(("line", "secrets"), MORE_SECRETS)
def test_more_secret_shapes(line: str, secrets: list[str]) -> None:
    out = redact_text(line)
    assert all(s not in out for s in secrets), out


@pytest.mark.parametrize(
    "line",
    ["missing authorization, retrying in 5s", "cookie, session and cache were cleared"],
)
def test_header_words_in_prose_survive(line: str) -> None:
    assert redact_text(line) == line
