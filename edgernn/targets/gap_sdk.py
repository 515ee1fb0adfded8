"""GreenWaves' GAP SDK as edgernn uses it: a private copy in edgernn's cache, and GVSOC built there
(running it: ``edgernn.targets.gvsoc``).

``$GAP_SDK_HOME`` is never written to (in CI it is read-only). ``prepare_sdk`` copies it, with
edgernn's replacement files from ``templates/gap_sdk/overrides/`` on top, to
``cache_root()/gap_sdk/<key>/sdk``, where ``key`` is a content hash of both. ``build_gvsoc`` builds
GVSOC in that copy with the SDK's own make flow (its CMake flow refuses GAP8_V2), strips it and writes
a marker last; a second call with the same key finds the marker and runs nothing.

No TensorFlow here: the CLI's ``--help`` and the board adapters import this module.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

from edgernn import procs
from edgernn.errors import EdgeRNNError
from edgernn.resources import templates_dir

SDK_CONFIG = "configs/ai_deck.sh"      # the board configuration every SDK command is run under
GVSOC_TARGET = "ai_deck"                # gapy's target: the AI-deck board around GAP8 rev. 1
SDK_HINT = "export GAP_SDK_HOME=/path/to/gap_sdk"

# Part of the cache key: a change to how edgernn copies, builds or prunes the SDK rebuilds it.
LAYOUT_VERSION = "gvsoc-build-1"

# Never copied from $GAP_SDK_HOME: version control, caches, and what an in-tree build left behind.
SKIP_ANYWHERE = {".git", "__pycache__", ".sconsign.dblite"}
SKIP_TOP = {"install", "build"}

# The SDK's make flow for GVSOC, in order: (step name, make arguments, parallel jobs allowed).
# json-tools archives with ar from several jobs at once under -j, so it runs serially, as does every
# small step; the two GVSOC trees (about 95% of the build) take the jobs.
GVSOC_STEPS: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("json-tools", ("-C", "utils/json-tools", "all", "install"), False),
    ("gap_configs", ("-C", "utils/gap_configs", "all_scons"), False),
    ("dpi-models", ("-C", "gap8/gvsoc/dpi-models", "build", "install"), True),
    ("runner", ("-C", "gvsoc/runner", "sdk.build"), False),
    ("archi", ("-C", "gap8/rtos/pulp", "build.archi"), False),
    ("gvsoc", ("-C", "gvsoc/gvsoc", "build"), True),
    ("gvsoc_gap", ("-C", "gvsoc/gvsoc_gap", "build"), True),
)
DEFAULT_JOBS = 2

MARKER = "gvsoc.json"                   # beside sdk/: written last, names what was built
BUILD_LOG = "build.log"

# Variables of the caller's environment that would change what make does.
MAKE_VARIABLES = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "BUILD_DIR", "INSTALL_DIR",
                  "TARGET_INSTALL_DIR")
PATH_VARIABLES = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "PULP_CONFIGS_PATH")
SHELL_VARIABLES = {"PWD", "OLDPWD", "SHLVL", "_", "HOME"}

Log = Callable[[str], None] | None


def _say(log: Log, message: str) -> None:
    if log is not None:
        log(message)


# ---- where things are ----

def cache_root() -> Path:
    """edgernn's cache: ``$EDGERNN_CACHE``, else ``$XDG_CACHE_HOME/edgernn``, else ``~/.cache/edgernn``."""
    if os.environ.get("EDGERNN_CACHE"):
        return Path(os.environ["EDGERNN_CACHE"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "edgernn"
    return Path.home() / ".cache" / "edgernn"


def sdk_home(required: bool = True) -> Path | None:
    """The GAP SDK named by ``$GAP_SDK_HOME``; a one-line error (or None) when it is not set up."""
    home = os.environ.get("GAP_SDK_HOME")
    problem = None
    if not home:
        problem = "$GAP_SDK_HOME is unset"
    elif not (Path(home) / SDK_CONFIG).is_file():
        problem = f"$GAP_SDK_HOME={home} has no {SDK_CONFIG}"
    if problem:
        if required:
            raise EdgeRNNError(f"the GAP SDK is not set up ({problem}): {SDK_HINT}")
        return None
    return Path(home).resolve()


def overrides_dir() -> Path:
    """edgernn's replacement files for the SDK, at the SDK's relative paths (may be absent)."""
    return templates_dir() / "gap_sdk" / "overrides"


# ---- the private copy ----

def _walk(root: Path) -> Iterator[tuple[str, Path]]:
    """(relative path, path) of every file and symlink under root, sorted, minus SKIP_*. Symlinks are
    never followed (a link to a folder is one entry), so a link loop cannot trap the walk."""
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        top = here == root
        keep = []
        for d in sorted(dirnames):
            if d in SKIP_ANYWHERE or (top and d in SKIP_TOP):
                continue
            if (here / d).is_symlink():
                filenames.append(d)
            else:
                keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            if name in SKIP_ANYWHERE:
                continue
            path = here / name
            yield path.relative_to(root).as_posix(), path


def _hash_tree(digest, label: str, root: Path) -> int:
    count = 0
    for rel, path in _walk(root):
        digest.update(f"{label}\0{rel}\0".encode())
        if path.is_symlink():
            digest.update(b"L" + os.readlink(path).encode())
        elif path.is_file():
            digest.update(b"F" + (b"x" if os.access(path, os.X_OK) else b"-"))
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
        digest.update(b"\0")
        count += 1
    return count


def sdk_key(home: Path) -> str:
    """sha256 (24 hex digits) over the SDK tree, edgernn's overrides and LAYOUT_VERSION: relative
    paths, file bytes, executable bits and symlink targets."""
    digest = hashlib.sha256(LAYOUT_VERSION.encode() + b"\0")
    _hash_tree(digest, "sdk", Path(home))
    _hash_tree(digest, "override", overrides_dir())
    return digest.hexdigest()[:24]


def debian_toolchain() -> Path:
    """edgernn's wrapper around Debian's riscv64-unknown-elf tools under the SDK's names
    (templates/gap_sdk/toolchain), staged in the cache with execute bits (a wheel may not keep them),
    keyed by its content; returns its bin/ folder."""
    src = templates_dir() / "gap_sdk" / "toolchain"
    digest = hashlib.sha256()
    _hash_tree(digest, "toolchain", src)
    dest = cache_root() / "gap_toolchain" / digest.hexdigest()[:16]
    if not (dest / "bin").is_dir():
        staging = dest.with_name(dest.name + f".{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(src, staging)
        for tool in (staging / "bin").iterdir():
            tool.chmod(0o755)
        try:
            os.replace(staging, dest)
        except OSError:              # another process put it in place first
            shutil.rmtree(staging, ignore_errors=True)
            if not (dest / "bin").is_dir():
                raise
    return dest / "bin"


def _copy_tree(src: Path, dst: Path) -> None:
    for rel, path in _walk(src):
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            target.unlink()            # an override replaces a file; it never writes through a link
        if path.is_symlink():
            os.symlink(os.readlink(path), target)
        else:
            shutil.copy2(path, target)


def _make_writable(root: Path) -> None:
    """The SDK may be read-only (it is in CI), and copies keep modes: the build writes everywhere."""
    for dirpath, dirnames, filenames in os.walk(root):
        os.chmod(dirpath, os.stat(dirpath).st_mode | 0o700)
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o600)


def _restore_symlinks(root: Path) -> list[str]:
    """Turn symlinks that were flattened into text files back into symlinks.

    A checkout or archive made without symlink support stores a link as a small file holding the
    target path (the SDK subset edgernn is developed against has 36, e.g. ``utils/gap_configs/
    configs/config/ai_deck.json`` holding ``../boards/ai_deck.json``); the SDK's tools then read a
    path where they expect JSON.
    A file is taken for such a link only when it is under 256 bytes, one line with no newline, a
    relative path, and names an existing file or folder inside the copy."""
    restored = []
    for rel, path in list(_walk(root)):
        if path.is_symlink() or not path.is_file() or path.stat().st_size >= 256:
            continue
        data = path.read_bytes()
        if not data or b"\n" in data or b"\0" in data or b" " in data or data.startswith(b"/"):
            continue
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            continue
        target = (path.parent / text).resolve()
        if target == path.resolve() or not target.exists() or root.resolve() not in target.parents:
            continue
        path.unlink()
        os.symlink(text, path)
        restored.append(rel)
    return restored


@contextlib.contextmanager
def _locked(key: str, log: Log) -> Iterator[None]:
    """An exclusive lock per key, so two processes (pytest workers, two shells) never copy or build
    the same SDK at once; the second waits, then finds the work done."""
    base = cache_root() / "gap_sdk"
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f"{key}.lock", "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say(log, f"waiting for another edgernn process that prepares {base / key}")
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _key_dir(key: str) -> Path:
    return cache_root() / "gap_sdk" / key


def _prepare_locked(home: Path, key: str, log: Log) -> Path:
    final = _key_dir(key)
    if (final / "sdk" / SDK_CONFIG).is_file():
        return final / "sdk"
    # Copies are staged only under the key's lock: any staging folder left is a dead process's.
    for stale in final.parent.glob(f"{key}.staging-*"):
        shutil.rmtree(stale, ignore_errors=True)
    staging = final.with_name(f"{key}.staging-{os.getpid()}")
    try:
        _say(log, f"copying the GAP SDK from {home} to {final / 'sdk'}")
        _copy_tree(home, staging / "sdk")
        _make_writable(staging)
        restored = _restore_symlinks(staging / "sdk")
        _copy_tree(overrides_dir(), staging / "sdk")
        _make_writable(staging)
        if restored:
            _say(log, f"restored {len(restored)} symlinks stored as text files (e.g. {restored[0]})")
        (staging / "source.json").write_text(json.dumps(
            {"gap_sdk_home": str(home), "key": key, "layout": LAYOUT_VERSION,
             "overrides": [rel for rel, _ in _walk(overrides_dir())], "restored_symlinks": restored},
            indent=1) + "\n")
        shutil.rmtree(final, ignore_errors=True)
        os.rename(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final / "sdk"


def prepare_sdk(home: str | os.PathLike | None = None, log: Log = None) -> Path:
    """A writable copy of the SDK (plus edgernn's overrides) in the cache; returns its root. Staged
    beside its final place and renamed into it, so a copy is there whole or not at all."""
    home = Path(home).resolve() if home is not None else sdk_home()
    key = sdk_key(home)
    with _locked(key, log):
        return _prepare_locked(home, key, log)


# ---- building GVSOC ----

def _sourced_environment(sdk: Path) -> dict:
    """What ``configs/ai_deck.sh`` sets, found by sourcing it in a clean environment: plain
    variables, and the entries it puts on the path-like ones."""
    base = {"HOME": os.environ.get("HOME", "/"), "PATH": "/usr/bin:/bin"}
    script = f"source {shlex.quote(str(sdk / SDK_CONFIG))} >/dev/null 2>&1; env -0"
    proc = subprocess.run(["bash", "-c", script], env=base, cwd=sdk, capture_output=True, check=True)
    sourced = dict(item.split("=", 1) for item in proc.stdout.decode().split("\0") if "=" in item)
    plain = {k: v for k, v in sourced.items()
             if k not in PATH_VARIABLES and k not in SHELL_VARIABLES and base.get(k) != v}
    # Order matters: the script appends $GAP_SDK_HOME to PATH, and once the build has made
    # $GAP_SDK_HOME/install, that folder put first would shadow /usr/bin/install.
    prepend, append = {}, {}
    for name in PATH_VARIABLES:
        before = [p for p in base.get(name, "").split(":") if p]
        after = [p for p in sourced.get(name, "").split(":") if p]
        anchors = [i for i, p in enumerate(after) if p in before]
        head, tail = (after[:anchors[0]], after[anchors[-1] + 1:]) if anchors else (after, [])
        prepend[name] = [p for p in head if p not in before]
        append[name] = [p for p in tail if p not in before]
    return {"set": plain, "prepend": prepend, "append": append}


def _environment(sourced: dict) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in MAKE_VARIABLES}
    env.update(sourced["set"])
    for name in PATH_VARIABLES:
        head, tail = sourced["prepend"].get(name, []), sourced["append"].get(name, [])
        rest = [p for p in env.get(name, "").split(":") if p and p not in head and p not in tail]
        env[name] = ":".join(head + rest + tail)
    return env


def run_in_group(command: list[str], *, cwd: Path, env: dict[str, str], log_file) -> int:
    """Run a command in its own process group, output to log_file; on any exception (Ctrl-C, SIGTERM,
    a failure in the caller) the whole group is ended before it propagates (edgernn.procs)."""
    return procs.run(command, cwd=cwd, env=env, stdout=log_file, stderr=subprocess.STDOUT).returncode


def _first_error(log_path: Path) -> str:
    """The first compiler-style error (``error:``) of the log's end, else make's first ``***`` line."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()[-400:]
    except OSError:
        return ""
    for pattern in ("error:", "***"):
        for line in lines:
            if pattern in line.lower():
                return line.strip()[:200]
    return ""


def _is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _prune_install(sdk: Path, log: Log) -> None:
    """Strip the install and drop what running GVSOC never loads: the SystemVerilog (``sv``) variant
    of the engine and models (GVSOC inside an RTL simulator), and the build folder (~700 MB)."""
    install = sdk / "install"
    for path in (install / "workstation" / "python" / "sv", sdk / "build"):
        shutil.rmtree(path, ignore_errors=True)
    for path in install.rglob("libpulpvp-sv.so"):
        path.unlink()
    strip = shutil.which("strip")
    if strip is None:
        _say(log, "strip is not installed: GVSOC stays unstripped (about 270 MB instead of 25 MB)")
        return
    elfs = [str(p) for p in install.rglob("*") if p.is_file() and not p.is_symlink() and _is_elf(p)]
    for start in range(0, len(elfs), 64):
        subprocess.run([strip, "--strip-unneeded", *elfs[start:start + 64]], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _tree_bytes(root: Path) -> int:
    return sum(p.lstat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def _read_marker(key_dir: Path) -> dict | None:
    try:
        marker = json.loads((key_dir / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return marker if marker.get("layout") == LAYOUT_VERSION else None


def _check_build_tools() -> None:
    missing = [t for t in ("make", "g++", "cmake", "scons", "rsync", "bash") if shutil.which(t) is None]
    if missing:
        raise EdgeRNNError(f"building GVSOC needs {', '.join(missing)}: apt-get install --no-install-recommends "
                           "build-essential cmake scons rsync")


def build_gvsoc(home: str | os.PathLike | None = None, log: Log = None, force: bool = False,
                jobs: int = DEFAULT_JOBS) -> Path:
    """Build GVSOC for GAP8 from the SDK in the cache (once per key) and return its install folder
    (``<copy>/install/workstation``: bin/gvsoc_launcher, python/, lib/). A build that did not finish
    leaves no marker and is redone from a fresh copy. A failure raises EdgeRNNError naming the step
    and the log."""
    home = Path(home).resolve() if home is not None else sdk_home()
    key = sdk_key(home)
    key_dir = _key_dir(key)
    install = key_dir / "sdk" / "install" / "workstation"
    if not force and _read_marker(key_dir) is not None:
        return install
    with _locked(key, log):
        if not force and _read_marker(key_dir) is not None:
            return install                 # another process built it while we waited
        _check_build_tools()
        # A partial build may have written anywhere in the copy: start again from a fresh one.
        shutil.rmtree(key_dir, ignore_errors=True)
        sdk = _prepare_locked(home, key, log)
        sourced = _sourced_environment(sdk)
        env = _environment(sourced)
        log_path = key_dir / BUILD_LOG
        started = time.monotonic()
        with open(log_path, "w") as log_file:
            for name, args, parallel in GVSOC_STEPS:
                command = ["make", f"-j{max(1, jobs)}" if parallel else "-j1", *args]
                step_env = dict(env, BUILD_DIR=str(sdk / "build" / name))
                _say(log, f"GVSOC build: {name} ({shlex.join(command)})")
                log_file.write(f"\n==== {name}: {shlex.join(command)}\n")
                log_file.flush()
                status = run_in_group(command, cwd=sdk, env=step_env, log_file=log_file)
                if status != 0:
                    detail = _first_error(log_path)
                    raise EdgeRNNError(f"building GVSOC failed at step {name} (`{shlex.join(command)}` "
                                       f"exited {status}{': ' + detail if detail else ''}); log: {log_path}")
        seconds = time.monotonic() - started
        if not (install / "bin" / "gvsoc_launcher").is_file():
            raise EdgeRNNError(f"building GVSOC finished without bin/gvsoc_launcher in {install}; log: {log_path}")
        _prune_install(sdk, log)
        marker = {"layout": LAYOUT_VERSION, "key": key, "gap_sdk_home": str(home), "install": str(install),
                  "build_seconds": round(seconds, 1), "install_bytes": _tree_bytes(sdk / "install"),
                  "environment": sourced}
        tmp = key_dir / (MARKER + ".tmp")
        tmp.write_text(json.dumps(marker, indent=1) + "\n")
        os.rename(tmp, key_dir / MARKER)
        _say(log, f"GVSOC built in {seconds:.0f} s: {install}")
        return install


def main(argv: list[str] | None = None) -> int:
    """``python -m edgernn.targets.gap_sdk [--force]``: build GVSOC (or find it built) and print its install."""
    argv = sys.argv[1:] if argv is None else argv
    procs.install_signal_handlers()
    try:
        install = build_gvsoc(log=lambda m: print(m, file=sys.stderr), force="--force" in argv)
    except EdgeRNNError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except procs.Interrupted as stop:
        return 128 + stop.signum
    except KeyboardInterrupt:
        return 130
    finally:
        procs.stop_all()
    print(install)
    return 0


if __name__ == "__main__":
    sys.exit(main())
