"""A JupyterLab server for browser tests: headless, on a free port, nothing written to the
user's Jupyter directories, the notebooks copied so that running them saves nothing in the
repository.

``Lab.start(root)`` lays out ``root/notebooks/`` (copies of ``notebooks/*.ipynb``) next to
``root/data`` (a link to the sample data), so the notebooks' relative defaults resolve as in
the repository. The kernel is this interpreter with the repository first on ``PYTHONPATH``:
it imports ``toolkit`` from the tree under test.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from helpers import REPO

__all__ = ["Lab"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A running ``jupyter lab`` and how to reach it."""

    def __init__(
        self, process: subprocess.Popen[bytes], root: Path, port: int, token: str, log: Path
    ) -> None:
        self.process, self.root, self.port, self.token, self.log = process, root, port, token, log

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, notebook: str) -> str:
        """The address that opens ``notebooks/<notebook>.ipynb`` in JupyterLab."""
        return f"{self.base}/lab/tree/notebooks/{notebook}.ipynb?token={self.token}&reset"

    @classmethod
    def start(cls, root: Path, timeout: float = 120) -> Lab:
        notebooks = root / "notebooks"
        notebooks.mkdir(parents=True)
        for nb in sorted((REPO / "notebooks").glob("*.ipynb")):
            shutil.copy(nb, notebooks / nb.name)
        (root / "data").symlink_to(REPO / "data", target_is_directory=True)
        home = root / "jupyter"
        kernels = home / "data" / "kernels" / "python3"
        kernels.mkdir(parents=True)
        (kernels / "kernel.json").write_text(
            json.dumps(
                {
                    "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": "Python 3 (ppscope)",
                    "language": "python",
                }
            )
        )
        settings = home / "config" / "lab" / "user-settings" / "@jupyterlab"
        # no news or update checks (no network), no notifications over the cells
        (settings / "apputils-extension").mkdir(parents=True)
        (settings / "apputils-extension" / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False})
        )
        # every cell in the page, not only those scrolled into view: the test reads all outputs
        (settings / "notebook-extension").mkdir(parents=True)
        (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
            json.dumps({"windowingMode": "none"})
        )
        port, token = _free_port(), "ppscope-test"
        env = os.environ | {
            "JUPYTER_CONFIG_DIR": str(home / "config"),
            "JUPYTER_DATA_DIR": str(home / "data"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(home / "config" / "lab" / "user-settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
            "IPYTHONDIR": str(home / "ipython"),
            "PYTHONPATH": os.pathsep.join(
                [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
        }
        log = root / "lab.log"
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                "--ip=127.0.0.1",
                f"--port={port}",
                f"--ServerApp.root_dir={root}",
                f"--IdentityProvider.token={token}",
                "--LabApp.expose_app_in_browser=True",
                "--LabApp.news_url=",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                "--LabApp.extension_manager=readonly",
                "--ServerApp.open_browser=False",
                "--allow-root",  # containers run tests as root
            ],
            cwd=root,
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        lab = cls(process, root, port, token, log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"jupyter lab exited: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{lab.base}/api/status?token={token}", timeout=5):
                    return lab
            except OSError:
                time.sleep(0.5)
        lab.stop()
        raise RuntimeError(f"jupyter lab did not answer within {timeout:.0f} s")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
