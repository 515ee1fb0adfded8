"""Child processes that end when edgernn ends.

Compilers, make, emulators and host firmware start in a process group of their own, so that a
terminal's Ctrl-C does not reach them behind edgernn's back, and so that edgernn can end the whole
group: killing only the ``gcc`` driver would leave ``cc1`` running, killing only ``gapy`` would leave
the simulator running. Every group started here is remembered until it has ended; ``stop_all`` ends
those still alive, and the CLI calls it on every exit path (error, Ctrl-C, SIGTERM, SIGHUP).

A process that dies without unwinding (SIGKILL, or SIGTERM in a script that installed no handlers: a bench, a
user's own script calling ``validate``) runs no ``finally``. For that, the first group started also starts a reaper:
a small Python process in a session of its own, deaf to the terminal's signals, told of each group as it starts and
ends over a pipe. When the pipe closes, however edgernn ended, it ends the groups still alive.

``install_signal_handlers`` turns SIGTERM and SIGHUP into ``Interrupted``, raised in the main thread
like KeyboardInterrupt, so that every ``finally`` (a device's stop, a staging folder's removal) runs.
Every signal, Ctrl-C's SIGINT included, is also remembered: TensorFlow's converter catches a
KeyboardInterrupt raised inside it and goes on with a broken result, and an exception raised in a
finalizer is dropped, so the CLI asks ``received()`` before it reports anything else.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import Any

_live: dict[int, subprocess.Popen] = {}
_lock = threading.Lock()

# The reaper: reads "+ GROUP" and "- GROUP" lines; at the end of its input (edgernn ended, however), ends every
# group it was told of that still has a process, SIGTERM then SIGKILL. A group it was told of whose processes have all
# gone is forgotten at once (checked each second), so that a group id the system gives again later is not ended.
_REAPER = r"""
import os, select, signal, sys, time
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
def alive(g):
    try:
        os.killpg(g, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
groups, fd, buf = set(), sys.stdin.fileno(), b""
while True:
    ready, _, _ = select.select([fd], [], [], 1.0)
    if ready:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            word = line.split()
            if len(word) == 2 and word[0] in (b"+", b"-"):
                (groups.add if word[0] == b"+" else groups.discard)(int(word[1]))
    groups = {g for g in groups if alive(g)}
for sig in (signal.SIGTERM, signal.SIGKILL):
    for g in groups:
        try:
            os.killpg(g, sig)
        except OSError:
            pass
    deadline = time.monotonic() + 2.0
    while sig == signal.SIGTERM and time.monotonic() < deadline and any(alive(g) for g in groups):
        time.sleep(0.05)
"""
_reaper: list[subprocess.Popen] = []
_Popen = subprocess.Popen  # the reaper's, whatever a caller later puts in subprocess's place


def _tell_reaper(word: str, group: int) -> None:
    """Tell the reaper (started by the first group) that ``group`` started (+) or ended (-)."""
    try:
        if not _reaper:
            if word == "-":
                return
            _reaper.append(_Popen([sys.executable, "-S", "-c", _REAPER], stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        _reaper[0].stdin.write(f"{word} {group}\n".encode())
        _reaper[0].stdin.flush()
    except OSError:
        pass  # no reaper: the groups still end on every path that unwinds


class Interrupted(BaseException):
    """SIGTERM or SIGHUP arrived: unwind like KeyboardInterrupt, then exit 128 + signal."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_received: list[int] = []
# The main thread is starting a process group: a signal that comes before the group is remembered in _live
# only marks itself, and spawn raises it once the group is remembered (or ended), so none escapes.
_starting = [False]


def _raise_interrupted(signum, _frame):
    # remembered as well: raised inside a finalizer (a TensorFlow object's __del__), the exception is
    # printed and dropped by Python, and the command would go on as if nothing had come
    _received.append(signum)
    if not _starting[0]:
        raise Interrupted(signum)


def _raise_keyboard_interrupt(signum, _frame):
    _received.append(signum)
    if not _starting[0]:
        raise KeyboardInterrupt


def received() -> int | None:
    """The first signal that came (SIGINT, SIGTERM or SIGHUP), whatever became of its exception."""
    return _received[0] if _received else None


def raise_if_interrupted() -> None:
    """Raise for a signal that came before, even one whose exception was caught or dropped on the way:
    KeyboardInterrupt for SIGINT, Interrupted for SIGTERM and SIGHUP."""
    if _received:
        if _received[0] == signal.SIGINT:
            raise KeyboardInterrupt
        raise Interrupted(_received[0])


def install_signal_handlers() -> None:
    """SIGINT raises KeyboardInterrupt, SIGTERM and SIGHUP raise Interrupted, in the main thread, each
    remembered (call from the main thread)."""
    signal.signal(signal.SIGINT, _raise_keyboard_interrupt)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_interrupted)


def ignore_signals() -> None:
    """From here on the command only ends: no second signal may interrupt its last words and cleanup."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)


def spawn(command: list[str], **kwargs: Any) -> subprocess.Popen:
    """Popen in a new process group, remembered until ``stop`` (or ``stop_all``) ends it. A signal that
    comes while the group starts (the child may already run its own children) is raised once the group
    is remembered, after it is ended: between Popen and the registry no group escapes."""
    kwargs.setdefault("start_new_session", True)
    main = threading.current_thread() is threading.main_thread()
    came = len(_received)
    if main:
        _starting[0] = True
    try:
        process = subprocess.Popen(command, **kwargs)
        with _lock:
            _live[process.pid] = process
            if kwargs["start_new_session"]:
                _tell_reaper("+", process.pid)
    finally:
        if main:
            _starting[0] = False
    if main and len(_received) > came:
        stop(process, timeout=2.0)
        raise_if_interrupted()
    return process


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop(process: subprocess.Popen | None, timeout: float = 5.0) -> None:
    """End a process started by ``spawn`` and everything in its group: SIGTERM, then SIGKILL."""
    if process is None:
        return
    if process.poll() is None:
        _signal_group(process, signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    # The leader may be gone while others of its group live on (a compiler's cc1, a simulator's
    # launcher): the group is always sent SIGKILL at the end.
    _signal_group(process, signal.SIGKILL)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        pass
    with _lock:
        if _live.pop(process.pid, None) is not None:
            _tell_reaper("-", process.pid)


def stop_all() -> None:
    """End every group still alive (the CLI's last word on any exit path)."""
    with _lock:
        processes = list(_live.values())
    for process in processes:
        stop(process, timeout=2.0)


def run(command: list[str], *, timeout: float | None = None, input: str | bytes | None = None,
        **kwargs: Any) -> subprocess.CompletedProcess:
    """``subprocess.run`` whose whole process group ends on any exception, KeyboardInterrupt included.

    Output is captured as text unless the caller says otherwise."""
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    kwargs.setdefault("text", True)
    if input is None:
        kwargs.setdefault("stdin", subprocess.DEVNULL)
    else:
        kwargs["stdin"] = subprocess.PIPE
    process = spawn(command, **kwargs)
    try:
        stdout, stderr = process.communicate(input, timeout=timeout)
    except BaseException:
        stop(process, timeout=2.0)
        raise
    stop(process, timeout=2.0)  # the leader has exited; anything left in its group goes too
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
