"""Which keys name a secret: one judgement for the reports, the captures and the loaders.

A ServerArgs field, CLI flag, HTTP header or config key names a secret when one of its whole
parts does (``hf_token``, ``db_password``), when it is a known name (``api_key``), or when it
ends in ``key`` owned by an API, an access or a private key. A ``token`` part beside a measure
(``token_usage``, ``token_count``) is a count, never a credential.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["COUNT_PARTS", "REDACTED", "is_secret_key", "name_parts"]

REDACTED = "[redacted]"

# Name parts that mark a secret. Whole parts only: ``max_total_num_tokens`` and
# ``tokenizer_path`` hold no secret, ``hf_token`` and ``auth_token`` do.
_SECRET_PARTS = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "credential",
        "credentials",
        "apikey",
        "cookie",
        "signature",  # signed URLs: X-Amz-Signature, a CDN's Signature
        "sig",  # Azure SAS tokens
    }
)
_SECRET_NAMES = frozenset(
    {"api_key", "admin_api_key", "authorization", "proxy_authorization", "auth", "set_cookie"}
)
_KEY_OWNERS = frozenset({"api", "access", "secret", "private", "signing", "encryption", "client"})
# Keys whose values are counts in LLM logs: a number after them is no credential.
COUNT_PARTS = frozenset({"token"})
# Beside ``token``, these parts name a measure of tokens (``token_usage``, ``token_count``,
# ``new_token_ratio``), never a credential.
_MEASURE_PARTS = frozenset(
    {"usage", "count", "num", "ratio", "budget", "limit", "len", "length", "size", "per", "rate"}
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def name_parts(name: str) -> list[str]:
    """A key's lower-case parts: ``--hf-token`` and ``hfToken`` both give ``['hf', 'token']``."""
    norm = _CAMEL.sub("_", name.strip().lstrip("-"))
    return [p for p in re.split(r"[^a-z0-9]+", norm.lower()) if p]


@lru_cache(maxsize=4096)  # a log repeats its keys: each is judged once
def is_secret_key(name: str) -> bool:
    """Whether a ServerArgs field, CLI flag, header or config key names a secret.

    >>> [is_secret_key(k) for k in ("--api-key", "x-api-key", "apiKey", "private_key")]
    [True, True, True, True]
    >>> [is_secret_key(k) for k in ("max_total_num_tokens", "tokenizer_path", "sort_key")]
    [False, False, False]
    >>> [is_secret_key(k) for k in ("token_usage", "hf_token", "auth_token")]
    [False, True, True]
    """
    parts = name_parts(name)
    if "_".join(parts) in _SECRET_NAMES:
        return True
    secret = {p for p in parts if p in _SECRET_PARTS}
    if secret == set(COUNT_PARTS) and _MEASURE_PARTS & set(parts):
        return False
    if secret:
        return True
    # *_api_key, *_access_key, *_secret_key, private_key, but not ``sort_key`` or ``lora_keys``
    return len(parts) >= 2 and parts[-1] == "key" and parts[-2] in _KEY_OWNERS
