"""Version profiles: the exact line formats of one SGLang release.

Two releases are profiled, one on each side of the format changes that matter to a loader:

* ``0.5.7``: ``server_args=ServerArgs(...)`` dataclass repr; batch lines end with ``", "``;
  the Prefill line stops at ``#queue-req``; the older startup wording
  (``Load weight end. type=..., dtype=...``, ``Capture cuda graph begin. This can take ...``).
* ``0.5.23``: ``server_args={...}`` dict repr; no trailing comma; Prefill lines carry
  ``#pending-token``, ``cuda graph`` and ``input throughput``; the newer startup wording
  (``elapsed=``, ``KV Cache is allocated. dtype: ...``, ``Capture target decode CUDA graph``).

Both put the PP tag before the TP tag (≥0.5.6) and print no milliseconds (no ``SGLANG_LOG_MS``).
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.errors import ToolkitError

__all__ = ["PROFILES", "Profile", "profile_named"]


@dataclass(frozen=True)
class Profile:
    """Formats of one release; the methods return message text without the ``[ts ranks]``."""

    version: str
    dict_dump: bool  # server_args={...} (≥0.5.20) instead of ServerArgs(...)
    trailing_comma: bool  # batch lines end with ", " (0.5.5–0.5.8)
    new_startup: bool  # ≥0.5.16 startup wording
    server_info_path: str  # what bench_serving asks for its server_info
    bench_keys: str  # key set of the bench_serving JSONL, see bench_jsonl

    def rank_tags(self, pp_rank: int | None, tp_rank: int | None) -> str:
        """`` PP3``, `` TP0``, `` PP1 TP0``: each tag only when that size is > 1 (PP first)."""
        tags = f" PP{pp_rank}" if pp_rank is not None else ""
        return tags + (f" TP{tp_rank}" if tp_rank is not None else "")

    def _end(self, fields: list[str]) -> str:
        return ", ".join(fields) + (", " if self.trailing_comma else "")

    def decode(
        self, running: int, token: int, usage: float, graph: bool, gen: float, queue: int
    ) -> str:
        fields = [
            f"#running-req: {running}",
            f"#token: {token}",
            f"token usage: {usage:.2f}",
            f"cuda graph: {graph}",
            f"gen throughput (token/s): {gen:.2f}",
            f"#queue-req: {queue}",
        ]
        return "Decode batch, " + self._end(fields)

    def prefill(
        self,
        new_seq: int,
        new_token: int,
        usage: float,
        running: int,
        queue: int,
        pending: int,
        throughput: float,
    ) -> str:
        fields = [
            f"#new-seq: {new_seq}",
            f"#new-token: {new_token}",
            "#cached-token: 0",  # random prompts share no prefix
            f"token usage: {usage:.2f}",
            f"#running-req: {running}",
            f"#queue-req: {queue}",
        ]
        if self.new_startup:
            fields += [
                f"#pending-token: {pending}",
                "cuda graph: False",
                f"input throughput (token/s): {throughput:.2f}",
            ]
        return "Prefill batch, " + self._end(fields)

    def init_end(self, elapsed: float, mem: float) -> str:
        if self.new_startup:
            return f"Init torch distributed ends. elapsed={elapsed:.2f} s, mem usage={mem:.2f} GB"
        return f"Init torch distributed ends. mem usage={mem:.2f} GB"

    def load_end(self, elapsed: float, avail: float, used: float) -> str:
        if self.new_startup:
            return (
                f"Load weight end. elapsed={elapsed:.2f} s, type=DeepseekV3ForCausalLM, "
                f"avail mem={avail:.2f} GB, mem usage={used:.2f} GB."
            )
        return (
            "Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, "
            f"avail mem={avail:.2f} GB, mem usage={used:.2f} GB."
        )

    def kv_allocated(self, tokens: int, size_gb: float) -> str:
        dtype = "dtype: torch.bfloat16, " if self.new_startup else ""
        return f"KV Cache is allocated. {dtype}#tokens: {tokens}, KV size: {size_gb:.2f} GB"

    def capture(self, bs: list[int], avail_before: float, elapsed: float, used: float) -> list[str]:
        """The decode CUDA-graph capture lines (the tqdm bar goes in between)."""
        after = avail_before - used
        if self.new_startup:
            return [
                "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, "
                f"avail mem={avail_before:.2f} GB",
                f"Capture target decode CUDA graph end. bs={bs}, elapsed={elapsed:.2f} s, "
                f"mem usage={used:.2f} GB, avail mem={after:.2f} GB.",
            ]
        return [
            "Capture cuda graph begin. This can take up to several minutes. "
            f"avail mem={avail_before:.2f} GB",
            f"Capture cuda graph bs {bs}",
            f"Capture cuda graph end. Time elapsed: {elapsed:.2f} s. mem usage={used:.2f} GB. "
            f"avail mem={after:.2f} GB.",
        ]


PROFILES: dict[str, Profile] = {
    "0.5.7": Profile("0.5.7", False, True, False, "/get_server_info", "0.5.5"),
    "0.5.23": Profile("0.5.23", True, False, True, "/server_info", "0.5.23"),
}


def profile_named(version: str) -> Profile:
    """The profile of an SGLang release (``0.5.7`` or ``0.5.23``)."""
    try:
        return PROFILES[version]
    except KeyError:
        known = ", ".join(PROFILES)
        message = f"no synthetic profile for sglang {version!r} (known: {known})"
        raise ToolkitError(message) from None
