"""A writable copy of the GAP SDK with edgernn's overrides, for builds without GreenWaves' own compiler.

STAND-IN (branch gapfw) for the ``prepare_sdk(home)`` of branch gvsoc, which also builds GVSOC in the
copy: at merge, that module replaces this one. The contract the firmware build relies on: the SDK at
``home`` is never written; the copy lives in edgernn's cache, keyed by the SDK's files and the
overrides, with ``templates/gap_sdk/overrides/`` copied over it at the same relative paths.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from edgernn.errors import EdgeRNNError
from edgernn.resources import templates_dir


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "edgernn"


def _tree_key(root: Path, with_content: bool) -> str:
    """A digest of a tree: paths, sizes and mtimes (the SDK), or contents too (the overrides)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        st = path.stat()
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes() if with_content else f"{st.st_size}:{st.st_mtime_ns}".encode())
    return digest.hexdigest()


def overrides_dir() -> Path:
    return templates_dir() / "gap_sdk" / "overrides"


def prepare_sdk(home: str | os.PathLike) -> Path:
    """The root of a copy of the SDK at ``home`` with edgernn's overrides applied; made once."""
    home = Path(home).resolve()
    if not (home / "configs").is_dir():
        raise EdgeRNNError(f"{home} is not a GAP SDK (no configs/ folder)")
    key = hashlib.sha256(f"{home}\n{_tree_key(home, False)}\n{_tree_key(overrides_dir(), True)}".encode())
    target = cache_root() / "gap_sdk" / key.hexdigest()[:16] / "sdk"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".sdk-", dir=target.parent))
    try:
        copy = staging / "sdk"
        shutil.copytree(home, copy, symlinks=True)
        # the SDK may come without write bits (CI's copy): the overrides must replace files
        for path in [copy, *copy.rglob("*")]:
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | stat.S_IWUSR)
        for src in sorted(p for p in overrides_dir().rglob("*") if p.is_file()):
            dest = copy / src.relative_to(overrides_dir())
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
        try:
            os.replace(copy, target)
        except OSError:
            if not target.is_dir():  # else another build made the same copy meanwhile
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
