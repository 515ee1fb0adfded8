"""Shared test setup: tool requirements and the toy-model firmware used by the link tests.

Tests that need a tool (the RISC-V compiler, QEMU, clang with libFuzzer) skip when it is missing,
unless EDGERNN_REQUIRE_TOOLCHAINS=1 is set (as .ci/run does): then a missing tool fails the test.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
TOY_MODEL = TESTS / "fixtures" / "toy_model"
sys.path.insert(0, str(TOY_MODEL))

# The signal tests send SIGINT to edgernn: a suite started with SIGINT ignored (a background job of a
# non-interactive shell) would pass that on to every child; Python's handler is reset to the default
# in a child at exec, an ignored signal is not.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

QEMU_TOOLS = ("qemu-system-riscv32", "riscv64-unknown-elf-gcc")


def tool_unavailable(message: str) -> None:
    """Skip for a missing or incomplete tool; under EDGERNN_REQUIRE_TOOLCHAINS=1 (CI) fail instead."""
    if os.environ.get("EDGERNN_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail(f"{message} (EDGERNN_REQUIRE_TOOLCHAINS=1 forbids skipping)", pytrace=False)
    pytest.skip(message)


def require_tools(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        tool_unavailable(f"needs {', '.join(missing)}")


def require_module(name: str):
    """The Python package ``name`` (torch, onnx: the PyTorch front door's extras), else skip the test module,
    or fail under EDGERNN_REQUIRE_TOOLCHAINS=1 (CI installs them)."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        message = f"needs the Python package {name} (pip install -e '.[dev]')"
        if os.environ.get("EDGERNN_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail(f"{message} (EDGERNN_REQUIRE_TOOLCHAINS=1 forbids skipping)", pytrace=False)
        pytest.skip(message, allow_module_level=True)


def require_gap_sdk() -> Path:
    """$GAP_SDK_HOME (resolved) and a compiler for it (GAP's, or Debian's riscv64-unknown-elf-gcc), else
    skip, or fail under EDGERNN_REQUIRE_TOOLCHAINS=1."""
    home = os.environ.get("GAP_SDK_HOME")
    if not home or not (Path(home) / "configs" / "ai_deck.sh").is_file():
        tool_unavailable("needs the GAP SDK ($GAP_SDK_HOME with configs/ai_deck.sh)")
    if shutil.which("riscv32-unknown-elf-gcc") is None:
        require_tools("riscv64-unknown-elf-gcc", "make")
    return Path(home).resolve()


def gap_sdk_params() -> list:
    """pytest params, one per GAP SDK the tests build against: "home" ($GAP_SDK_HOME) and each SDK of
    ``$EDGERNN_TEST_GAP_SDKS`` (colon-separated; CI: the 4.8.0 tree of Bitcraze's docker image) by its
    folder name."""
    extras = [e for e in os.environ.get("EDGERNN_TEST_GAP_SDKS", "").split(":") if e]
    return [pytest.param(None, id="home")] + [pytest.param(e, id=Path(e).name) for e in extras]


def require_gap_sdk_at(entry: str | None) -> Path:
    """require_gap_sdk() for $GAP_SDK_HOME (entry None), else the named SDK of $EDGERNN_TEST_GAP_SDKS."""
    if entry is None:
        return require_gap_sdk()
    path = Path(entry).resolve()
    if not (path / "configs" / "ai_deck.sh").is_file():
        tool_unavailable(f"EDGERNN_TEST_GAP_SDKS names {entry}, which is no GAP SDK")
    if shutil.which("riscv32-unknown-elf-gcc") is None:
        require_tools("riscv64-unknown-elf-gcc", "make")
    return path


def alive(pid: int) -> bool:
    """Whether a process is running (not gone, not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False



def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line holds text (a test's own tmp path)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and alive(int(entry)):
            found.append(int(entry))
    return found

def wait_until(predicate, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def one_error_line(proc) -> str:
    """The one `error: ` line a command ended with (a subprocess.CompletedProcess): the last of its stderr, the only
    one, with no traceback and no "internal error"."""
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: "), proc.stderr
    assert sum(line.startswith("error: ") for line in lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    return lines[-1]


def pytest_runtest_setup(item):
    if item.get_closest_marker("qemu") is not None:
        require_tools(*QEMU_TOOLS)
    if item.get_closest_marker("toolchain") is not None:
        require_tools("gcc")


@pytest.fixture(scope="session")
def toy_firmware(tmp_path_factory):
    """Build the toy-model firmware for a board once per session: ``toy_firmware(board)`` -> elf."""
    from edgernn.targets import device as devices

    built = {}

    def build(board: str, **kwargs):
        key = (board, repr(sorted(kwargs.items())))
        if key not in built:
            build_dir = tmp_path_factory.mktemp(f"toy_{board}")
            built[key] = devices.build_elf(TOY_MODEL, board, build_dir, **kwargs).elf
        return built[key]

    return build


@pytest.fixture
def host_device(toy_firmware):
    """The toy model running on the host board behind a pty."""
    from edgernn.targets import device as devices

    device = devices.start(toy_firmware("host"), "host")
    yield device
    device.stop()
