"""GVSOC, GreenWaves' GAP8 simulator, built from $GAP_SDK_HOME into edgernn's cache, running a
bare-metal UART echo with its UART on a loopback TCP port.

The tests that need GVSOC skip without $GAP_SDK_HOME or the build tools, unless
EDGERNN_REQUIRE_TOOLCHAINS=1: then they fail. The first run builds GVSOC (minutes, once per SDK
content); later runs find it in the cache (``python -m edgernn.targets.gap8.sdk`` builds it ahead).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import alive, require_tools, tool_unavailable, wait_until
from edgernn.targets.gap8 import gvsoc
from edgernn.targets.gap8 import sdk as gap_sdk
from edgernn.errors import EdgeRNNError

TESTS = Path(__file__).resolve().parents[2]
SELFTEST = TESTS.parent / "templates" / "targets" / "gap8" / "sdk" / "selftest"
ECHO_SOURCES = [SELFTEST / "crt0.S", SELFTEST / "uart_echo.c"]
ECHO_LINK_SCRIPT = SELFTEST / "gap8_l2.ld"
SHARED = TESTS.parent.parent / "shared"
BUILD_TOOLS = ("make", "g++", "cmake", "scons", "rsync", "strip")
GAPY_MODULES = ("elftools", "argcomplete", "six")


def require_gap_sdk() -> Path:
    home = gap_sdk.sdk_home(required=False)
    missing = [] if home else ["$GAP_SDK_HOME (a GAP SDK)"]
    for module in GAPY_MODULES:
        try:
            __import__(module)
        except ImportError:
            missing.append(f"the Python module {module}")
    if missing:
        message = f"needs {', '.join(missing)}"
        tool_unavailable(message)
    require_tools(*BUILD_TOOLS)
    return home


def _changed_since(root: Path, stamp: float) -> list[str]:
    """Entries under root whose content or metadata changed after stamp (mtime or ctime)."""
    changed = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames, ""]:
            path = os.path.join(dirpath, name) if name else dirpath
            st = os.lstat(path)
            if st.st_mtime > stamp or st.st_ctime > stamp:
                changed.append(os.path.relpath(path, root))
    return changed


def _snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under root: type, mode, size, mtime and content hash (link target for a link)."""
    entries = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames, ""]:
            path = os.path.join(dirpath, name) if name else dirpath
            st = os.lstat(path)
            if os.path.islink(path):
                content = os.readlink(path)
            elif os.path.isfile(path):
                content = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            else:
                content = None
            entries[os.path.relpath(path, root)] = (st.st_mode, st.st_size, st.st_mtime_ns, content)
    return entries


@pytest.fixture(scope="session")
def gvsoc_build(tmp_path_factory):
    """GVSOC built (or found) in the cache: (install, home, SDK state before as (stamp, snapshot))."""
    home = require_gap_sdk()
    marker = tmp_path_factory.mktemp("stamp") / "before"    # the filesystem's clock, as mtimes use
    marker.write_bytes(b"")
    before = (marker.stat().st_mtime, _snapshot(home))
    install = gap_sdk.build_gvsoc(home, log=lambda m: print(m, file=sys.stderr))
    return install, home, before


@pytest.fixture(scope="session")
def echo_elf(tmp_path_factory):
    require_tools("riscv64-unknown-elf-gcc")
    elf = tmp_path_factory.mktemp("gvsoc_echo") / "gvsoc_uart_echo.elf"
    command = ["riscv64-unknown-elf-gcc", "-march=rv32imc_zicsr", "-mabi=ilp32", "-O2", "-Wall", "-Wextra",
               "-Werror", "-nostdlib", "-ffreestanding", "-Wl,--no-warn-rwx-segments", "-T", str(ECHO_LINK_SCRIPT),
               *map(str, ECHO_SOURCES), "-o", str(elf)]
    proc = subprocess.run(command, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return elf


class Uart:
    """The simulated UART seen from the host: exact reads with a deadline."""

    def __init__(self, port: int, timeout: float = 60.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = b""

    def read_exactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError(f"UART closed after {len(self.buffer)} of {n} bytes")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def read_line(self) -> str:
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError(f"UART closed in a line: {self.buffer!r}")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        self.sock.close()


def _fields(line: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in line.split()[1:] if "=" in item)


# ---- no SDK needed ----

def test_cache_root_order(monkeypatch, tmp_path):
    monkeypatch.setenv("EDGERNN_CACHE", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert gap_sdk.cache_root() == tmp_path / "a"
    monkeypatch.delenv("EDGERNN_CACHE")
    assert gap_sdk.cache_root() == tmp_path / "x" / "edgernn"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert gap_sdk.cache_root() == tmp_path / "h" / ".cache" / "edgernn"


def test_sdk_home_says_what_to_set(monkeypatch, tmp_path):
    monkeypatch.delenv("GAP_SDK_HOME", raising=False)
    assert gap_sdk.sdk_home(required=False) is None
    with pytest.raises(EdgeRNNError, match=r"\$GAP_SDK_HOME is unset\): export GAP_SDK_HOME=") as err:
        gap_sdk.sdk_home()
    assert "\n" not in str(err.value)
    monkeypatch.setenv("GAP_SDK_HOME", str(tmp_path))
    with pytest.raises(EdgeRNNError, match="has no configs/ai_deck.sh"):
        gap_sdk.sdk_home()


def _fake_sdk(root: Path, makefile: str, read_only: bool = True) -> Path:
    """A tree that passes for a GAP SDK of a supported release: a config script, the parts every release
    has, a flattened symlink, the lines edgernn's fixes correct, and a first build step (makefile)."""
    from edgernn.targets.gap8.sdk_fixes import FIXES

    (root / "configs").mkdir(parents=True)
    (root / "configs" / "ai_deck.sh").write_text("export TARGET_CHIP=GAP8_V2\nexport INSTALL_DIR=$PWD/install/workstation\n")
    (root / "configs" / "boards").mkdir()
    (root / "configs" / "boards" / "ai_deck.json").write_text('{"board": "ai_deck"}\n')
    (root / "configs" / "config").mkdir()
    (root / "configs" / "config" / "ai_deck.json").write_text("../boards/ai_deck.json")
    for part in ("utils/gapy", "utils/gap_configs", "gap8", "rtos/pmsis/api"):
        (root / part).mkdir(parents=True, exist_ok=True)
    (root / "utils" / "gapy" / "gapy").write_text("#!/usr/bin/env python3\n")
    for fix in FIXES:
        path = root / fix.path
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write("".join(edit.old + "\n" for edit in fix.edits if not edit.optional))
    (root / "utils" / "json-tools").mkdir(parents=True)
    (root / "utils" / "json-tools" / "Makefile").write_text(makefile)
    if read_only:
        for dirpath, dirnames, filenames in os.walk(root):      # read-only, as in CI
            for name in filenames:
                os.chmod(os.path.join(dirpath, name), 0o444)
    return root


def test_prepare_sdk_copies_once_and_never_writes_the_sdk(monkeypatch, tmp_path):
    monkeypatch.setenv("EDGERNN_CACHE", str(tmp_path / "cache"))
    home = _fake_sdk(tmp_path / "sdk", "all:\n\ttrue\n")
    before = _snapshot(home)
    copy = gap_sdk.prepare_sdk(home)
    assert copy.parent.name == gap_sdk.sdk_key(home)
    assert (copy / "configs" / "config" / "ai_deck.json").is_symlink()   # restored from its text form
    assert json.loads((copy / "configs" / "config" / "ai_deck.json").read_text()) == {"board": "ai_deck"}
    assert os.access(copy / "configs" / "ai_deck.sh", os.W_OK)
    for rel, _ in gap_sdk._walk(gap_sdk.overrides_dir()):
        assert (copy / rel).read_bytes() == (gap_sdk.overrides_dir() / rel).read_bytes()
    source = copy.parent / "source.json"
    before_source = source.stat().st_mtime_ns
    assert gap_sdk.prepare_sdk(home) == copy and source.stat().st_mtime_ns == before_source
    assert _snapshot(home) == before
    assert not (home / "configs" / "config" / "ai_deck.json").is_symlink()


def test_a_second_process_waits_for_the_lock_then_finds_the_copy(monkeypatch, tmp_path):
    monkeypatch.setenv("EDGERNN_CACHE", str(tmp_path / "cache"))
    home = _fake_sdk(tmp_path / "sdk", "all:\n\ttrue\n")
    key = gap_sdk.sdk_key(home)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")]))
    script = ("import sys; from edgernn.targets.gap8 import sdk as gap_sdk; "
              "print(gap_sdk.prepare_sdk(sys.argv[1], log=lambda m: print(m, flush=True)), flush=True)")
    with gap_sdk._locked(key, None):
        other = subprocess.Popen([sys.executable, "-c", script, str(home)], env=env, stdout=subprocess.PIPE, text=True)
        try:
            assert other.stdout.readline().startswith("waiting for another edgernn process")
            copy = gap_sdk._prepare_locked(home, key, None)          # this process copies meanwhile
        except BaseException:
            other.kill()
            raise
    lines = other.communicate(timeout=60)[0].splitlines()
    assert other.returncode == 0 and lines == [str(copy)]             # no second copy: it found ours


def test_sdk_key_follows_content(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGERNN_CACHE", str(tmp_path / "cache"))
    home = _fake_sdk(tmp_path / "sdk", "all:\n", read_only=False)
    (home / "configs" / "loop").symlink_to(".")                          # a loop is hashed as a link
    key = gap_sdk.sdk_key(home)
    assert key == gap_sdk.sdk_key(home)
    (home / "configs" / "ai_deck.sh").write_text("# two\n")              # same size, maybe the same mtime
    assert gap_sdk.sdk_key(home) != key


def test_the_key_and_the_copy_take_only_the_parts_edgernn_builds(tmp_path, monkeypatch):
    """A user's own work in the SDK (an example built in-tree, NNTool, the AutoTiler with its licensed
    library and download URL, a build of GVSOC in place) changes neither the key nor the copy."""
    monkeypatch.setenv("EDGERNN_CACHE", str(tmp_path / "cache"))
    home = _fake_sdk(tmp_path / "sdk", "all:\n", read_only=False)
    key = gap_sdk.sdk_key(home)
    outside = ["examples/pmsis/helloworld/BUILD/GAP8_V2/GCC_RISCV_FREERTOS/test", "tools/nntool/nntool.py",
               "tools/autotiler_v3/Autotiler/LibTile.a", "tools/autotiler_v3/.tiler_url",
               "tools/autotiler_v3/Emulation/BUILD/x.o", "gap8/gvsoc/__pycache__/x.pyc", "install/workstation/bin/gvsoc",
               "build/gvsoc/x.o", "utils/gapy/__pycache__/gapy.cpython-311.pyc", "libs/openmp/x.c",
               "gvsoc/gvsoc/models/cpu/iss/sa/ext/libbfd.a", "README.md"]
    for rel in outside:
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text("a user's work\n")
    assert gap_sdk.sdk_key(home, rehash=True) == key
    copy = gap_sdk.prepare_sdk(home)
    for rel in outside:
        assert not (copy / rel).exists(), rel
    assert (copy / "utils" / "gapy" / "gapy").is_file()
    (home / "gvsoc" / "gvsoc" / "models" / "utils" / "dpi_wrapper_impl.cpp").write_text("changed\n")
    assert gap_sdk.sdk_key(home, rehash=True) != key                      # a part edgernn builds


def test_the_sdk_bytes_are_read_once_then_vouched_for_by_their_stat(tmp_path, monkeypatch):
    """The content hash runs once; a later call (this process or another) finds the key by the stat
    fingerprint, unless a file is changed or `rehash` is asked."""
    monkeypatch.setenv("EDGERNN_CACHE", str(tmp_path / "cache"))
    home = _fake_sdk(tmp_path / "sdk", "all:\n", read_only=False)
    monkeypatch.setattr(gap_sdk, "RACY_SECONDS", -1.0)                  # as if written long ago
    hashed = []
    real = gap_sdk._content_key
    monkeypatch.setattr(gap_sdk, "_content_key", lambda *a: hashed.append(a) or real(*a))
    key = gap_sdk.sdk_key(home)
    assert len(hashed) == 1
    gap_sdk._KEYS.clear()                                                # as a new process
    assert gap_sdk.sdk_key(home) == key and len(hashed) == 1             # the stat index vouched
    assert gap_sdk.sdk_key(home, rehash=True) == key and len(hashed) == 2
    (home / "gap8" / "new.c").write_text("x\n")
    assert gap_sdk.sdk_key(home) != key and len(hashed) == 3             # another fingerprint: hashed


def test_a_file_changed_just_now_is_always_hashed(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGERNN_CACHE", str(tmp_path / "cache"))
    home = _fake_sdk(tmp_path / "sdk", "all:\n", read_only=False)
    hashed = []
    real = gap_sdk._content_key
    monkeypatch.setattr(gap_sdk, "_content_key", lambda *a: hashed.append(a) or real(*a))
    gap_sdk.sdk_key(home)
    gap_sdk.sdk_key(home)
    assert len(hashed) == 2                         # files younger than RACY_SECONDS: never taken on stat


@pytest.mark.parametrize("sdk", ["gap_sdk", "gap_sdk-4.8.0"])
def test_the_fixes_apply_to_each_supported_sdk(sdk, tmp_path):
    """Every edit finds its text in the SDK as upstream ships it, and leaves none of what it corrects."""
    from edgernn.targets.gap8 import sdk_fixes as gap_sdk_fixes

    home = SHARED / sdk
    if not home.is_dir():
        tool_unavailable(f"needs the GAP SDK {home}")
    for fix in gap_sdk_fixes.FIXES:
        (tmp_path / fix.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(home / fix.path, tmp_path / fix.path)
    applied = gap_sdk_fixes.apply_fixes(tmp_path)
    expected = {"iet-tiny-relocation", "cluster-core-xpulp"} | ({"glibc-sched-yield"} if sdk.endswith("4.8.0") else set())
    assert set(applied) == expected
    code = [line.split("//")[0] for line in (tmp_path / gap_sdk_fixes.IET).read_text().splitlines()]
    assert not [line for line in code if "%tiny" in line]
    core = (tmp_path / gap_sdk_fixes.CLUSTER_CORE).read_text()
    assert not re.search(r"^\s*p\.(elw|bclr)\b", core, re.M)
    assert "pthread_yield" not in (tmp_path / gap_sdk_fixes.DPI_WRAPPER).read_text()
    assert gap_sdk_fixes.apply_fixes(tmp_path) == []                    # applied twice: nothing left to do


def test_a_fix_whose_text_is_gone_is_one_clear_line(tmp_path):
    from edgernn.targets.gap8 import sdk_fixes as gap_sdk_fixes

    fix = next(f for f in gap_sdk_fixes.FIXES if f.name == "cluster-core-xpulp")
    (tmp_path / fix.path).parent.mkdir(parents=True)
    (tmp_path / fix.path).write_text("        p.elw t5, SOMETHING_ELSE(s0)\n")
    for other in gap_sdk_fixes.FIXES:
        if other.path != fix.path:
            (tmp_path / other.path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / other.path).write_text("".join(e.old + "\n" for e in other.edits if not e.optional))
    with pytest.raises(EdgeRNNError, match=r"fix cluster-core-xpulp does not apply to this GAP SDK's .*cluster_core\.S") as err:
        gap_sdk_fixes.apply_fixes(tmp_path)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("missing, named", [
    (["utils/json-tools"], "utils/json-tools"),
    (["utils/gapy/gapy"], "utils/gapy/gapy"),
    (["gap8"], "gap8"),
    (["rtos/pmsis/api"], "rtos/pmsis/api or rtos/pmsis/pmsis_api"),
])
def test_an_sdk_older_than_4_8_is_refused_naming_what_it_lacks(tmp_path, monkeypatch, missing, named):
    home = _fake_sdk(tmp_path / "sdk", "all:\n", read_only=False)
    for rel in missing:
        shutil.rmtree(home / rel) if (home / rel).is_dir() else (home / rel).unlink()
    monkeypatch.setenv("GAP_SDK_HOME", str(home))
    with pytest.raises(EdgeRNNError) as err:
        gap_sdk.sdk_home()
    message = str(err.value)
    assert f"lacks {named}" in message and "GAP SDK 4.8.0 or later" in message and "\n" not in message


def test_an_old_sdk_stops_build_before_any_conversion(tmp_path):
    """`edgernn build --board gvsoc_gap8` with a 3.x-like SDK: one line, exit 2, before the model is
    even read (the model file here does not exist)."""
    home = _fake_sdk(tmp_path / "sdk", "all:\n", read_only=False)
    shutil.rmtree(home / "utils" / "json-tools")
    (home / "utils" / "gapy" / "gapy").unlink()
    env = dict(os.environ, GAP_SDK_HOME=str(home), EDGERNN_CACHE=str(tmp_path / "cache"))
    for board in ("gvsoc_gap8", "ai_deck"):
        proc = subprocess.run([sys.executable, "-m", "edgernn", "build", str(tmp_path / "none.keras"), "--board", board,
                               "-o", str(tmp_path / f"out_{board}")], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "lacks utils/json-tools, utils/gapy/gapy" in lines[0] and "4.8.0" in lines[0], lines
        assert not (tmp_path / f"out_{board}").exists()


def _entry(base: Path, name: str, used: float) -> Path:
    entry = base / "gap_sdk" / name
    (entry / "sdk").mkdir(parents=True)
    (entry / "source.json").write_text("{}\n")
    (entry / "sdk" / "blob").write_bytes(b"x" * 1000)
    (entry / gap_sdk.LAST_USED).write_text("0\n")
    os.utime(entry / gap_sdk.LAST_USED, (used, used))
    return entry


def test_the_cache_keeps_the_most_recently_used_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGERNN_CACHE", str(tmp_path))
    now = time.time()
    entries = [_entry(tmp_path, f"{i:024x}", now - 100 * i) for i in range(6)]   # 0 newest
    other = tmp_path / "gap_sdk" / "mine"                                 # not edgernn's: left alone
    other.mkdir()
    (tmp_path / "gap_sdk" / ("f" * 24)).mkdir()                         # no source.json: not an entry
    assert [e for e, _ in gap_sdk.cache_entries()] == entries
    with gap_sdk._locked(entries[4].name, None):                          # in use by another process
        removed = gap_sdk.prune_cache(keep=3)
    assert removed == [entries[3], entries[5]]
    assert all(e.is_dir() for e in entries[:3] + [entries[4]]) and other.is_dir()
    assert not entries[3].exists() and not entries[5].exists()


# ---- fetching an SDK ----

@pytest.fixture(scope="module")
def sdk_repository(tmp_path_factory):
    """A git repository of the shared SDK (with a folder edgernn does not take), as a user's file:// URL."""
    require_tools("git")
    source = SHARED / "gap_sdk"
    if not source.is_dir():
        tool_unavailable(f"needs the GAP SDK {source}")
    repo = tmp_path_factory.mktemp("upstream") / "gap_sdk"
    shutil.copytree(source, repo, symlinks=True)
    (repo / "examples" / "big").mkdir(parents=True)
    (repo / "examples" / "big" / "data.bin").write_bytes(b"\0" * 100_000)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "sdk"],
                    ["config", "uploadpack.allowFilter", "true"],
                    ["config", "uploadpack.allowAnySHA1InWant", "true"]):
        subprocess.run(["git", *command], cwd=repo, env=env, check=True, capture_output=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                            check=True).stdout.strip()
    return f"file://{repo}", commit


def test_fetch_clones_only_the_parts_at_the_commit(sdk_repository, tmp_path, monkeypatch):
    url, commit = sdk_repository
    monkeypatch.setenv("EDGERNN_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GAP_SDK_HOME", raising=False)
    home = gap_sdk.fetch_sdk(url, commit)
    assert home == tmp_path / "cache" / gap_sdk.FETCHED / commit
    assert (home / "configs" / "ai_deck.sh").is_file() and (home / "utils" / "gapy" / "gapy").is_file()
    assert not (home / "examples").exists()                               # sparse: only the parts
    assert gap_sdk.sdk_home() == home.resolve()                           # found with $GAP_SDK_HOME unset
    # the same parts as the shared SDK: the same key, so a GVSOC built from either serves both
    assert gap_sdk.sdk_key(home) == gap_sdk.sdk_key((SHARED / "gap_sdk").resolve())
    assert gap_sdk.fetch_sdk(url, commit) == home                         # a second fetch does nothing
    with pytest.raises(EdgeRNNError, match=r"fetching the GAP SDK from file://.* failed at git fetch") as err:
        gap_sdk.fetch_sdk(url, "0" * 40)
    assert "\n" not in str(err.value)
    assert not list((tmp_path / "cache" / gap_sdk.FETCHED).glob(".*staging*"))  # nothing half-written


def test_build_failure_names_the_step_and_the_log(monkeypatch, tmp_path):
    require_tools(*BUILD_TOOLS)
    monkeypatch.setenv("EDGERNN_CACHE", str(tmp_path / "cache"))
    home = _fake_sdk(tmp_path / "sdk", "all:\n\t@echo 'fake.c:1: error: no GVSOC here'; exit 3\ninstall:\n")
    with pytest.raises(EdgeRNNError) as err:
        gap_sdk.build_gvsoc(home)
    message = str(err.value)
    assert "step json-tools" in message and "error: no GVSOC here" in message and "\n" not in message
    log = Path(message.rsplit("log: ", 1)[1])
    assert log.is_file() and "no GVSOC here" in log.read_text()
    assert not (log.parent / gap_sdk.MARKER).exists()                    # so the next call builds again


def test_interrupted_build_kills_its_whole_process_group(tmp_path):
    """SIGTERM to `python -m edgernn.targets.gap8.sdk` mid-step: exit 143, and make's children die with it."""
    require_tools(*BUILD_TOOLS)
    pids = tmp_path / "pids"
    home = _fake_sdk(tmp_path / "sdk", f"all:\n\tsleep 300 & echo $$! > {pids}; wait\ninstall:\n")
    env = dict(os.environ, EDGERNN_CACHE=str(tmp_path / "cache"), GAP_SDK_HOME=str(home),
               PYTHONPATH=os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "edgernn.targets.gap8.sdk"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not (pids.is_file() and pids.read_text().strip()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the fake build step never started"
            time.sleep(0.02)
        sleeper = int(pids.read_text())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 143
        assert wait_until(lambda: not alive(sleeper)), f"the build step's child {sleeper} outlived the build"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---- GVSOC itself ----

def test_build_gvsoc_is_cached_and_leaves_the_sdk_untouched(gvsoc_build, monkeypatch):
    install, home, (stamp, snapshot) = gvsoc_build
    assert (install / "bin" / "gvsoc_launcher").is_file()
    assert not (install / "python" / "sv").exists()                     # pruned: the RTL-cosimulation variant
    marker_path = install.parent.parent.parent / gap_sdk.MARKER
    marker = json.loads(marker_path.read_text())
    assert marker["key"] == gap_sdk.sdk_key(home) and marker["install"] == str(install)
    # The SDK folder: nothing written, nothing re-moded, by the copy or the build.
    assert _changed_since(home, stamp) == []
    assert _snapshot(home) == snapshot

    # A second call is a cache hit: no copy, no make, the marker as it was.
    def no_work(*args, **kwargs):
        raise AssertionError("a cached GVSOC build ran a build step")

    monkeypatch.setattr(gap_sdk, "run_in_group", no_work)
    monkeypatch.setattr(gap_sdk, "_prepare_locked", no_work)
    before = marker_path.stat().st_mtime_ns
    assert gap_sdk.build_gvsoc(home) == install
    assert marker_path.stat().st_mtime_ns == before


def test_gvsoc_env_points_at_the_private_copy(gvsoc_build):
    install, home, _ = gvsoc_build
    env = gvsoc.gvsoc_env(install)
    copy = install.parent.parent
    assert env["GAP_SDK_HOME"] == str(copy) != str(home)
    assert env["GVSOC_PATH"] == str(install / "python")                  # the launcher dies without it
    assert str(install / "lib") in env["LD_LIBRARY_PATH"].split(":")
    assert str(copy / "utils" / "gapy") in env["PYTHONPATH"].split(":")
    assert str(home) not in env["PATH"].split(":") + env["PYTHONPATH"].split(":")


def test_uart_echo_burst_and_exit_code(gvsoc_build, echo_elf, tmp_path):
    """A 1,025-byte burst at 115200 baud comes back exactly; the firmware's exit code is the
    launcher's exit status; the PULP counters count."""
    install, _, _ = gvsoc_build
    payload = bytes(random.Random(1025).randrange(256) for _ in range(1025))
    with gvsoc.start_gvsoc(echo_elf, tmp_path / "run", install=install) as sim:
        assert sim.url == f"socket://127.0.0.1:{sim.port}"
        uart = Uart(sim.port)
        try:
            ready = uart.read_line()
            assert ready.startswith("GVSOC-ECHO READY"), ready
            boot = _fields(ready)
            assert 45_000_000 < int(boot["freq"]) < 55_000_000 and int(boot["div"]) > 0

            uart.send(b"E" + len(payload).to_bytes(2, "little") + payload)
            echoed = uart.read_exactly(len(payload))
            mismatches = [i for i in range(len(payload)) if echoed[i] != payload[i]]
            assert not mismatches, f"{len(mismatches)} bytes differ, first at {mismatches[:8]}"
            report = _fields(uart.read_line())
            assert int(report["n"]) == len(payload) and int(report["sum"], 16) == sum(payload)
            assert int(report["cycles"]) > 0 and int(report["instret"]) > 0

            uart.send(b"L" + (10_000).to_bytes(4, "little"))
            loop = _fields(uart.read_line())
            assert int(loop["instret"]) >= 2 * 10_000 and int(loop["cycles"]) >= int(loop["instret"])

            uart.send(b"Q" + bytes([42]))
            assert uart.read_line() == "~~~GVSOC ECHO DONE~~~"
        finally:
            uart.close()
        assert sim.wait(60) == 42
        assert "telnet connected" in sim.output()


def test_second_run_of_the_same_elf_skips_gapy(gvsoc_build, echo_elf, tmp_path, monkeypatch):
    install, _, _ = gvsoc_build
    work = tmp_path / "run"
    first = gvsoc.prepare_gvsoc_run(echo_elf, work, 12345, install)
    config = json.loads(first.read_text())
    uart = config["target"]["system_tree"]["board"]["uart"]
    assert uart["telnet"] is True and uart["telnet_port"] == 12345 and uart["stdout"] is False

    def no_gapy(*args, **kwargs):
        raise AssertionError("gapy ran again for the same ELF")

    monkeypatch.setattr(gap_sdk.subprocess, "run", no_gapy)
    second = gvsoc.prepare_gvsoc_run(echo_elf, work, 12346, install)
    assert json.loads(second.read_text())["target"]["system_tree"]["board"]["uart"]["telnet_port"] == 12346
    command = gvsoc.gvsoc_run_command(echo_elf, work, 12346, install)
    assert command == [str(install / "bin" / "gvsoc_launcher"), f"--config={second}"]


def test_a_taken_uart_port_is_a_clear_error(gvsoc_build, echo_elf, tmp_path):
    """GVSOC runs on without a UART when its port is taken: start_gvsoc says so instead of waiting."""
    install, _, _ = gvsoc_build
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(EdgeRNNError, match=f"could not listen on 127.0.0.1:{port}"):
            gvsoc.start_gvsoc(echo_elf, tmp_path / "run", uart_port=port, install=install)


def test_a_chosen_port_taken_before_gvsoc_listens_is_chosen_again(gvsoc_build, echo_elf, tmp_path, monkeypatch):
    """A port edgernn chose (free_port) that another process takes first: start_gvsoc chooses a new one, as parallel
    runs need; a port the caller named is not replaced (above)."""
    install, _, _ = gvsoc_build
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        chosen = [taken.getsockname()[1]]
        real = gvsoc.free_port
        monkeypatch.setattr(gvsoc, "free_port", lambda: chosen.pop(0) if chosen else real())
        with gvsoc.start_gvsoc(echo_elf, tmp_path / "run", install=install) as sim:
            assert sim.port != taken.getsockname()[1] and sim.running()


def test_a_uart_run_leaves_the_esp32s_fixed_port_to_others(gvsoc_build, echo_elf, tmp_path):
    """The deck's ESP32 model is loaded in every run, and over the UART it serves no one: it must not want the
    SDK configuration's fixed port, which another run (or anything else) may hold. A run whose ESP32 could not
    listen there was taken for a run whose UART port was taken, chosen again and refused three times."""
    install, _, _ = gvsoc_build
    config = gvsoc.prepare_gvsoc_run(echo_elf, tmp_path / "prep", 12345, install)
    sdk_port = int(json.loads((config.parent / "gvsoc_config.json").read_text())
                   ["target"]["system_tree"]["board"]["wifi"]["port"])
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        with contextlib.suppress(OSError):      # held by another run already: the same case
            held.bind(("127.0.0.1", sdk_port))
            held.listen()
        with gvsoc.start_gvsoc(echo_elf, tmp_path / "run", install=install) as sim:
            uart = Uart(sim.port)
            try:
                assert uart.read_line().startswith("GVSOC-ECHO READY")
            finally:
                uart.close()
            out = sim.output()
    assert "edgernn-esp32: listening on 127.0.0.1:" in out, out
    assert "cannot listen" not in out, out


UART_TB = "gap8/gvsoc/dpi-models/models/uart/uart/uart.cpp"


def test_the_self_test_passed_on_the_build(gvsoc_build):
    install, _, _ = gvsoc_build
    marker = json.loads((install.parent.parent.parent / gap_sdk.MARKER).read_text())
    test = marker["selftest"]
    assert test["mismatches"] == 0 and test["bytes"] >= 1024 and max(test["bursts"]) >= 1024
    assert test["baud"] == 115200


def test_the_self_test_fails_with_upstreams_uart_testbench(gvsoc_build, tmp_path):
    """The same GVSOC with the UART testbench built from the SDK's own uart.cpp, as its Makefile builds
    it: the self-test fails with one line saying the bytes shift, and the entry is not marked done."""
    from edgernn.targets.gap8.gvsoc_check import SelfTestFailed

    install, home, _ = gvsoc_build
    require_tools("g++")
    key_dir = install.parent.parent.parent
    entry = tmp_path / "entry"
    shutil.copytree(key_dir, entry, symlinks=True, ignore=shutil.ignore_patterns("selftest"))
    (entry / gap_sdk.MARKER).unlink()
    (entry / gap_sdk.BUILT).write_text((key_dir / gap_sdk.BUILT).read_text().replace(str(key_dir), str(entry)))
    upstream = entry / "sdk" / "install" / "workstation"
    assert (home / UART_TB).read_text() != (gap_sdk.overrides_dir() / UART_TB).read_text()
    subprocess.run(["g++", str(home / UART_TB), "-o", str(upstream / "lib" / "uart.so"), "-O2", "-fpic", "-std=c++11",
                    f"-I{upstream / 'include'}", "-shared", f"-L{upstream / 'lib'}"], check=True, capture_output=True)
    with pytest.raises(SelfTestFailed) as err:
        gap_sdk._self_test(entry, upstream, None)
    message = str(err.value)
    # how the bytes come out garbled depends on where the two bit clocks meet (often shifted by one bit)
    assert re.search(r"GVSOC's UART self-test failed: [1-9]\d* of \d+ bytes echoed back at 115200 baud differ", message)
    assert "not marked done" in message and "\n" not in message and err.value.exit_code == 3
    assert json.loads((entry / gap_sdk.SELFTEST_FAILED).read_text())["error"] == message
    assert not (entry / gap_sdk.MARKER).exists()


def test_setup_fetch_from_the_command_line(sdk_repository, gvsoc_build, tmp_path):
    """`edgernn setup gvsoc --fetch`: the SDK cloned into the cache, then GVSOC for it (here the same parts
    as $GAP_SDK_HOME's, so the build already in the cache serves: copied into this test's own cache)."""
    url, commit = sdk_repository
    install, _, _ = gvsoc_build
    key_dir = install.parent.parent.parent
    cache = tmp_path / "cache"
    shutil.copytree(key_dir, cache / "gap_sdk" / key_dir.name, symlinks=True)
    env = {k: v for k, v in os.environ.items() if k != "GAP_SDK_HOME"}
    env["EDGERNN_CACHE"] = str(cache)
    proc = subprocess.run([sys.executable, "-m", "edgernn", "setup", "gvsoc", "--fetch", "--sdk-url", url,
                           "--sdk-commit", commit], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    fetched = cache / gap_sdk.FETCHED / commit
    assert (fetched / "configs" / "ai_deck.sh").is_file()
    assert "GVSOC ready:" in proc.stdout and "UART self-test: 1282 bytes echoed exactly at 115200 baud" in proc.stdout
    assert f"export GAP_SDK_HOME={fetched}" in proc.stdout and f"cache: {cache}" in proc.stdout
    bad = subprocess.run([sys.executable, "-m", "edgernn", "setup", "gvsoc", "--sdk-commit", commit], env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--sdk-commit go with --fetch" in bad.stderr

