"""What ``render`` does to an executed notebook before anything is written: every output string
redacted and stripped of the runs' absolute folder, images left alone, records collected."""

from __future__ import annotations

from pathlib import Path

import nbformat

from toolkit.report.context import RECORD_MIME
from toolkit.report.render import _clean_notebook

PNG = "iVBORw0KGgoAKIAIOSFODNN7EXAMPLEAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"


def _notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print('hi')  # api_key=src-secret-1")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="ERROR: password=stream-pw-2\n"),
        nbformat.v4.new_output(
            "display_data",
            data={
                "text/html": "<td>/home/u/runs/pp8/server.log: Cookie: sid=html-ck-3</td>",
                "text/plain": "Authorization: Token plain-tok-4",
                "application/json": {"msg": "redis://:json-pw-5@cache:6379", "n": 3},
                "image/png": PNG,
            },
        ),
        nbformat.v4.new_output(
            "display_data", data={RECORD_MIME: {"log": "retrying with api_key=rec-key-6"}}
        ),
        nbformat.v4.new_output(
            "error", ename="ValueError", evalue="x-api-key: err-key-7", traceback=["tb"]
        ),
    ]
    nb.cells = [cell]
    nb.metadata["papermill"] = {"parameters": {"runs": "/home/u/runs/tp8,/home/u/runs/pp8"}}
    return nb


def test_every_output_is_redacted_and_shortened() -> None:
    nb = _notebook()
    records = _clean_notebook(nb, set(), True, Path("/home/u/runs"))
    text = nbformat.writes(nb) + str(records)
    for secret in ("src-secret-1", "stream-pw-2", "html-ck-3", "plain-tok-4", "json-pw-5",
                   "rec-key-6", "err-key-7", "/home/u"):  # fmt: skip
        assert secret not in text, secret
    assert PNG in text, "image data is left as it is"
    assert "pp8/server.log" in text and nb.metadata["papermill"]["parameters"]["runs"] == "tp8,pp8"
    assert records == {"log": "retrying with api_key=[redacted]"}


def test_no_redact_and_full_paths_keep_everything() -> None:
    nb = _notebook()
    records = _clean_notebook(nb, set(), False, None)
    text = nbformat.writes(nb)
    assert "stream-pw-2" in text and "/home/u/runs/pp8" in text
    assert records == {"log": "retrying with api_key=rec-key-6"}
