"""A fake SGLang server on localhost: the HTTP endpoints a capture reads, and a server log.

It serves ``/server_info`` (or only ``/get_server_info``, as older releases), ``/metrics``
(Prometheus text with SGLang's metric names and labels), ``/v1/completions`` and ``/generate``.
``metrics_fault = "short"`` makes ``/metrics`` answer less than its ``Content-Length`` states,
``"error"`` answer 500.
A scheduler thread decodes one token per request every ``step_s`` and appends SGLang-shaped
lines (0.5.10 with ``SGLANG_LOG_MS``) to the log: a ``Prefill batch`` line per admitted batch, a
``Decode batch`` line every ``log_every`` steps, a uvicorn access line per request. The log's
clock is the local time plus ``log_offset_s`` (a server in another time zone).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL = "fake-org/fake-model-8b"
POOL_TOKENS = 200_000


@dataclass
class _Request:
    input_len: int
    output_len: int
    made: int = 0
    done: threading.Event = field(default_factory=threading.Event)


class FakeSGLang:
    """Start with ``start()`` (returns the base URL), stop with ``stop()``; or use ``with``."""

    def __init__(
        self,
        log: Path,
        *,
        old: bool = False,
        metrics: bool = True,
        step_s: float = 0.005,
        log_every: int = 4,
        log_offset_s: float = 0.0,
    ) -> None:
        self.log_path = log
        self.old = old
        self.metrics = metrics
        self.step_s = step_s
        self.log_every = log_every
        self.log_offset = timedelta(seconds=log_offset_s)
        self.metrics_fault: str | None = None  # "short": an answer cut before its length
        self.requests_served = 0
        self.profiles: list[dict[str, Any]] = []  # /start_profile requests, as sent
        self.generated = 0
        self._waiting: list[_Request] = []
        self._running: list[_Request] = []
        self._lock = threading.Lock()
        self._log_lock = threading.Lock()
        self._stop = threading.Event()
        self._log = log.open("a", encoding="utf-8")
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> str:
        for target in (self._server.serve_forever, self._schedule):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self._threads.append(t)
        self._line("The server is fired up and ready to roll!", ms=False)
        return self.url

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        for t in self._threads:
            t.join(timeout=5)
        with self._log_lock:
            self._log.close()

    def __enter__(self) -> FakeSGLang:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ state
    def server_info(self) -> dict[str, Any]:
        """What SGLang's ``/server_info`` returns: the server args, scheduler facts, version."""
        return {
            "model_path": MODEL,
            "tokenizer_path": MODEL,
            "served_model_name": MODEL,
            "tp_size": 1,
            "pp_size": 1,
            "dp_size": 1,
            "max_running_requests": 64,
            "chunked_prefill_size": 8192,
            "cuda_graph_max_bs": 64,
            "disable_cuda_graph": False,
            "decode_log_interval": 40,
            "enable_metrics": self.metrics,
            "api_key": "sk-fake-secret-0123456789",
            "max_total_num_tokens": POOL_TOKENS,
            "max_req_input_len": 32_000,
            "internal_states": [{"last_gen_throughput": 0.0}],
            "version": "0.5.10" if self.old else "0.5.23",
        }

    def metrics_text(self) -> str:
        labels = f'engine_type="unified",model_name="{MODEL}",pp_rank="0",tp_rank="0"'
        with self._lock:
            running = len(self._running)
            queued = len(self._waiting)
            used = sum(r.input_len + r.made for r in self._running)
            generated = self.generated
            served = self.requests_served
        rows = [
            ("num_running_reqs", "gauge", "The number of running requests.", running),
            ("num_queue_reqs", "gauge", "The number of requests in the waiting queue.", queued),
            ("num_used_tokens", "gauge", "The number of used tokens.", used),
            ("token_usage", "gauge", "The token usage.", used / POOL_TOKENS),
            ("gen_throughput", "gauge", "The generation throughput (token/s).", 0.0),
            ("generation_tokens", "counter", "Number of generation tokens processed.", generated),
            ("num_requests", "counter", "The number of processed requests.", served),
        ]
        out = []
        for name, kind, help_text, value in rows:
            suffix = "_total" if kind == "counter" else ""
            out.append(f"# HELP sglang:{name}{suffix} {help_text}")
            out.append(f"# TYPE sglang:{name}{suffix} {kind}")
            out.append(f"sglang:{name}{suffix}{{{labels}}} {float(value)}")
        return "\n".join(out) + "\n"

    def complete(self, input_len: int, output_len: int) -> int:
        """Queue one request and wait until it is generated; its output tokens."""
        request = _Request(max(1, input_len), max(1, output_len))
        with self._lock:
            self._waiting.append(request)
        request.done.wait(timeout=60)
        return request.made

    def start_profile(self, payload: dict[str, Any]) -> None:
        """Profile ``num_steps`` steps like SGLang: after them, write a trace into
        ``output_dir`` (one stage: the fake is TP1, PP1)."""
        from toolkit.synth.torch_trace import PipelineProfile, write_pp_profile

        self.profiles.append(payload)
        steps = int(payload.get("num_steps") or 5)
        spec = PipelineProfile(compute_ms=(self.step_s * 600,), steps=steps)

        def write() -> None:
            time.sleep(steps * self.step_s)
            write_pp_profile(Path(payload["output_dir"]), spec, profile_id=f"{time.time():.3f}")

        threading.Thread(target=write, daemon=True).start()

    # ------------------------------------------------------------------ scheduler
    def _schedule(self) -> None:
        step = 0
        while not self._stop.wait(self.step_s):
            with self._lock:
                admitted, self._waiting = self._waiting, []
                self._running += admitted
                for r in self._running:
                    r.made += 1
                self.generated += len(self._running)
                finished = [r for r in self._running if r.made >= r.output_len]
                self._running = [r for r in self._running if r.made < r.output_len]
                self.requests_served += len(finished)
                running = len(self._running) + len(finished)
                tokens = sum(r.input_len + r.made for r in self._running + finished)
            if admitted:
                new = sum(r.input_len for r in admitted)
                self._line(
                    f"Prefill batch, #new-seq: {len(admitted)}, #new-token: {new}, "
                    f"#cached-token: 0, token usage: {tokens / POOL_TOKENS:.2f}, "
                    f"#running-req: {running - len(admitted)}, #queue-req: 0, "
                    f"cuda graph: False, input throughput (token/s): {new / self.step_s:.2f}"
                )
            if running:
                step += 1
                if step % self.log_every == 0:
                    rate = running / self.step_s
                    self._line(
                        f"Decode batch, #running-req: {running}, #token: {tokens}, "
                        f"token usage: {tokens / POOL_TOKENS:.2f}, cuda graph: True, "
                        f"gen throughput (token/s): {rate:.2f}, #queue-req: 0"
                    )
            for r in finished:
                r.done.set()

    def _line(self, message: str, *, ms: bool = True) -> None:
        t = datetime.now() + self.log_offset
        stamp = t.strftime("%Y-%m-%d %H:%M:%S") + (f".{t.microsecond // 1000:03d}" if ms else "")
        self._write(f"[{stamp}] {message}\n")

    def _write(self, text: str) -> None:
        with self._log_lock:
            if not self._log.closed:
                self._log.write(text)
                self._log.flush()

    # ------------------------------------------------------------------ http
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet test output
                pass

            def _send(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                info = ["/get_server_info"] if fake.old else ["/server_info", "/get_server_info"]
                if self.path in info:
                    body = json.dumps(fake.server_info()).encode()
                    self._send(200, body, "application/json")
                elif self.path == "/metrics" and fake.metrics and fake.metrics_fault == "short":
                    body = fake.metrics_text().encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body) + 100))
                    self.end_headers()
                    self.wfile.write(body)  # and the connection closes: 100 bytes short
                elif self.path == "/metrics" and fake.metrics and fake.metrics_fault == "error":
                    self._send(500, b"internal error", "text/plain")
                elif self.path == "/metrics" and fake.metrics:
                    self._send(200, fake.metrics_text().encode(), "text/plain; version=0.0.4")
                elif self.path == "/health":
                    self._send(200, b"", "text/plain")
                else:
                    self._send(404, b'{"detail":"Not Found"}', "application/json")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    payload = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    payload = {}
                if self.path == "/start_profile":
                    fake.start_profile(payload)
                    self._send(200, b"Start profiling.", "text/plain")
                    return
                if self.path == "/v1/completions":
                    prompt = str(payload.get("prompt", ""))
                    limit = int(payload.get("max_tokens") or 16)
                elif self.path == "/generate":
                    prompt = str(payload.get("text", ""))
                    limit = int((payload.get("sampling_params") or {}).get("max_new_tokens", 16))
                else:
                    self._send(404, b'{"detail":"Not Found"}', "application/json")
                    return
                made = fake.complete(len(prompt.split()), limit)
                fake._access(self.client_address, self.path)
                body = {
                    "id": "cmpl-fake",
                    "object": "text_completion",
                    "model": MODEL,
                    "choices": [{"index": 0, "text": " tok" * made, "finish_reason": "length"}],
                    "usage": {
                        "prompt_tokens": len(prompt.split()),
                        "completion_tokens": made,
                        "total_tokens": len(prompt.split()) + made,
                    },
                }
                self._send(200, json.dumps(body).encode(), "application/json")

        return Handler

    def _access(self, client: tuple[str, int], path: str) -> None:
        t = datetime.now() + self.log_offset
        self._write(
            f"[{t:%Y-%m-%d %H:%M:%S}] INFO:     {client[0]}:{client[1]} - "
            f'"POST {path} HTTP/1.1" 200 OK\n'
        )


def wait_until(condition: Any, timeout_s: float = 60.0, every_s: float = 0.05) -> bool:
    """Poll ``condition()`` until it is true or ``timeout_s`` passes; whether it came true."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every_s)
    return bool(condition())
