#!/usr/bin/env python3
"""Print a digest of what ``edgernn build`` generates for every test model, to show that a change of
edgernn's code left the generated firmware byte-identical.

For each model of edgernn/testing/zoo.py (plus ltc_dense, a fused LSTM, and three of frames_zoo.py: a
CNN + CfC, a causal Conv1D + GRU and a camera CNN + GRU over L2), each quantization and each
board of --boards, the model is built through the ``edgernn`` command's main function (in this
process, so TensorFlow loads once) from a model file in --models-dir, saved there once and reused: a
model rebuilt in another process, or after other models, need not have the same weights, and the
manifest records the model file's path and hash. The files are saved by a process of their own, so a
run that saves them builds in the same state as one that finds them (a model created in the building
process left TF's float kernels on another path: the manifest's float self-check differed in its
last digits). Keras's global state is reset before each build, so a build's bytes do not depend on
the builds run before it. The digest lists, per build, the sha256 of
every file edgernn generated in OUT (step models, manifest.json, firmware/ and nntool/ sources),
leaving out compiled outputs (build folders, ELFs, objects). A refused build is recorded with its
one-line reason, so a change of refusal shows too.

    python scripts/firmware_digest.py --json before.json        # at one commit
    python scripts/firmware_digest.py --json after.json         # at another
    python scripts/firmware_digest.py --compare before.json after.json

EDGERNN_ROOT=<checkout> with PYTHONPATH=<checkout> digests another checkout with this script.

The GAP SDK is not used (GAP_SDK_HOME is unset for the run): ai_deck builds then stop at the
generated project and its portable-source check, which is all the generated C there is.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from layers import test_helper  # scripts/layers.py, beside this script: a helper module of the checkout measured

ROOT = Path(os.environ.get("EDGERNN_ROOT", Path(__file__).resolve().parent.parent))
SKIP_DIRS = {"build", "__pycache__"}
SKIP_SUFFIXES = {".elf", ".o", ".bin", ".img", ".map", ".d", ".a"}
QUANTS = ("float32", "int8", "int16")
BOARDS = ("host", "qemu_riscv32", "ai_deck")


def _digest_tree(out: Path) -> dict[str, str]:
    files = {}
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out)
        if not path.is_file() or SKIP_DIRS.intersection(rel.parts) or path.suffix in SKIP_SUFFIXES:
            continue
        if path.name == "manifest.json":
            manifest = json.loads(path.read_text())
            # sizes of compiled code depend on the compiler build, not on what edgernn generated
            for key in ("code_bytes", "data_bytes"):
                manifest.pop(key, None)
            data = json.dumps(manifest, sort_keys=True).encode()
        else:
            data = path.read_bytes()
        files[str(rel)] = hashlib.sha256(data).hexdigest()
    return files


def _models():
    zoo = test_helper("zoo")
    frames_zoo = test_helper("frames_zoo")
    models = dict(zoo.ZOO)
    models["ltc_dense"] = zoo.ltc_dense
    models["frame_cfc"] = frames_zoo.frame_cfc          # CNN front end: convolutions, pools, the fused loop
    models["tcn_gru"] = frames_zoo.tcn_gru              # causal Conv1D states
    models["camera_gru_l3"] = frames_zoo.camera_gru_l3  # over the AI-deck's L2: weights streamed from L3
    models["fused_lstm"] = lambda seed=0: zoo.fused_lstm(time=8, units=12, sequences=True, dense_before=True,
                                                         dense_after=True, seed=seed)
    return models


def save_models(models_dir: Path, only: list[str] | None) -> dict[str, Path]:
    """Each model's file in models_dir, saved there unless it already is."""
    models_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, builder in _models().items():
        if only and name not in only:
            continue
        found = sorted(models_dir.glob(f"{name}.*"))
        if found:
            paths[name] = found[0]
            continue
        model = builder(seed=0)
        legacy = type(model).__module__.startswith("tf_keras")
        path = models_dir / f"{name}.{'h5' if legacy else 'keras'}"
        model.save(path)
        paths[name] = path
    return paths


def _fresh_keras() -> None:
    """Reset Keras's global state before a build, as a new process would have it. Keras numbers the layers
    it creates (a loaded model's cells included) from process-wide counters, the converter orders the step
    model's tensors by those names, and so the bytes of a build would otherwise depend on the builds before
    it in the same process."""
    for name in ("keras", "tf_keras"):
        module = sys.modules.get(name)
        if module is not None:
            module.backend.clear_session()


def _saved_models(models_dir: Path, only: list[str] | None) -> dict[str, Path]:
    """The model files, saved first by a process of this script's own where any is missing."""
    names = [name for name in _models() if not only or name in only]
    if any(not any(models_dir.glob(f"{name}.*")) for name in names):
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--save-models", "--models", ",".join(names),
                        "--models-dir", str(models_dir)], check=True, stdout=subprocess.DEVNULL)
    return save_models(models_dir, only)


def run(boards: list[str], quants: list[str], only: list[str] | None, models_dir: Path) -> dict:
    os.environ.pop("GAP_SDK_HOME", None)
    try:
        from edgernn.cli.main import main           # the command's entry point
    except ImportError:
        from edgernn.cli import main                # in the layout before the stages
    digest = {}
    with tempfile.TemporaryDirectory(prefix="edgernn-digest-") as tmp:
        tmp = Path(tmp)
        for name, path in _saved_models(models_dir, only).items():
            modes = ["auto", "fused"] if name == "fused_lstm" else ["auto"]
            for mode in modes:
                for quant in quants:
                    for board in boards:
                        key = f"{name} {mode} {quant} {board}"
                        out = tmp / "out" / key.replace(" ", "-")
                        args = ["build", str(path), "--board", board, "-o", str(out), "--quant", quant,
                                "--mode", mode]
                        stderr = io.StringIO()
                        _fresh_keras()
                        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
                            argv, sys.argv = sys.argv, ["edgernn", *args]
                            try:
                                main()
                                status = 0
                            except SystemExit as exit_:
                                status = exit_.code or 0
                            except Exception as error:      # noqa: BLE001 - recorded, the digest goes on
                                status = f"{type(error).__name__}: {error}"
                            finally:
                                sys.argv = argv
                        if status == 0 and out.is_dir():
                            digest[key] = _digest_tree(out)
                        else:
                            lines = [l for l in stderr.getvalue().splitlines() if l.strip()]
                            digest[key] = {"refused": status, "reason": lines[-1] if lines else ""}
                        print(f"{key}: {'built, ' + str(len(digest[key])) + ' files' if status == 0 else digest[key]}",
                              file=sys.stderr, flush=True)
    return digest


def compare(before: dict, after: dict) -> int:
    differ = 0
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a == b:
            continue
        differ += 1
        if a is None or b is None:
            print(f"{key}: only {'after' if a is None else 'before'}")
            continue
        for rel in sorted(set(a) | set(b)):
            if a.get(rel) != b.get(rel):
                print(f"{key}: {rel} differs ({a.get(rel)} -> {b.get(rel)})")
    total = len(set(before) | set(after))
    print(f"{total - differ} of {total} builds identical" + ("" if differ == 0 else f", {differ} differ"))
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the digest here (default: stdout)")
    parser.add_argument("--boards", default=",".join(BOARDS))
    parser.add_argument("--quants", default=",".join(QUANTS))
    parser.add_argument("--models", default=None, help="comma-separated model names (default: all)")
    parser.add_argument("--models-dir", default=str(Path(tempfile.gettempdir()) / "edgernn-digest-models"),
                        help="where the model files are saved once and reused (default: %(default)s)")
    parser.add_argument("--save-models", action="store_true", help="only save the model files")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        return compare(*(json.loads(Path(p).read_text()) for p in args.compare))
    only = args.models.split(",") if args.models else None
    if args.save_models:
        for name, path in save_models(Path(args.models_dir), only).items():
            print(f"{name}: {path}")
        return 0
    digest = run(args.boards.split(","), args.quants.split(","), only, Path(args.models_dir))
    text = json.dumps(digest, indent=1, sort_keys=True) + "\n"
    if args.json:
        Path(args.json).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
