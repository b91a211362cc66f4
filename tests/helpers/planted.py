"""A run directory with one secret planted in every input a user has, for the redaction tests.

Each plant is a distinct value, so a leak names the input it came from. The run is the
``pp8-not-applied`` diagnose fixture (its launch command asks for settings the ServerArgs dump
does not show, so the ``config-not-applied`` finding puts both commands' values in its
evidence), with:

- ``api_key`` in the ServerArgs dump, its value recurring without a key in a later log line;
- a launch command the server log echoes, ``--hf-token VALUE``;
- ``api_key:<TAB>VALUE`` in a warning line;
- ``--api-key VALUE`` in ``run.toml``'s command;
- ``api_key`` in a ``/server_info`` answer of ``server_info.jsonl``;
- ``--api-key VALUE`` in a ``command`` field of ``bench.jsonl``;
- a signed download URL (``X-Amz-Signature``) in a metric label of ``metrics.jsonl``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers import TEST_DATA

__all__ = ["PLANTS", "leaks", "plant_run"]

PLANTS = {
    "ServerArgs dump": "ArgsPlant7q2w",
    "echoed launch command": "EchoPlant3k9x",
    "tab-separated key": "TabPlant9h4j",
    "run.toml command": "TomlPlant5m8n",
    "server_info.jsonl": "InfoPlant2b6v",
    "bench.jsonl command": "BenchPlant4c1z",
    "metrics label": "SigPlant8d0e",
}


def plant_run(directory: Path) -> Path:
    """Write the planted run into ``directory`` and return it."""
    shutil.copytree(TEST_DATA / "diagnose" / "pp8-not-applied", directory)
    p = PLANTS
    log = directory / "server.log"
    lines = log.read_text().splitlines()
    lines[0] = lines[0].replace(
        "'port': 30000,", f"'port': 30000, 'api_key': '{p['ServerArgs dump']}',"
    )
    echoed = (
        "[2026-05-01 10:00:00] launching: python -m sglang.launch_server --model-path "
        f"/models/Kimi-K2.6 --pp-size 8 --hf-token {p['echoed launch command']}"
    )
    warning = (
        f"[2026-05-01 10:05:00] WARNING: retrying upstream with api_key:\t{p['tab-separated key']}"
    )
    recurring = f"[2026-05-01 10:05:01] WARNING: request from {p['ServerArgs dump']} rejected"
    log.write_text("\n".join([echoed, lines[0], warning, recurring, *lines[1:]]) + "\n")
    toml = directory / "run.toml"
    toml.write_text(
        toml.read_text().replace('size 4"', f'size 4 --api-key {p["run.toml command"]}"')
    )
    bench = directory / "bench.jsonl"
    records = [json.loads(line) for line in bench.read_text().splitlines() if line.strip()]
    command = (
        f"python -m sglang.bench_serving --backend sglang --api-key {p['bench.jsonl command']}"
    )
    bench.write_text("".join(json.dumps({**r, "command": command}) + "\n" for r in records))
    info = {
        "ts": "2026-05-01T10:05:30.000",
        "phase": None,
        "when": "start",
        "endpoint": "/server_info",
        "info": {
            "model_path": "/models/Kimi-K2.6",
            "pp_size": 8,
            "api_key": p["server_info.jsonl"],
        },
    }
    (directory / "server_info.jsonl").write_text(json.dumps(info) + "\n")
    url = (
        "https://models.s3.amazonaws.com/k2?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        f"&X-Amz-Signature={p['metrics label']}"
    )
    metrics = (TEST_DATA / "prometheus" / "metrics.jsonl").read_text()
    metrics = metrics.replace('model_name=\\"moonshotai/Kimi-K2.6\\"', f'model_name=\\"{url}\\"')
    (directory / "metrics.jsonl").write_text(metrics)
    return directory


def leaks(text: str) -> dict[str, str]:
    """The plants ``text`` still holds, by the input they were planted in."""
    return {where: value for where, value in PLANTS.items() if value in text}
