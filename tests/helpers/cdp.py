"""Headless Chromium driven over the DevTools protocol: one browser, pages opened in it.

The distribution's Chromium is used as it is (nothing is downloaded); ``websocket-client``
carries the protocol. One browser serves a whole test session; each test opens its own page
(``Browser.page()``), which is closed when the ``with`` block ends.

    with Browser.launch(profile_dir) as browser, browser.page() as page:
        page.goto("file:///.../report.html")
        page.wait_for("document.querySelectorAll('svg').length > 3")
        page.screenshot(Path("first.png"), width=1400, height=900)
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import websocket

__all__ = ["FLAGS", "Browser", "BrowserError", "Page", "find_chromium"]

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    # Any load that leaves this machine fails at once: names do not resolve and the proxy is
    # dead. Loopback addresses (a local JupyterLab) are never proxied.
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    "--proxy-server=127.0.0.1:9",
]


class BrowserError(RuntimeError):
    """The browser did not start, or a page did not reach the state a test waited for."""


def find_chromium() -> str | None:
    """The system's Chromium (or Chrome), None when there is none."""
    names = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
    return next((shutil.which(n) for n in names if shutil.which(n)), None)


class Browser:
    """A headless Chromium process and one protocol connection to it."""

    def __init__(self, process: subprocess.Popen[bytes], url: str) -> None:
        self.process = process
        self._ws = websocket.create_connection(url, timeout=120, suppress_origin=True)
        self._ids = itertools.count(1)
        self._events: list[dict[str, Any]] = []

    @classmethod
    def launch(cls, profile: Path, executable: str | None = None) -> Browser:
        """Start Chromium with a fresh profile directory and connect to it."""
        exe = executable or find_chromium()
        if exe is None:
            raise BrowserError("no chromium on this machine")
        profile.mkdir(parents=True, exist_ok=True)
        port_file = profile / "DevToolsActivePort"
        port_file.unlink(missing_ok=True)
        process = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise BrowserError(f"chromium exited with {process.returncode}")
            with contextlib.suppress(OSError):
                lines = port_file.read_text().splitlines()
                if len(lines) >= 2:
                    return cls(process, f"ws://127.0.0.1:{lines[0]}{lines[1]}")
            time.sleep(0.1)
        process.kill()
        raise BrowserError("chromium did not open its debugging port within 60 s")

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.send("Browser.close")
        with contextlib.suppress(Exception):
            self._ws.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    # ── the protocol ────────────────────────────────────────────────────────────────────────

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Call a protocol method and return its result (events that arrive are kept)."""
        call_id = next(self._ids)
        message: dict[str, Any] = {"id": call_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        self._ws.send(json.dumps(message))
        while True:
            reply = json.loads(self._ws.recv())
            if reply.get("id") == call_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            if "method" in reply:
                self._events.append(reply)

    def events(self, session: str, method: str) -> list[dict[str, Any]]:
        """The parameters of the events of this kind a page sent so far (the list is kept)."""
        return [
            e["params"]
            for e in self._events
            if e.get("sessionId") == session and e.get("method") == method
        ]

    @contextlib.contextmanager
    def page(self, width: int = 1400, height: int = 900) -> Iterator[Page]:
        """A new page (tab) of ``width`` × ``height`` CSS pixels, closed afterwards."""
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        page = Page(self, session)
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session)
        page.resize(width, height)
        try:
            yield page
        finally:
            with contextlib.suppress(BrowserError):
                self.send("Target.closeTarget", targetId=target)


class Page:
    """One tab: navigate, evaluate JavaScript, wait for a condition, type, screenshot."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        return self.browser.send(method, self.session, **params)

    def resize(self, width: int, height: int) -> None:
        self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def goto(self, url: str, timeout: float = 60) -> None:
        self.send("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'", timeout=timeout)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (promises awaited), as JSON-able data."""
        result = self.send(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise BrowserError(f"script failed: {text}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60, what: str | None = None) -> Any:
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(BrowserError):
                value = self.evaluate(expression)
                if value:
                    return value
            if time.monotonic() > deadline:
                raise BrowserError(f"waited {timeout:.0f} s for {what or expression}")
            time.sleep(0.25)

    def key(self, key: str, code: str | None = None, key_code: int = 0) -> None:
        """Press and release one key in the focused element."""
        common = {"key": key, "code": code or key, "windowsVirtualKeyCode": key_code}
        self.send("Input.dispatchKeyEvent", type="keyDown", **common)
        self.send("Input.dispatchKeyEvent", type="keyUp", **common)

    def type_text(self, text: str) -> None:
        self.send("Input.insertText", text=text)

    def console(self) -> list[str]:
        """What the page logged: console calls and browser log entries, as ``level: text``."""
        calls = [
            f"{e['type']}: "
            + " ".join(str(a.get("value", a.get("description", ""))) for a in e["args"])
            for e in self.browser.events(self.session, "Runtime.consoleAPICalled")
        ]
        entries = [
            f"{e['entry']['level']}: {e['entry']['text']}"
            for e in self.browser.events(self.session, "Log.entryAdded")
        ]
        errors = [
            "exception: " + e["exceptionDetails"].get("text", "")
            for e in self.browser.events(self.session, "Runtime.exceptionThrown")
        ]
        return calls + entries + errors

    def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        """A PNG of the viewport (or the whole page) written to ``path``."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
            )
            params |= {
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1},
            }
        data = self.send("Page.captureScreenshot", **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path
