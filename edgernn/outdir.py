"""The build folder (``-o OUT``) as one object: checking it, staging into it, committing, recording.

A folder is edgernn's only when its ``manifest.json`` says so: a JSON object whose ``schema`` is
``edgernn-build/1``. That manifest lists, under ``written``, the top-level entries edgernn put there
(``step.tflite``, ``firmware``, ``report.json``, ...). Replacing a build touches only those entries;
anything else in the folder (the user's ``model.keras``, ``calib.npy``, notes) is left exactly as it
is. A folder whose manifest.json is anybody else's (a web app's, ``{}``, or an edgernn build older
than the schema) is refused, never emptied.

The new build is made in a staging folder beside OUT. Committing moves edgernn's old entries into a
hidden folder inside OUT, moves the new ones in, writes the manifest last, and then deletes the old
entries; a failure on the way puts the old entries back.
"""

from __future__ import annotations

import errno
import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator
from typing import Any

from edgernn.errors import EdgeRNNError

SCHEMA = "edgernn-build/1"
MANIFEST = "manifest.json"
# Every top-level name edgernn may write into a build folder. A user's own file of one of these
# names (one the manifest does not list) makes edgernn refuse the folder rather than replace it.
KNOWN_ENTRIES = ("manifest.json", "step.tflite", "head.tflite", "fused_states_io.tflite", "float_step.tflite",
                 "float_head.tflite", "firmware", "nntool",
                 "report.json", "report.html")


def os_error_message(exc: OSError, action: str, show_file: bool = True) -> str:
    """One line for an OSError met while doing ``action`` (e.g. "create the output folder /x")."""
    reason = exc.strerror or type(exc).__name__
    hints = {
        errno.EROFS: "the file system is read-only",
        errno.ENOSPC: "the disk is full",
        errno.EDQUOT: "the disk quota is exhausted",
        errno.ENOTDIR: "a file is in the way of the path",
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
    }
    reason = hints.get(exc.errno, reason)
    where = f" ({exc.filename})" if show_file and exc.filename and str(exc.filename) not in action else ""
    return f"cannot {action}: {reason}{where}"


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def is_edgernn_manifest(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("schema"), str) and data["schema"].startswith("edgernn-build/")


class BuildFolder:
    """``-o OUT`` of convert and build, and the folder validate writes its report into."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._created: list[Path] = []

    # ---------------------------------------------------------------- what is there

    def manifest(self) -> dict | None:
        """The folder's manifest when it is edgernn's, else None."""
        try:
            data = json.loads((self.path / MANIFEST).read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        return data if is_edgernn_manifest(data) else None

    def owned(self) -> set[str]:
        """The top-level entries edgernn wrote here (by the manifest's ``written`` list)."""
        manifest = self.manifest()
        if manifest is None:
            return set()
        written = manifest.get("written")
        names = set(written) if isinstance(written, list) else set()
        names.add(MANIFEST)
        return {n for n in names if isinstance(n, str) and "/" not in n and n not in ("", ".", "..")}

    def check(self) -> None:
        """Refuse, with one line, an OUT that edgernn must not write: call before any work."""
        out = self.path
        if out.is_symlink() and not out.exists():
            raise EdgeRNNError(f"output {out} is a broken symbolic link")
        if out.exists() and not out.is_dir():
            raise EdgeRNNError(f"output {out} exists and is not a folder")
        if not out.exists():
            ancestor = out.parent
            while not ancestor.exists() and ancestor != ancestor.parent:
                ancestor = ancestor.parent
            if not ancestor.is_dir():
                raise EdgeRNNError(f"cannot create the output folder {out}: {ancestor} is a file, not a folder")
            return
        try:
            entries = {p.name for p in out.iterdir()}
        except OSError as exc:
            raise EdgeRNNError(os_error_message(exc, f"read the output folder {out}")) from None
        if not entries:
            return
        if MANIFEST not in entries:
            raise EdgeRNNError(f"output folder {out} is not empty and holds no edgernn {MANIFEST}; choose another folder")
        if self.manifest() is None:
            raise EdgeRNNError(f"output folder {out} holds a {MANIFEST} that edgernn did not write (no \"schema\": "
                               f"\"{SCHEMA}\"); choose another folder")
        foreign = sorted(n for n in entries & set(KNOWN_ENTRIES) if n not in self.owned())
        if foreign:
            raise EdgeRNNError(f"output folder {out} holds {', '.join(foreign)}, which edgernn did not write and would "
                               "replace; move it away or choose another folder")

    # ---------------------------------------------------------------- staging and committing

    def stage(self) -> Path:
        """A new staging folder beside OUT (OUT's missing parents are made, and removed by ``abandon``)."""
        self.check()
        missing = []
        parent = self.path.parent
        while not parent.exists() and parent != parent.parent:
            missing.append(parent)
            parent = parent.parent
        try:
            for folder in reversed(missing):
                folder.mkdir()
                self._created.append(folder)
            staging = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.", dir=self.path.parent))
            # mkdtemp makes 0700; the folder becomes OUT, which should get the user's usual mode.
            os.chmod(staging, 0o777 & ~umask())
        except OSError as exc:
            self._remove_created()
            raise EdgeRNNError(os_error_message(exc, f"create the output folder {self.path}", show_file=False)) from None
        return staging

    @contextlib.contextmanager
    def staged(self) -> Iterator[Path]:
        """``stage``, for a ``with`` block that ends in ``commit``: if the block fails, the staging folder
        and OUT's new parents go, and a disk error (full, read-only) is one line."""
        staging = self.stage()
        try:
            yield staging
        except OSError as exc:
            self.abandon(staging)
            raise EdgeRNNError(os_error_message(exc, f"write the output folder {self.path}", show_file=False)) from None
        except BaseException:
            self.abandon(staging)
            raise

    def abandon(self, staging: Path) -> None:
        shutil.rmtree(staging, ignore_errors=True)
        self._remove_created()

    def _remove_created(self) -> None:
        for folder in reversed(self._created):
            try:
                folder.rmdir()
            except OSError:
                pass
        self._created.clear()

    def commit(self, staging: Path) -> dict:
        """Put the staged build in place; returns the manifest as written (with schema and written)."""
        out = self.path
        manifest_path = staging / MANIFEST
        manifest = json.loads(manifest_path.read_text())
        new_entries = sorted(p.name for p in staging.iterdir())
        manifest["schema"] = SCHEMA
        manifest["written"] = new_entries
        manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
        self.check()
        try:
            if not out.exists() or not any(out.iterdir()):
                os.rename(staging, out)  # onto nothing, or onto an empty folder
            else:
                self._replace_entries(staging, new_entries)
        except OSError as exc:
            raise EdgeRNNError(os_error_message(exc, f"write the output folder {out}")) from None
        self._created.clear()
        return manifest

    def _replace_entries(self, staging: Path, new_entries: list[str]) -> None:
        out = self.path
        clash = sorted(n for n in new_entries if ((out / n).exists() or (out / n).is_symlink()) and n not in self.owned())
        if clash:
            raise EdgeRNNError(f"output folder {out} holds {', '.join(clash)}, which edgernn did not write and would "
                               "replace; move it away or choose another folder")
        owned = sorted((n for n in self.owned() if (out / n).exists() or (out / n).is_symlink()),
                       key=lambda n: n != MANIFEST)  # the manifest goes first, and comes back last
        old = Path(tempfile.mkdtemp(prefix=".edgernn-old.", dir=out))
        moved_out: list[str] = []
        moved_in: list[str] = []
        try:
            for name in owned:
                os.rename(out / name, old / name)
                moved_out.append(name)
            for name in sorted(new_entries, key=lambda n: n == MANIFEST):
                shutil.move(str(staging / name), str(out / name))
                moved_in.append(name)
        except BaseException:
            for name in moved_in:
                shutil.move(str(out / name), str(staging / name))
            for name in moved_out:
                os.rename(old / name, out / name)
            shutil.rmtree(old, ignore_errors=True)
            raise
        shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)

    # ---------------------------------------------------------------- files written later (reports)

    def may_write(self, name: str) -> bool:
        """Whether edgernn may (over)write OUT/name: it is not there, or edgernn wrote it."""
        target = self.path / name
        return not (target.exists() or target.is_symlink()) or name in self.owned()

    def record(self, *names: str) -> None:
        """Add entries written after the build (report.json, report.html) to the manifest's list."""
        manifest = self.manifest()
        if manifest is None:
            return
        written = set(manifest.get("written") or []) | set(names)
        manifest["written"] = sorted(written)
        tmp = self.path / f".{MANIFEST}.tmp"
        tmp.write_text(json.dumps(manifest, indent=2) + "\n")
        os.replace(tmp, self.path / MANIFEST)
