"""A server that answers anything: capture's HTTP reads (``fetch``, the ``/metrics`` poller)
never raise and never die on a broken answer (a cut body, a wrong ``Content-Length``, a broken
status line or chunked encoding, random bytes, a closed connection); each failure is counted."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.fuzz import budget
from hypothesis import event, given
from hypothesis import strategies as st

from toolkit.capture import metrics
from toolkit.capture.halt import Halt
from toolkit.capture.metrics import MetricsPoller, fetch

pytestmark = pytest.mark.fuzz

BODY = b'# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{tp_rank="0"} 3.0\n'


class _AnyAnswer:
    """A TCP server that reads a request and writes ``answer`` back, then closes."""

    def __init__(self) -> None:
        self.answer = b""
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _serve(self) -> None:
        while not self._done.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1.0)
                try:
                    conn.recv(65536)
                    conn.sendall(self.answer)
                except OSError:
                    pass

    def close(self) -> None:
        self._done.set()
        self._thread.join(timeout=5)
        self._sock.close()


@pytest.fixture(scope="module")
def anything() -> Iterator[_AnyAnswer]:
    server = _AnyAnswer()
    yield server
    server.close()


def _answer() -> st.SearchStrategy[bytes]:
    status = st.sampled_from(
        [b"HTTP/1.1 200 OK", b"HTTP/1.0 500 Oops", b"HTTP/1.1 404 Not Found", b"HTTP/9 2", b""]
    )
    length = st.one_of(st.none(), st.integers(-5, 10**6).map(lambda n: str(n).encode()))
    chunked = st.booleans()
    body = st.one_of(st.just(BODY), st.binary(max_size=256), st.just(BODY[:17]))

    @st.composite
    def build(draw: st.DrawFn) -> bytes:
        if draw(st.integers(0, 9)) == 0:
            return draw(st.binary(max_size=512))  # not HTTP at all
        head = [draw(status)]
        n = draw(length)
        if n is not None:
            head.append(b"Content-Length: " + n)
        if draw(chunked):
            head.append(b"Transfer-Encoding: chunked")
        return b"\r\n".join(head) + b"\r\n\r\n" + draw(body)

    return build()


@budget(40)
@given(answer=_answer())
def test_fetch_never_raises_on_a_broken_answer(anything: _AnyAnswer, answer: bytes) -> None:
    anything.answer = answer
    status, body = fetch(anything.url + "/metrics", timeout_s=2.0)
    event(f"status {status}" if status else "no whole answer")
    assert isinstance(status, int) and isinstance(body, bytes)
    if status != 200:
        assert body == b""


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
@budget(8)
@given(answers=st.lists(_answer(), min_size=1, max_size=4))
def test_the_poller_survives_and_counts_every_scrape(
    anything: _AnyAnswer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    answers: list[bytes],
) -> None:
    monkeypatch.setattr(metrics, "PERIOD_S", 0.05)
    out = tmp_path / "metrics.jsonl"
    out.unlink(missing_ok=True)
    halt = Halt()
    poller = MetricsPoller(anything.url, out, halt=halt)
    anything.answer = answers[0]
    poller.start()
    for answer in answers[1:]:
        anything.answer = answer
        threading.Event().wait(0.1)
    poller.finish()
    assert not poller.is_alive() and not halt.is_set()
    written = out.read_text().splitlines() if out.exists() else []
    assert len(written) == poller.scrapes
    assert poller.attempts >= 1 or poller.disabled
