"""The Crazyflie's receiver of the camera application's outputs: an out-of-tree app of Bitcraze's Crazyflie firmware
that takes the messages the AI-deck's GAP8 sends every camera frame (CPX APP packets; the format is
edgernn/link/appmsg.py, docs/protocol.md), publishes the outputs as log variables and gives a controller
``edgernnLatest`` (docs/boards/crazyflie_receiver.md).

Two verbs, for ``edgernn build --app camera``:

    spec = ReceiverSpec.from_manifest(manifest)      # or ReceiverSpec(n_outputs=2, dtype="int8", ...)
    app = write_receiver(OUT / "crazyflie", spec)    # the app folder
    sizes = build_receiver(app)                      # its cf2 image in app/build/, and what it takes (AppSizes)

Its C is in templates/targets/stm32/receiver/; the image is built as the ``crazyflie`` board's is
(crazyflie.build_image: the firmware's oot.mk, out of the firmware's tree).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from edgernn.errors import EdgeRNNError
from edgernn.link import appmsg
from edgernn.targets.stm32.crazyflie import BASE_ENV, IMAGE_FILES, AppSizes, build_image, firmware_checkout

TEMPLATES = Path("targets") / "stm32" / "receiver"
# A log variable an output for the first 64: more than cfclient plots at once (a log block is 6 floats, the
# firmware runs 16 blocks); the others reach a controller through edgernnLatest.
LOGGED_OUTPUTS = 64
STALE_MS = 500


@dataclass(frozen=True)
class ReceiverSpec:
    """What the receiver is generated for: the model's output as the GAP8's firmware computes it.

    ``n_outputs``: elements of the output; ``dtype``: 'int8', 'int16' or 'float32'; ``scale`` and
    ``zero_point``: the output's quantization, to dequantize it (None for float32); ``model_sha256`` and
    ``model_name``: which model, as the banners and the console say; ``stale_ms``: how old the newest outputs
    may be for edgernnLatest to return true."""

    n_outputs: int
    dtype: str
    scale: float | None
    zero_point: int
    model_sha256: str
    model_name: str
    stale_ms: int = STALE_MS

    def __post_init__(self):
        try:
            dtype = appmsg.Dtype.named(self.dtype)
        except ValueError as exc:
            raise EdgeRNNError(f"the receiver's outputs: {exc}") from None
        object.__setattr__(self, "dtype", dtype.name.lower())
        if not 1 <= self.n_outputs <= appmsg.max_outputs(dtype):
            raise EdgeRNNError(f"the receiver takes 1 to {appmsg.max_outputs(dtype)} {self.dtype} outputs (one "
                               f"message of at most {appmsg.MAX_PARTS} CPX packets); the model has {self.n_outputs}")
        if dtype != appmsg.Dtype.FLOAT32 and (self.scale is None or not np.isfinite(self.scale) or self.scale <= 0):
            raise EdgeRNNError(f"{self.dtype} outputs need their scale (a positive number) to be dequantized; "
                               f"got {self.scale!r}")
        if not 1 <= int(self.stale_ms) <= 3_600_000:
            raise EdgeRNNError(f"stale_ms is 1 to 3,600,000 milliseconds; got {self.stale_ms!r}")
        if not re.fullmatch(r"[0-9a-f]{64}", self.model_sha256 or ""):
            raise EdgeRNNError(f"model_sha256 is 64 lowercase hex digits; got {self.model_sha256!r}")

    @classmethod
    def from_manifest(cls, manifest, output: int = 0) -> "ReceiverSpec":
        """The spec of a build's ``manifest.json`` (an edgernn.outdir.Manifest or its dict): its output
        ``output``'s shape, dtype and quantization, the model's SHA-256 and file name."""
        data = manifest.as_dict() if hasattr(manifest, "as_dict") else dict(manifest)
        entry = data["outputs"][output]
        n = int(np.prod(entry["shape"][1:] if len(entry["shape"]) > 1 else entry["shape"]))
        name = Path(data.get("model_file") or "model").stem
        return cls(n_outputs=n, dtype=entry["dtype"], scale=entry.get("scale"),
                   zero_point=int(entry.get("zero_point") or 0), model_sha256=data["model_sha256"],
                   model_name=name)


def _spec(spec: ReceiverSpec | Mapping) -> ReceiverSpec:
    return spec if isinstance(spec, ReceiverSpec) else ReceiverSpec(**dict(spec))


def c_name(name: str) -> str:
    """The model's name as it may stand in a C string and a comment."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", name)[:48] or "model"


def float_literal(value: float) -> str:
    """A C float literal of ``value`` rounded to float32, whose digits give back that float32."""
    f = np.float32(value)
    text = repr(float(f))
    for digits in range(6, 10):
        candidate = f"{float(f):.{digits}g}"
        if np.float32(candidate) == f:
            text = candidate
            break
    if "e" not in text and "." not in text and "inf" not in text:
        text += ".0"
    return text + "f"


def render_context(spec: ReceiverSpec) -> dict:
    from edgernn._version import __version__

    dtype = appmsg.Dtype.named(spec.dtype)
    quantized = dtype != appmsg.Dtype.FLOAT32
    return {
        "version": __version__, "name": c_name(spec.model_name), "sha256": spec.model_sha256,
        "n_outputs": spec.n_outputs, "dtype": spec.dtype, "logged": min(spec.n_outputs, LOGGED_OUTPUTS),
        "message_bytes": appmsg.message_bytes(spec.n_outputs, dtype), "stale_ms": int(spec.stale_ms),
        "scale": spec.scale if quantized else None,
        "scale_literal": float_literal(spec.scale) if quantized else None,
        "zero_point": int(spec.zero_point) if quantized else 0, "wire": appmsg,
    }


def write_receiver(out_dir: Path, spec: ReceiverSpec | Mapping) -> Path:
    """Write the receiver app into ``out_dir`` (created; files of the same names are replaced) and return it.

    ``spec``: a ReceiverSpec, or a mapping of its fields (n_outputs, dtype, scale, zero_point, model_sha256,
    model_name). The folder is a complete out-of-tree app: Makefile, Kbuild, app-config, and src/ with
    edgernn_receiver.c (appMain, the CPX handler, the log group ``edgernn``), edgernn_appmsg.c/.h (the
    reassembler, no firmware header) and edgernn_receiver.h (``edgernnLatest``, for the user's controller).
    ``make CRAZYFLIE_BASE=... -j2`` in it builds the cf2 image; build_receiver does that out of the folder."""
    import jinja2

    from edgernn.resources import templates_dir

    spec = _spec(spec)
    root = templates_dir() / TEMPLATES
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(root)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    context = render_context(spec)
    out_dir = Path(out_dir)
    for template in sorted(root.rglob("*.j2")):
        rel = template.relative_to(root)
        if rel.name == "banner.j2":
            continue
        target = out_dir / rel.with_suffix("")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(env.get_template(rel.as_posix()).render(**context))
    return out_dir


def build_receiver(app_dir: Path, *, base: Path | None = None, scratch: Path | None = None) -> AppSizes:
    """Build the receiver app in ``app_dir`` into a complete cf2 image and return what it takes (AppSizes: the
    app's flash and RAM from the linker map, and the whole image's against the firmware's 1008 KiB of flash and
    128 KiB of RAM; ``.lines()`` says it in words).

    ``base``: the crazyflie-firmware checkout, else ``$CRAZYFLIE_BASE``. The build runs in a copy of the app
    under ``scratch`` (a temporary folder by default), so neither the firmware's tree nor the app folder gets
    Kbuild's files; cf2.bin, cf2.elf and cf2.map land in ``app_dir/build/``, where the app's own ``make`` puts
    them. Raises EdgeRNNError when the firmware is missing or the build fails (its first error line)."""
    app_dir = Path(app_dir)
    if base is None:
        if not os.environ.get(BASE_ENV):
            raise EdgeRNNError(f"building the receiver needs a crazyflie-firmware checkout: set ${BASE_ENV} (or "
                               f"cd {app_dir} && make CRAZYFLIE_BASE=/path/to/crazyflie-firmware -j2)")
        base = Path(os.environ[BASE_ENV])
    base = firmware_checkout(Path(base).resolve())
    if not (app_dir / "Makefile").is_file() or not (app_dir / "src" / "edgernn_appmsg.c").is_file():
        raise EdgeRNNError(f"{app_dir} is no receiver app (write it with write_receiver)")
    with tempfile.TemporaryDirectory(prefix="edgernn-receiver-", dir=scratch) as work:
        copy = Path(work) / "app"
        shutil.copytree(app_dir, copy, ignore=shutil.ignore_patterns("build"))
        sizes = build_image(copy, base)
        (app_dir / "build").mkdir(exist_ok=True)
        for name in IMAGE_FILES:
            shutil.copyfile(copy / "build" / name, app_dir / "build" / name)
    return sizes
