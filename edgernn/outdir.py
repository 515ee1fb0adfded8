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
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterator

from edgernn import procs
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


# ---------------------------------------------------------------- manifest.json

@dataclass
class BuildFacts:
    """What ``build`` adds to the manifest after ``convert`` (see docs/manifest.md)."""

    liveness_bound_bytes: int
    state_bytes: int
    data_bytes: int | None
    placement: dict | None
    team_ops: list[int]
    firmware: dict


@dataclass
class Manifest:
    """``manifest.json``, key by key as docs/manifest.md describes them; the field order is the JSON's key order.

    The nested objects (tensor entries, ``head``, ``calibration``, ``placement``, ...) stay JSON objects: they go
    to the C templates, the oracle and the report as they are. ``fused_states_io`` and ``quantization_error`` are
    written only when set; ``schema`` and ``written`` only once committed; the ``build`` facts only after build.
    """

    format: int = 1
    edgernn_version: str | None = None
    tool_versions: dict | None = None
    model_file: str | None = None
    model_sha256: str | None = None
    keras: str | None = None
    source: dict | None = None
    quant: str | None = None
    mode: str | None = None
    sequence_output: str | None = None
    inputs: list[dict] | None = None
    outputs: list[dict] | None = None
    states: list[dict] | None = None
    state_feedback: dict | None = None
    head: dict | None = None
    files: dict | None = None
    ops: list[str] | None = None
    macs_per_step: int | None = None
    head_macs: int | None = None
    weight_bytes: int | None = None
    arena_bytes: int | None = None
    code_bytes: int | None = None
    calibration: dict | None = None
    float_self_check_rel: float | None = None
    layers: list[dict] | None = None
    fused_states_io: dict | None = None
    board: str | None = None
    link: str | None = None
    app: dict | None = None
    mode_requested: str | None = None
    rnn_paths: list[dict] | None = None
    quantization_error: dict | None = None
    precision: dict | None = None
    schema: str | None = None
    written: list[str] | None = None
    build: BuildFacts | None = None
    # keys this edgernn does not know (a newer one's, a hand-written one's): kept, and written back last
    extra: dict = field(default_factory=dict)
    # keys the file did not have: not written back (a manifest read is written as it was read)
    absent: frozenset = frozenset()

    def as_dict(self) -> dict:
        data: dict = {}
        for f in fields(self):
            if f.name in ("extra", "absent"):
                continue
            if f.name == "build":
                if self.build is not None:
                    data.update({k: v for k, v in self.build.__dict__.items() if k not in self.absent})
                continue
            value = getattr(self, f.name)
            if f.name in self.absent or (value is None and f.name in _WRITTEN_WHEN_SET):
                continue
            data[f.name] = value
        data.update(self.extra)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Manifest":
        names = [f.name for f in fields(cls) if f.name not in ("build", "extra", "absent")]
        build_names = [f.name for f in fields(BuildFacts)]
        manifest = cls(**{k: data[k] for k in names if k in data})
        if any(k in data for k in build_names):
            manifest.build = BuildFacts(**{k: data.get(k) for k in build_names})
        manifest.extra = {k: v for k, v in data.items() if k not in names and k not in build_names}
        manifest.absent = frozenset(k for k in [*names, *build_names] if k not in data)
        return manifest

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2) + "\n"

    def write(self, folder: str | os.PathLike) -> None:
        """Write ``folder``/manifest.json (by a rename, so a reader never sees half of it)."""
        tmp = Path(folder) / f".{MANIFEST}.tmp"
        tmp.write_text(self.to_json())
        os.replace(tmp, Path(folder) / MANIFEST)

    def record_build(self, facts: BuildFacts, *, arena_bytes: int, weight_bytes: int, code_bytes: int | None) -> None:
        self.arena_bytes, self.weight_bytes, self.code_bytes = arena_bytes, weight_bytes, code_bytes
        self.build = facts
        self.absent = self.absent - {"arena_bytes", "weight_bytes", "code_bytes", *BuildFacts.__dataclass_fields__}

    @property
    def placement(self) -> dict | None:
        """Where build put the weights, state and arena (``build`` facts); None before build."""
        return self.build.placement if self.build is not None else None

    @property
    def state_bytes(self) -> int | None:
        return self.build.state_bytes if self.build is not None else None


_WRITTEN_WHEN_SET = {"link", "app", "fused_states_io", "quantization_error", "precision", "schema", "written"}


def read_manifest(folder: str | os.PathLike, *, require: tuple[str, ...] = (), rebuild_hint: str = "") -> Manifest:
    """``folder``/manifest.json, refused in one line when it is missing, not JSON, not an object, or lacks a key
    of ``require``. An edgernn build from before ``schema`` reads too: only replacing a folder needs the schema."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not folder.is_dir() or not path.is_file():
        what = "does not exist" if not folder.exists() else f"is not an edgernn build folder (no {MANIFEST})"
        raise EdgeRNNError(f"{folder} {what}{rebuild_hint}")
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise EdgeRNNError(f"{path} is not valid JSON ({exc})") from None
    except OSError as exc:
        raise EdgeRNNError(os_error_message(exc, f"read {path}")) from None
    if not isinstance(data, dict):
        raise EdgeRNNError(f"{path} is not a JSON object")
    for key in require:
        if key not in data:
            raise EdgeRNNError(f"{path} lacks '{key}': rebuild {folder} with this edgernn version")
    return Manifest.from_dict(data)


class BuildFolder:
    """``-o OUT`` of convert and build, and the folder validate writes its report into."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._created: list[Path] = []

    # ---------------------------------------------------------------- what is there

    def manifest(self) -> Manifest | None:
        """The folder's manifest when it is edgernn's, else None."""
        try:
            data = json.loads((self.path / MANIFEST).read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        return Manifest.from_dict(data) if is_edgernn_manifest(data) else None

    def owned(self) -> set[str]:
        """The top-level entries edgernn wrote here (by the manifest's ``written`` list)."""
        manifest = self.manifest()
        if manifest is None:
            return set()
        written = manifest.written
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

    @staticmethod
    def clear(staging: Path) -> None:
        """The staging folder (edgernn's own, not yet in place) emptied for another attempt."""
        for entry in staging.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()

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

    def commit(self, staging: Path, manifest: Manifest) -> Manifest:
        """Write ``manifest`` into the staged build, marked edgernn's and listing what it holds, and put the
        build in place; returns the manifest as written."""
        procs.raise_if_interrupted()    # a signal must not let a build into place
        out = self.path
        new_entries = sorted({p.name for p in staging.iterdir()} | {MANIFEST})
        manifest.schema = SCHEMA
        manifest.written = new_entries
        manifest.absent = manifest.absent - {"schema", "written"}
        (staging / MANIFEST).write_text(manifest.to_json())
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
        manifest.written = sorted(set(manifest.written or []) | set(names))
        manifest.absent = manifest.absent - {"written"}
        manifest.write(self.path)
