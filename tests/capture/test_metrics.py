"""``/server_info`` and ``/metrics`` of a (fake) SGLang server, recorded as JSON lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.fake_sglang import FakeSGLang, wait_until
from prometheus_client.parser import text_string_to_metric_families

from toolkit.capture.metrics import MetricsPoller, ServerInfo
from toolkit.errors import CaptureError


@pytest.mark.parametrize(("old", "endpoint"), [(False, "/server_info"), (True, "/get_server_info")])
def test_server_info_from_the_endpoint_the_release_has(
    tmp_path: Path, old: bool, endpoint: str
) -> None:
    with FakeSGLang(tmp_path / "server.log", old=old) as fake:
        info = ServerInfo(fake.url, tmp_path / "server_info.jsonl")
        assert info.check()["model_path"] == "fake-org/fake-model-8b"
        assert not (tmp_path / "server_info.jsonl").exists()  # checking writes nothing
        info.record(0, "before")
    entry = json.loads((tmp_path / "server_info.jsonl").read_text())
    assert (entry["phase"], entry["when"], entry["endpoint"]) == (0, "before", endpoint)
    assert entry["info"]["tp_size"] == 1
    assert entry["info"]["api_key"] == "[redacted]"
    assert "sk-fake" not in (tmp_path / "server_info.jsonl").read_text()


def test_a_server_that_does_not_answer_is_a_capture_error(tmp_path: Path) -> None:
    with FakeSGLang(tmp_path / "server.log") as fake:
        url = fake.url
    with pytest.raises(CaptureError, match="no answer from /server_info"):
        ServerInfo(url, tmp_path / "server_info.jsonl").check()


def test_metrics_are_scraped_as_raw_exposition_text(tmp_path: Path) -> None:
    with FakeSGLang(tmp_path / "server.log") as fake:
        poller = MetricsPoller(fake.url, tmp_path / "metrics.jsonl")
        poller.start()
        assert wait_until(lambda: poller.scrapes >= 2)
        poller.finish()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len(lines) >= 2
    first = json.loads(lines[0])
    assert set(first) == {"ts", "text"}
    families = {f.name: f for f in text_string_to_metric_families(first["text"])}
    sample = families["sglang:num_running_reqs"].samples[0]
    assert sample.labels["pp_rank"] == "0" and sample.labels["tp_rank"] == "0"
    assert "sglang:generation_tokens" in families  # a counter, rendered with _total


def test_a_server_without_metrics_is_noted(tmp_path: Path) -> None:
    with FakeSGLang(tmp_path / "server.log", metrics=False) as fake:
        poller = MetricsPoller(fake.url, tmp_path / "metrics.jsonl")
        poller.start()
        poller.join(timeout=30)
    assert poller.disabled and poller.scrapes == 0
