"""Headless Chromium (Debian's ``chromium``), driven over the DevTools protocol on a pipe: a page is opened
from a file, questions are asked of its DOM, and screenshots taken, with no network and no port.

Chromium starts with a new empty profile (``--user-data-dir``) and everything that would reach a network off;
it runs in a process group of its own, which ``close`` ends, so no Chromium process outlives it.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import select
import signal
import subprocess
import tempfile
import time
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars"]


def chromium_path() -> str | None:
    return shutil.which("chromium")


class Chromium:
    """One headless Chromium and one page in it. ``with Chromium() as browser:``"""

    def __init__(self, width: int = 1100, height: int = 900, timeout: float = 60.0):
        program = chromium_path()
        if program is None:
            raise FileNotFoundError("chromium")
        self.timeout = timeout
        self.profile = Path(tempfile.mkdtemp(prefix="edgernn_chromium_"))
        commands_read, self._commands = os.pipe()     # Chromium reads commands on its fd 3
        self._answers, answers_write = os.pipe()      # and writes answers on its fd 4
        # copies above fd 9, so that putting them on 3 and 4 in the child cannot overwrite one with the other
        high = (fcntl.fcntl(commands_read, fcntl.F_DUPFD, 10), fcntl.fcntl(answers_write, fcntl.F_DUPFD, 10))

        def pipes_on_3_and_4():
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        try:
            # close_fds=False: Python closes a child's fds after preexec_fn, 3 and 4 with them; every fd of
            # this process but the pipes' copies is close-on-exec anyway
            self.process = subprocess.Popen(
                [program, *FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
                 "--remote-debugging-pipe", "about:blank"],
                close_fds=False, preexec_fn=pipes_on_3_and_4, start_new_session=True,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        finally:
            for fd in (commands_read, answers_write, *high):
                os.close(fd)
        self._buffer = b""
        self._next = 0
        self.session = None
        try:
            target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self.session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            self._call("Page.enable")
            self._call("Emulation.setDeviceMetricsOverride",
                       {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        except BaseException:
            self.close()
            raise

    def _send(self, method: str, params: dict | None = None) -> int:
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if self.session is not None and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self.session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        return self._next

    def _read(self, until) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if until(message):
                    return message
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer")
            ready, _, _ = select.select([self._answers], [], [], 0.5)
            if ready:
                chunk = os.read(self._answers, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"Chromium ended (exit status {self.process.poll()})")
                self._buffer += chunk

    def _call(self, method: str, params: dict | None = None) -> dict:
        sent = self._send(method, params)
        answer = self._read(lambda m: m.get("id") == sent)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def open(self, path: Path) -> None:
        """Load a local file and wait until it and its images have loaded."""
        self._call("Page.navigate", {"url": Path(path).resolve().as_uri()})
        self._read(lambda m: m.get("method") == "Page.loadEventFired")

    def evaluate(self, expression: str):
        result = self._call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, width: int | None = None, height: int | None = None, top: float = 0) -> Path:
        """A PNG of the page from ``top``, ``width`` x ``height`` CSS pixels (default: all of it)."""
        size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        clip = {"x": 0, "y": top, "width": width or size[0], "height": height or size[1] - top, "scale": 1}
        shot = self._call("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True})
        Path(path).write_bytes(base64.b64decode(shot["data"]))
        return Path(path)

    def close(self) -> None:
        """End Chromium and every process it started, and remove its profile."""
        if self.process.poll() is None:
            try:
                self._send("Browser.close")
                self.process.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)      # its helpers (zygote, renderer) too
        except ProcessLookupError:
            pass
        self.process.wait()
        for fd in (self._commands, self._answers):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
