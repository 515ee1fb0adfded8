"""GreenWaves' GAP SDK as edgernn uses it: a private copy in edgernn's cache, and GVSOC built there
(running it: ``edgernn.targets.gap8.gvsoc``; its UART self-test: ``edgernn.targets.gap8.gvsoc_check``).

``$GAP_SDK_HOME`` is never written to (in CI it is read-only). ``prepare_sdk`` copies the parts of it
that the firmware build and GVSOC use (``SDK_PARTS``), puts edgernn's corrections on top
(``templates/targets/gap8/sdk/overrides/`` and ``edgernn.targets.gap8.sdk_fixes``), to
``cache_root()/gap_sdk/<key>/sdk``, where ``key`` is a content hash of those parts and the corrections.
Nothing else of the SDK is read: a user's own work elsewhere in it (an example built in-tree, NNTool,
the AutoTiler and its licensed library) neither changes the key nor enters the cache. The content hash
is computed once per process and remembered against a cheap stat fingerprint of the same files
(``stat-index.json``), so a GVSOC start does not read the SDK's bytes again.

``build_gvsoc`` builds GVSOC in that copy with the SDK's own make flow (its CMake flow refuses GAP8_V2),
strips it, proves its UART with a burst echo both ways at once (``gvsoc_check``) and writes a marker
last; a second call with the same key finds the marker and runs nothing. Only the ``KEEP_ENTRIES``
most recently used entries are kept.

``fetch_sdk`` clones upstream gap_sdk at a pinned commit, only those parts, into the cache, for a user
with no SDK at all.

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
from typing import Iterator

from edgernn import procs
from edgernn.errors import EdgeRNNError
from edgernn.resources import cache_root, templates_dir
from edgernn.targets.gap8.toolchain import gap_compiler  # noqa: F401  (where board adapters ask)
from edgernn.targets.gap8.gvsoc_install import (BUILT, GVSOC_TARGET, LAYOUT_VERSION, MARKER, PATH_VARIABLES, Log,
                                           environment, read_json, read_marker, say)

SDK_CONFIG = "configs/ai_deck.sh"      # the board configuration every SDK command is run under
SDK_HINT = "export GAP_SDK_HOME=/path/to/gap_sdk"


# The parts of a GAP SDK that the ai_deck firmware build and GVSOC read, relative to $GAP_SDK_HOME; the
# only ones copied and hashed. 4.8.0 names the PMSIS API and BSP pmsis_api and pmsis_bsp, later
# releases api, bsp, archi and implem: each release has the ones it has.
SDK_PARTS = (
    "configs", "gap8", "gvsoc",
    "rtos/freeRTOS", "rtos/pulp",
    "rtos/pmsis/api", "rtos/pmsis/archi", "rtos/pmsis/bsp", "rtos/pmsis/implem",
    "rtos/pmsis/pmsis_api", "rtos/pmsis/pmsis_bsp",
    "utils/rules", "utils/json-tools", "utils/gap_configs", "utils/gapy", "utils/bin",
    "tools/ld", "tools/autotiler_v3/Emulation",
)
# What every supported SDK (4.8.0 and later) has; an SDK that lacks one is refused before any work.
REQUIRED_PARTS = (SDK_CONFIG, "utils/json-tools", "utils/gapy/gapy", "utils/gap_configs", "gap8", "gvsoc",
                  "rtos/freeRTOS")
PMSIS_API = ("rtos/pmsis/api", "rtos/pmsis/pmsis_api")      # one of them: master, 4.8.0
OLDEST_SDK = "4.8.0"
TESTED_SETUP = "Bitcraze's AI-deck docker image (bitcraze/aideck, GAP SDK 4.8.0) or upstream gap_sdk master"

# Never copied, wherever they are: version control, caches, what an in-tree build left behind, and
# what is licensed or private (the AutoTiler's library and the URL its download was registered for).
SKIP_ANYWHERE = {".git", "__pycache__", ".sconsign.dblite", "BUILD", "LibTile.a", ".tiler_url", "libbfd.a"}
SKIP_TOP = {"install", "build"}

KEEP_ENTRIES = 3                        # cache entries kept, most recently used first
LAST_USED = "last_used"                 # in each entry: touched whenever the entry is used
STAT_INDEX = "stat-index.json"          # cache_root()/gap_sdk/: stat fingerprint -> content key

# `edgernn setup gvsoc --fetch`: upstream gap_sdk at the commit edgernn is tested against.
UPSTREAM_URL = "https://github.com/GreenWaves-Technologies/gap_sdk.git"
UPSTREAM_COMMIT = "a23026507efe57410b98c5945544cff3150eb996"   # master, release-v4.22.0-15-ga2302650
FETCHED = "gap_sdk_src"                 # cache_root()/gap_sdk_src/<commit>/: fetched SDKs

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

SELFTEST_FAILED = "selftest-failed.json"  # beside sdk/: the self-test failed; why
BUILD_LOG = "build.log"

SHELL_VARIABLES = {"PWD", "OLDPWD", "SHLVL", "_", "HOME"}


# ---- where things are (cache_root: edgernn.resources) ----

def fetched_sdk() -> Path | None:
    """The SDK that ``edgernn setup gvsoc --fetch`` put in the cache (the newest, if several), or None."""
    root = cache_root() / FETCHED
    found = [d for d in root.glob("*") if (d / SDK_CONFIG).is_file() and not d.name.startswith(".")]
    return max(found, key=lambda d: d.stat().st_mtime) if found else None


def missing_parts(home: Path) -> list[str]:
    """What a supported SDK (4.8.0 or later) has and this one lacks."""
    missing = [part for part in REQUIRED_PARTS if not (home / part).exists()]
    if not any((home / p).is_dir() for p in PMSIS_API):
        missing.append(" or ".join(PMSIS_API))
    return missing


def check_sdk(home: Path) -> Path:
    """home, once it is known to be a GAP SDK of a supported release; else a one-line error that names
    what is missing (an SDK before 4.8.0 lacks utils/json-tools, utils/gapy/gapy and the gap8/ paths)."""
    missing = missing_parts(home)
    if missing:
        raise EdgeRNNError(f"the GAP SDK at {home} lacks {', '.join(missing)}: edgernn needs GAP SDK {OLDEST_SDK} "
                           f"or later (tested: {TESTED_SETUP}); or run `edgernn setup gvsoc --fetch`")
    return home


def sdk_home(required: bool = True) -> Path | None:
    """The GAP SDK named by ``$GAP_SDK_HOME``, else the one ``edgernn setup gvsoc --fetch`` fetched; checked
    to be a supported release. A one-line error (or None) when there is none."""
    home = os.environ.get("GAP_SDK_HOME")
    problem = None
    if not home:
        fetched = fetched_sdk()
        if fetched is not None:
            return check_sdk(fetched.resolve()) if required else fetched.resolve()
        problem = "$GAP_SDK_HOME is unset"
    elif not (Path(home) / SDK_CONFIG).is_file():
        problem = f"$GAP_SDK_HOME={home} has no {SDK_CONFIG}"
    if problem:
        if required:
            raise EdgeRNNError(f"the GAP SDK is not set up ({problem}): {SDK_HINT}, "
                               "or run `edgernn setup gvsoc --fetch`")
        return None
    home = Path(home).resolve()
    return check_sdk(home) if required else home


def overrides_dir() -> Path:
    """edgernn's replacement files for the SDK, at the SDK's relative paths (may be absent)."""
    return templates_dir() / "targets" / "gap8" / "sdk" / "overrides"


# ---- the private copy ----

def _walk(root: Path, rel_root: Path | None = None) -> Iterator[tuple[str, Path]]:
    """(path relative to rel_root (default root), path) of every file and symlink under root, sorted,
    minus SKIP_*. Symlinks are never followed (a link to a folder is one entry), so a link loop cannot
    trap the walk."""
    rel_root = root if rel_root is None else rel_root
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        top = here == rel_root
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
            if name in SKIP_ANYWHERE or name.endswith(".pyc"):
                continue
            path = here / name
            yield path.relative_to(rel_root).as_posix(), path


def _walk_sdk(home: Path) -> Iterator[tuple[str, Path]]:
    """Every file of the SDK_PARTS that home has, relative to home, sorted by part."""
    for part in SDK_PARTS:
        path = home / part
        if path.is_symlink() or path.is_file():
            yield part, path
        elif path.is_dir():
            yield from _walk(path, home)


def _hash_entries(digest, label: str, entries: Iterator[tuple[str, Path]]) -> int:
    count = 0
    for rel, path in entries:
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


def _hash_tree(digest, label: str, root: Path) -> int:
    return _hash_entries(digest, label, _walk(root))


RACY_SECONDS = 2.0      # a file changed this recently may change again within the same mtime tick


def _stat_fingerprint(home: Path) -> tuple[str, float]:
    """sha256 over the SDK parts' paths, modes, sizes, mtimes and ctimes (and link targets), and the
    newest of those times: no file is read."""
    digest = hashlib.sha256(str(home).encode() + b"\0")
    newest = 0.0
    for rel, path in _walk_sdk(home):
        st = path.lstat()
        newest = max(newest, st.st_mtime, st.st_ctime)
        digest.update(f"{rel}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0".encode())
        if path.is_symlink():
            digest.update(os.readlink(path).encode())
    return digest.hexdigest(), newest


def _hash_corrections(digest, testbench_fixes: bool) -> None:
    """edgernn's corrections of the SDK, as part of a key: the override files and the edits."""
    from edgernn.targets.gap8 import sdk_fixes as gap_sdk_fixes

    _hash_tree(digest, "override", overrides_dir())
    digest.update(b"fixes\0" + gap_sdk_fixes.describe(testbench_fixes).encode())
    if not testbench_fixes:
        digest.update(b"\0upstream testbench")


def _content_key(home: Path, testbench_fixes: bool) -> str:
    digest = hashlib.sha256(LAYOUT_VERSION.encode() + b"\0")
    _hash_entries(digest, "sdk", _walk_sdk(home))
    _hash_corrections(digest, testbench_fixes)
    return digest.hexdigest()[:24]


_KEYS: dict[tuple, str] = {}        # (home, stat fingerprint, testbench_fixes) -> key, for this process


def _write_json(path: Path, data: dict) -> None:
    """Written beside, then renamed: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def sdk_key(home: Path, testbench_fixes: bool = True, *, rehash: bool = False) -> str:
    """The cache key of an SDK: sha256 (24 hex digits) over the SDK_PARTS (relative paths, bytes,
    executable bits, symlink targets), edgernn's overrides and fixes, and LAYOUT_VERSION.

    The bytes are read at most once per process, and not at all when the stat fingerprint of the same
    files (paths, sizes, mtimes, modes) is one the stat index has seen with edgernn's present
    corrections; ``rehash`` reads them anyway (``edgernn setup gvsoc`` does)."""
    home = Path(home)
    fingerprint, newest = _stat_fingerprint(home)
    # A file written in the last moments can be written again within the same mtime tick, size unchanged
    # (git calls such entries racy): its stat cannot vouch for its bytes, so they are hashed, and nothing
    # is remembered.
    trusted = time.time() - newest > RACY_SECONDS
    memo = (str(home), fingerprint, testbench_fixes)
    if trusted and not rehash and memo in _KEYS:
        return _KEYS[memo]
    # the index is only good for the same corrections: they are hashed (cheaply) into its entry's name
    corrections = hashlib.sha256(LAYOUT_VERSION.encode() + b"\0")
    _hash_corrections(corrections, testbench_fixes)
    entry = f"{fingerprint}:{corrections.hexdigest()[:16]}"
    index_path = cache_root() / "gap_sdk" / STAT_INDEX
    index = read_json(index_path)
    key = index.get(entry) if trusted and not rehash else None
    if key is None:
        key = _content_key(home, testbench_fixes)
        if trusted:
            index = {k: v for k, v in index.items() if not k.startswith(fingerprint)}
            index[entry] = key
            with contextlib.suppress(OSError):          # a read-only cache only costs the next hash
                _write_json(index_path, dict(list(index.items())[-64:]))
    if trusted:
        _KEYS[memo] = key
    return key


def debian_toolchain() -> Path:
    """edgernn's wrapper around Debian's riscv64-unknown-elf tools under the SDK's names
    (templates/targets/gap8/sdk/toolchain), staged in the cache with execute bits (a wheel may not keep them),
    keyed by its content; returns its bin/ folder."""
    src = templates_dir() / "targets" / "gap8" / "sdk" / "toolchain"
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


def _copy_entries(entries: Iterator[tuple[str, Path]], dst: Path) -> int:
    count = 0
    for rel, path in entries:
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            target.unlink()            # an override replaces a file; it never writes through a link
        if path.is_symlink():
            os.symlink(os.readlink(path), target)
        else:
            shutil.copy2(path, target)
        count += 1
    return count


def _copy_tree(src: Path, dst: Path) -> int:
    return _copy_entries(_walk(src), dst)


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
            say(log, f"waiting for another edgernn process that prepares {base / key}")
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _key_dir(key: str) -> Path:
    return cache_root() / "gap_sdk" / key


def _touch(key_dir: Path) -> None:
    """Mark an entry as used now (pruning keeps the most recently used)."""
    with contextlib.suppress(OSError):
        (key_dir / LAST_USED).write_text(f"{time.time():.0f}\n")


def _last_used(key_dir: Path) -> float:
    for name in (LAST_USED, MARKER, "source.json"):
        with contextlib.suppress(OSError):
            return (key_dir / name).stat().st_mtime
    return 0.0


def cache_entries() -> list[tuple[Path, int]]:
    """The SDK copies (and GVSOC builds) in the cache, most recently used first, with their sizes in bytes."""
    base = cache_root() / "gap_sdk"
    entries = [d for d in base.glob("*") if d.is_dir() and (d / "source.json").is_file()
               and len(d.name) == 24 and all(c in "0123456789abcdef" for c in d.name)]
    entries.sort(key=_last_used, reverse=True)
    return [(d, _tree_bytes(d)) for d in entries]


def prune_cache(keep: int = KEEP_ENTRIES, log: Log = None, protect: tuple[str, ...] = ()) -> list[Path]:
    """Remove all but the ``keep`` most recently used SDK copies: only folders that edgernn wrote (a
    24-hex-digit name holding source.json), never one whose lock another process holds. Returns what
    was removed."""
    removed = []
    base = cache_root() / "gap_sdk"
    for key_dir, size in cache_entries()[keep:]:
        if key_dir.name in protect:
            continue
        lock_path = base / f"{key_dir.name}.lock"
        with open(lock_path, "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue                    # in use right now
            try:
                say(log, f"removing an unused GVSOC cache entry ({size / 1e6:.0f} MB): {key_dir}")
                shutil.rmtree(key_dir, ignore_errors=True)
                removed.append(key_dir)
                lock_path.unlink(missing_ok=True)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
    return removed


def _prepare_locked(home: Path, key: str, log: Log, testbench_fixes: bool = True) -> Path:
    from edgernn.targets.gap8 import sdk_fixes as gap_sdk_fixes

    final = _key_dir(key)
    if (final / "sdk" / SDK_CONFIG).is_file():
        _touch(final)
        return final / "sdk"
    # Copies are staged only under the key's lock: any staging folder left is a dead process's.
    for stale in final.parent.glob(f"{key}.staging-*"):
        shutil.rmtree(stale, ignore_errors=True)
    staging = final.with_name(f"{key}.staging-{os.getpid()}")
    try:
        say(log, f"copying the GAP SDK's build and simulator parts from {home} to {final / 'sdk'}")
        files = _copy_entries(_walk_sdk(home), staging / "sdk")
        _make_writable(staging)
        restored = _restore_symlinks(staging / "sdk")
        _copy_tree(overrides_dir(), staging / "sdk")
        fixed = gap_sdk_fixes.apply_fixes(staging / "sdk", testbench=testbench_fixes)
        _make_writable(staging)
        if restored:
            say(log, f"restored {len(restored)} symlinks stored as text files (e.g. {restored[0]})")
        _write_json(staging / "source.json",
                    {"gap_sdk_home": str(home), "key": key, "layout": LAYOUT_VERSION, "files": files,
                     "parts": [p for p in SDK_PARTS if (home / p).exists()],
                     "overrides": [rel for rel, _ in _walk(overrides_dir())], "fixes": fixed,
                     "testbench_fixes": testbench_fixes, "restored_symlinks": restored})
        _touch(staging)
        shutil.rmtree(final, ignore_errors=True)
        os.rename(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    prune_cache(log=log, protect=(key,))
    return final / "sdk"


def prepare_sdk(home: str | os.PathLike | None = None, log: Log = None, testbench_fixes: bool = True) -> Path:
    """A writable copy of the SDK's parts (plus edgernn's corrections) in the cache; returns its root.
    Staged beside its final place and renamed into it, so a copy is there whole or not at all."""
    home = check_sdk(Path(home).resolve()) if home is not None else sdk_home()
    key = sdk_key(home, testbench_fixes)
    with _locked(key, log):
        return _prepare_locked(home, key, log, testbench_fixes)


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


def run_in_group(command: list[str], *, cwd: Path, env: dict[str, str], log_file) -> int:
    """Run a command in its own process group, output to log_file; on any exception (Ctrl-C, SIGTERM,
    a failure in the caller) the whole group is ended before it propagates (edgernn.procs)."""
    return procs.run(command, cwd=cwd, env=env, stdout=log_file, stderr=subprocess.STDOUT).returncode


def _first_error(log_path: Path) -> str:
    """What the compiler or linker said went wrong, from the log's end (edgernn.targets.buildlog)."""
    from edgernn.targets.buildlog import summarize

    try:
        lines = log_path.read_text(errors="replace").splitlines()[-2000:]
    except OSError:
        return ""
    return summarize(lines)


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
        say(log, "strip is not installed: GVSOC stays unstripped (about 270 MB instead of 25 MB)")
        return
    elfs = [str(p) for p in install.rglob("*") if p.is_file() and not p.is_symlink() and _is_elf(p)]
    for start in range(0, len(elfs), 64):
        subprocess.run([strip, "--strip-unneeded", *elfs[start:start + 64]], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _tree_bytes(root: Path) -> int:
    """The disk space a tree takes, as du counts it: allocated blocks, each hard-linked file once."""
    seen, total = set(), 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(dirpath, name))
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
    return total


def _check_build_tools() -> None:
    missing = [t for t in ("make", "g++", "cmake", "scons", "rsync", "bash") if shutil.which(t) is None]
    if missing:
        raise EdgeRNNError(f"building GVSOC needs {', '.join(missing)}: apt-get install --no-install-recommends "
                           "build-essential cmake scons rsync")


def _self_test(key_dir: Path, install: Path, log: Log) -> dict:
    """The UART self-test of a finished build; its result, or SelfTestFailed (recorded in the entry, so
    that the next call reports it at once instead of building the same sources again)."""
    from edgernn.targets.gap8 import gvsoc_check

    say(log, f"GVSOC UART self-test: bursts of {', '.join(map(str, gvsoc_check.BURSTS))} bytes echoed both "
              f"ways at once at {gvsoc_check.BAUD} baud")
    try:
        result = gvsoc_check.uart_self_test(install, key_dir / "selftest", cache=cache_root())
    except gvsoc_check.SelfTestFailed as err:
        message = (f"{err}. The build is not marked done. edgernn's UART corrections should prevent this: "
                   f"check that this edgernn's templates/targets/gap8/sdk/overrides are intact, then `edgernn setup gvsoc "
                   f"--force`; log: {key_dir / 'selftest' / 'gvsoc.log'}")
        _write_json(key_dir / SELFTEST_FAILED, {"layout": LAYOUT_VERSION, "error": message})
        raise gvsoc_check.SelfTestFailed(message) from None
    say(log, f"GVSOC UART self-test passed: {result.bytes} bytes echoed exactly ({result.seconds:.1f} s)")
    return result.as_dict()


def build_gvsoc(home: str | os.PathLike | None = None, log: Log = None, force: bool = False,
                jobs: int = DEFAULT_JOBS, testbench_fixes: bool = True, rehash: bool = False) -> Path:
    """Build GVSOC for GAP8 from the SDK in the cache (once per key), prove its UART with the self-test,
    and return its install folder (``<copy>/install/workstation``: bin/gvsoc_launcher, python/, lib/).

    A build that did not finish leaves no marker and is redone from a fresh copy; a failure raises
    EdgeRNNError naming the step, what the compiler said, and the log. A build whose self-test failed
    is not marked done: the next call reports the same failure at once, unless ``force``.
    ``testbench_fixes=False`` builds GVSOC's UART testbench as upstream has it (to show the self-test
    catches it); ``rehash`` reads the SDK's bytes for the key even when its stat fingerprint is known."""
    home = check_sdk(Path(home).resolve()) if home is not None else sdk_home()
    key = sdk_key(home, testbench_fixes, rehash=rehash)
    key_dir = _key_dir(key)
    install = key_dir / "sdk" / "install" / "workstation"
    if not force and read_marker(key_dir) is not None:
        _touch(key_dir)
        return install
    with _locked(key, log):
        if not force and read_marker(key_dir) is not None:
            _touch(key_dir)
            return install                 # another process built it while we waited
        built = None if force else read_marker(key_dir, built=True)    # built, not (yet) marked done
        failed = read_json(key_dir / SELFTEST_FAILED)
        if built is not None and failed.get("layout") == LAYOUT_VERSION:
            from edgernn.targets.gap8.gvsoc_check import SelfTestFailed

            raise SelfTestFailed(failed.get("error", "GVSOC's UART self-test failed"))
        if built is None:
            built = _build_locked(home, key, key_dir, install, log, jobs, testbench_fixes)
        (key_dir / SELFTEST_FAILED).unlink(missing_ok=True)
        marker = dict(built, selftest=_self_test(key_dir, install, log))
        _write_json(key_dir / MARKER, marker)
        _touch(key_dir)
        prune_cache(log=log, protect=(key,))
        return install


def _build_locked(home: Path, key: str, key_dir: Path, install: Path, log: Log, jobs: int,
                  testbench_fixes: bool) -> dict:
    _check_build_tools()
    # A partial build may have written anywhere in the copy: start again from a fresh one.
    shutil.rmtree(key_dir, ignore_errors=True)
    sdk = _prepare_locked(home, key, log, testbench_fixes)
    sourced = _sourced_environment(sdk)
    env = environment(sourced)
    log_path = key_dir / BUILD_LOG
    started = time.monotonic()
    with open(log_path, "w") as log_file:
        for name, args, parallel in GVSOC_STEPS:
            command = ["make", f"-j{max(1, jobs)}" if parallel else "-j1", *args]
            step_env = dict(env, BUILD_DIR=str(sdk / "build" / name))
            say(log, f"GVSOC build: {name} ({shlex.join(command)})")
            log_file.write(f"\n==== {name}: {shlex.join(command)}\n")
            log_file.flush()
            status = run_in_group(command, cwd=sdk, env=step_env, log_file=log_file)
            if status != 0:
                log_file.flush()
                detail = _first_error(log_path)
                raise EdgeRNNError(f"building GVSOC failed at step {name} (`{shlex.join(command)}` "
                                   f"exited {status}{': ' + detail if detail else ''}); log: {log_path}")
    seconds = time.monotonic() - started
    if not (install / "bin" / "gvsoc_launcher").is_file():
        raise EdgeRNNError(f"building GVSOC finished without bin/gvsoc_launcher in {install}; log: {log_path}")
    _prune_install(sdk, log)
    built = {"layout": LAYOUT_VERSION, "key": key, "gap_sdk_home": str(home), "install": str(install),
             "build_seconds": round(seconds, 1), "install_bytes": _tree_bytes(sdk / "install"),
             "entry_bytes": _tree_bytes(key_dir), "testbench_fixes": testbench_fixes, "environment": sourced}
    _write_json(key_dir / BUILT, built)
    say(log, f"GVSOC built in {seconds:.0f} s: {install}")
    return built


# ---- an SDK for a user who has none ----

def _git(args: list[str], cwd: Path, what: str, url: str) -> str:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="true", LC_ALL="C")
    proc = procs.run(["git", *args], cwd=cwd, env=env)
    if proc.returncode != 0:
        lines = [l for l in (proc.stderr or proc.stdout or "").strip().splitlines()
                 if l.strip() and not l.startswith(("hint:", "warning:"))] or ["(no output)"]
        raise EdgeRNNError(f"fetching the GAP SDK from {url} failed at {what}: {lines[-1].strip()}")
    return proc.stdout.strip()


def fetch_sdk(url: str | None = None, commit: str | None = None, log: Log = None) -> Path:
    """Clone upstream gap_sdk at ``commit`` (default: UPSTREAM_COMMIT, the tested one) from ``url``
    (default: ``$EDGERNN_GAP_SDK_URL``, else UPSTREAM_URL) into ``cache_root()/gap_sdk_src/<commit>``:
    one commit deep, only the SDK_PARTS (a sparse checkout, blobs fetched only for them), then checked
    like any SDK. Once there, ``sdk_home`` finds it when ``$GAP_SDK_HOME`` is unset. Returns its root."""
    if shutil.which("git") is None:
        raise EdgeRNNError("fetching the GAP SDK needs git: apt-get install --no-install-recommends git")
    url = url or os.environ.get("EDGERNN_GAP_SDK_URL") or UPSTREAM_URL
    commit = commit or os.environ.get("EDGERNN_GAP_SDK_COMMIT") or UPSTREAM_COMMIT
    if not commit.replace("-", "").replace(".", "").replace("_", "").isalnum():
        raise EdgeRNNError(f"{commit!r} is not a commit or tag name")
    base = cache_root() / FETCHED
    dest = base / commit
    if (dest / SDK_CONFIG).is_file():
        say(log, f"the GAP SDK at {commit} is already in {dest}")
        return check_sdk(dest)
    base.mkdir(parents=True, exist_ok=True)
    staging = base / f".{commit}.staging-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir()
        say(log, f"fetching the GAP SDK at {commit} from {url} (one commit, only the parts edgernn builds)")
        _git(["init", "-q"], staging, "git init", url)
        _git(["remote", "add", "origin", url], staging, "git remote add", url)
        _git(["sparse-checkout", "set", "--cone", *SDK_PARTS], staging, "git sparse-checkout", url)
        _git(["fetch", "-q", "--depth", "1", "--filter=blob:none", "origin", commit], staging, "git fetch", url)
        _git(["checkout", "-q", "--detach", "FETCH_HEAD"], staging, "git checkout", url)
        head = _git(["rev-parse", "HEAD"], staging, "git rev-parse", url)
        if all(c in "0123456789abcdef" for c in commit.lower()) and not head.startswith(commit.lower()):
            raise EdgeRNNError(f"fetching the GAP SDK from {url}: asked for {commit}, got {head}")
        check_sdk(staging)
        _write_json(staging / ".edgernn-fetch.json", {"url": url, "commit": head, "parts": list(SDK_PARTS)})
        os.rename(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    say(log, f"GAP SDK fetched: {dest} (commit {head[:12]})")
    return dest


def main(argv: list[str] | None = None) -> int:
    """``python -m edgernn.targets.gap8.sdk [--force]``: build GVSOC (or find it built) and print its install."""
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
