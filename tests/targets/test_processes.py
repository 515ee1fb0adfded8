"""No orphans: every compiler, emulator or firmware process edgernn starts ends when the command ends,
whether it ends through an error, Ctrl-C, SIGTERM or SIGHUP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import alive, processes_mentioning, wait_until
from edgernn import procs
from edgernn.testing.toy_build import make_toy_out

pytestmark = pytest.mark.toolchain


def test_run_ends_the_whole_group_on_an_exception(tmp_path):
    marker = str(tmp_path / "grandchild")
    # A driver that leaves a grandchild behind it, as gcc leaves cc1.
    command = ["bash", "-c", f"exec -a {marker} sleep 60 & wait"]
    with pytest.raises(subprocess.TimeoutExpired):
        procs.run(command, timeout=0.5)
    assert wait_until(lambda: not processes_mentioning(marker)), "the grandchild outlived the exception"


def test_run_ends_what_the_leader_left_running(tmp_path):
    marker = str(tmp_path / "left")
    done = procs.run(["bash", "-c", f"(exec -a {marker} sleep 60 >/dev/null 2>&1) & echo started"])
    assert done.returncode == 0 and done.stdout.strip() == "started"
    assert wait_until(lambda: not processes_mentioning(marker))


def test_run_ends_the_whole_group_on_ctrl_c(tmp_path):
    """An interrupted build leaves no compiler behind: the whole process group goes."""
    pids = tmp_path / "pids"
    script = f"sleep 60 & echo $! > {pids}; sleep 60 & echo $! >> {pids}; wait"

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(KeyboardInterrupt):
            procs.run(["bash", "-c", script])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    children = [int(p) for p in pids.read_text().split()]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(alive(p) for p in children):
        time.sleep(0.05)
    assert not any(alive(p) for p in children)


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_to_flash_stops_the_emulated_board(tmp_path, sig, code):
    out = make_toy_out(tmp_path / "out")
    cli = subprocess.Popen([sys.executable, "-m", "edgernn", "flash", str(out)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = ""
        while "port:" not in line:
            line = cli.stdout.readline()
            assert line, "flash ended before it printed the port: " + cli.stderr.read()
        firmware = processes_mentioning(str(out))
        assert firmware, "no firmware process is running"
        cli.send_signal(sig)
        assert cli.wait(20) == code
        assert wait_until(lambda: not processes_mentioning(str(out))), "the firmware outlived edgernn"
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)


@pytest.mark.parametrize("sig, raised", [(signal.SIGTERM, procs.Interrupted), (signal.SIGINT, KeyboardInterrupt)])
def test_a_signal_while_a_group_starts_leaves_no_orphan(tmp_path, monkeypatch, sig, raised):
    """A signal between the child's start (it may already have children of its own) and the group's place in
    the registry: the group ends and the signal is raised, where it used to leave the group running."""
    pids = tmp_path / "pids"
    real_popen = subprocess.Popen

    class SignalledWhileStarting(real_popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            deadline = time.monotonic() + 10
            while not (pids.is_file() and pids.read_text().strip()) and time.monotonic() < deadline:
                time.sleep(0.01)
            os.kill(os.getpid(), sig)          # the handler runs here, before spawn remembers the group

    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    procs.install_signal_handlers()
    monkeypatch.setattr(subprocess, "Popen", SignalledWhileStarting)
    try:
        with pytest.raises(raised):
            procs.run(["bash", "-c", f"sleep 60 & echo $! > {pids}; wait"])
    finally:
        monkeypatch.undo()
        for s, handler in saved.items():
            signal.signal(s, handler)
        procs._received.clear()
    child = int(pids.read_text())
    assert wait_until(lambda: not alive(child)), "the group's child outlived the signal"
    assert procs._live == {}


# A script that starts a group through edgernn (as a bench, or a user's script calling validate, does), says so, and
# waits; it installs no signal handlers, so SIGTERM ends it as SIGKILL does: without unwinding, no finally run.
_SCRIPT = """
import sys, time
from edgernn import procs
procs.spawn(["bash", "-c", "exec -a " + sys.argv[1] + " sleep 60"])
print("started", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_process_that_dies_without_unwinding_leaves_no_orphan(tmp_path, sig):
    """Killed, or ended by a SIGTERM it does not handle, a process runs no finally and no stop_all: its groups
    (each in a session of its own) would run on under init. The reaper, told of each group, ends them when the
    process's end closes its pipe."""
    marker = str(tmp_path / "left-behind")
    script = subprocess.Popen([sys.executable, "-c", _SCRIPT, marker], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert script.stdout.readline().strip() == "started"
        assert processes_mentioning(marker), "the group did not start"
        script.send_signal(sig)
        assert script.wait(20) == -sig
        assert wait_until(lambda: not processes_mentioning(marker)), "the group outlived the process"
    finally:
        if script.poll() is None:
            script.kill()
        for pid in processes_mentioning(marker):
            os.kill(pid, signal.SIGKILL)
