#!/usr/bin/env python3
"""The layering of edgernn's package, measured: which module imports which, and which imports or
calls run back up the pipeline.

    python scripts/layers.py                 # static: modules, layers, imports back up a layer
    python scripts/layers.py --trace         # also: build a test model and count the calls back up

The stages, in pipeline order, with the shared leaves first (every stage may import a leaf):

    0 leaves     errors, resources, procs, tfenv, _version, outdir, metrics
    1 keras      load, decompose, step model, fused model, float reference
    2 pytorch    ONNX files and torch modules mapped onto Keras models; the loader of every format
    3 tflite     flatbuffer, interpreter, quantize, oracle
    4 link       framing, protocol, client: the wire format, defined once, which the backend renders into
                 the firmware's protocol.h and the host's client speaks
    5 backend    reader, IR, lowering, codegen
    6 targets    boards, compile, devices, GAP SDK, GVSOC
    7 pipeline   the stages joined: convert, build, inspect
    8 validate   run, compare, report
    9 cli        the command line (and python -m edgernn)
   10 edgernn    the package's Python API (edgernn/__init__.py)
   11 testing    the model builders, data and harnesses the tests and benches share; no stage imports it

An import "back up" goes from a module to one of a later layer. Every import counts, the ones
inside functions too (edgernn imports TensorFlow and the later stages lazily).

--trace builds edgernn/testing/zoo.py's lstm_pre_head for the host board (int8) with a profiler on and
counts the calls between layers, and the calls back up: a function calling a function of a later
layer (through a lazy import). It also prints the stages (1-6) the executed functions belong to, in
order, and how often that sequence returns to an earlier stage (the pipeline calling the stages in
turn returns too: this is a picture of the path, not a fault count). EDGERNN_ROOT=<checkout> with PYTHONPATH=<checkout> measures another checkout;
modules of the layout before the stages (edgernn/conversion.py ...) are placed by OLD_LAYOUT.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(os.environ.get("EDGERNN_ROOT", Path(__file__).resolve().parent.parent))
LAYERS = ["leaves", "keras", "pytorch", "tflite", "link", "backend", "targets", "pipeline", "validate", "cli", "edgernn",
          "testing"]
LEAVES = {"errors", "resources", "procs", "tfenv", "_version", "outdir", "metrics"}
OLD_LAYOUT = {
    "buildfolder": "leaves", "loading": "keras", "decompose": "keras", "stepmodel": "keras", "fused": "keras",
    "interop": "keras", "tflite_model": "tflite", "interpreter": "tflite", "quantize": "tflite",
    "reference": "tflite", "boards": "targets", "devices": "targets", "gap_sdk": "targets", "nntool": "targets",
    "conversion": "pipeline", "building": "pipeline", "inspection": "pipeline", "validation": "validate",
    "streamstats": "validate", "report": "validate", "cli": "cli", "render": "cli", "__main__": "cli",
}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "edgernn":
        raise ValueError(module)
    if len(parts) == 1:
        return "edgernn"
    head = parts[1]
    if head in LEAVES:
        return "leaves"
    if head in OLD_LAYOUT:
        return OLD_LAYOUT[head]
    if head == "backend" and parts[2:3] == ["compile"]:
        return "targets"          # the old layout's backend/compile.py
    if head in LAYERS:
        return head
    raise ValueError(f"no layer for {module}")


def modules(root: Path = ROOT) -> dict[str, Path]:
    found = {}
    for path in sorted((root / "edgernn").rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> list[tuple[str, int]]:
    """(imported edgernn module, line) for every import statement in the file."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "edgernn"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] != "edgernn":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.append((sub if sub in known else base, node.lineno))
    return out


def layer_imports(root: Path = ROOT) -> tuple[dict[str, list[str]], Counter, list[str]]:
    """The modules of each layer, the count of imports between each pair of layers, and every import that
    runs back up a layer (as "file:line: module (layer) imports module (layer)")."""
    mods = modules(root)
    known = set(mods)
    per_layer = defaultdict(list)
    edges = Counter()
    up = []
    for name, path in mods.items():
        per_layer[layer_of(name)].append(name)
        for target, line in imports(name, path, known):
            if target not in known:
                continue
            a, b = LAYERS.index(layer_of(name)), LAYERS.index(layer_of(target))
            if a != b:
                edges[(layer_of(name), layer_of(target))] += 1
            if b > a:
                up.append(f"{path.relative_to(root)}:{line}: {name} ({layer_of(name)}) imports {target} "
                          f"({layer_of(target)})")
    return per_layer, edges, up


def family_rooms(root: Path = ROOT) -> list[str]:
    """The board families' rooms: the packages of edgernn/targets/ (edgernn.targets.gap8, ...)."""
    return sorted(f"edgernn.targets.{p.parent.name}" for p in (root / "edgernn" / "targets").glob("*/__init__.py"))


def family_reaches(root: Path = ROOT) -> list[str]:
    """Every import of a family room's module from outside edgernn/targets/ (as "file:line: module imports
    module"): the stages reach a family only through its adapter's verbs (edgernn.targets.device)."""
    mods = modules(root)
    rooms = family_rooms(root)
    found = []
    for name, path in mods.items():
        if name == "edgernn.targets" or name.startswith("edgernn.targets."):
            continue
        for target, line in imports(name, path, set(mods)):
            if any(target == room or target.startswith(room + ".") for room in rooms):
                found.append(f"{path.relative_to(root)}:{line}: {name} imports {target}")
    return found


def static_report() -> int:
    per_layer, edges, up = layer_imports()
    mods = [m for names in per_layer.values() for m in names]
    print(f"{len(mods)} modules in {sum(1 for l in LAYERS if per_layer[l])} layers")
    for layer in LAYERS:
        if per_layer[layer]:
            names = ", ".join(sorted(m.split(".", 1)[-1] if "." in m else m for m in per_layer[layer]))
            print(f"  {LAYERS.index(layer)} {layer:9} {len(per_layer[layer]):2}  {names}")
    print("imports between layers (from -> to: count):")
    for (a, b), n in sorted(edges.items(), key=lambda kv: (LAYERS.index(kv[0][0]), LAYERS.index(kv[0][1]))):
        print(f"  {a} -> {b}: {n}{'   BACK UP' if LAYERS.index(b) > LAYERS.index(a) else ''}")
    print(f"imports back up a layer: {len(up)}")
    for line in up:
        print(f"  {line}")
    reaches = family_reaches()
    print(f"imports of a family's internals from outside edgernn/targets/: {len(reaches)} "
          f"(rooms: {', '.join(room.rsplit('.', 1)[1] for room in family_rooms())})")
    for line in reaches:
        print(f"  {line}")
    return len(up) + len(reaches)


def test_helper(name: str):
    """The tests' helper module ``name`` of the checkout measured: edgernn.testing's, or in a checkout from before
    that package, its file in tests/support (or, earlier still, tests/)."""
    import importlib
    import importlib.util

    try:
        return importlib.import_module(f"edgernn.testing.{name}")
    except ModuleNotFoundError as err:
        if not (err.name or "").startswith("edgernn.testing"):
            raise
    path = next(p for p in (ROOT / "tests" / "support" / f"{name}.py", ROOT / "tests" / f"{name}.py") if p.is_file())
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def trace_report() -> None:
    import tempfile

    zoo = test_helper("zoo")

    model = zoo.lstm_pre_head(seed=0)
    stages = LAYERS[1:7]
    calls: list[tuple[str, str]] = []      # (caller layer, callee layer) for edgernn -> edgernn calls
    callees: dict[tuple[str, str], Counter] = defaultdict(Counter)   # the functions called, per pair
    root = str(ROOT / "edgernn") + os.sep
    mods = {str(p): n for n, p in modules().items()}

    def layer_of_frame(frame):
        f = frame.f_code.co_filename
        return layer_of(mods[f]) if f.startswith(root) and f in mods else None

    def profile(frame, event, arg):
        if event != "call":
            return
        callee = layer_of_frame(frame)
        if callee is None or frame.f_back is None:
            return
        caller = layer_of_frame(frame.f_back)
        if caller is not None and caller != callee:
            calls.append((caller, callee))
            callees[(caller, callee)][f"{mods[frame.f_code.co_filename]}.{frame.f_code.co_name}"] += 1

    try:
        from edgernn.pipeline.build import build_model as build_firmware
    except ImportError:       # a checkout from before the rename, or before the stages
        try:
            from edgernn.pipeline.build import build_firmware
        except ImportError:
            from edgernn.building import build_firmware
    with tempfile.TemporaryDirectory() as tmp:
        sys.setprofile(profile)
        try:
            build_firmware(model, Path(tmp) / "out", board="host", quant="int8")
        finally:
            sys.setprofile(None)
    against = Counter((a, b) for a, b in calls if LAYERS.index(b) > LAYERS.index(a) and a != "edgernn")
    path = []
    for _, b in calls:
        if b in stages and (not path or path[-1] != b):
            path.append(b)
    returns = sum(1 for a, b in zip(path, path[1:]) if stages.index(b) < stages.index(a))
    print(f"build of lstm_pre_head (host, int8): {len(calls)} calls between layers")
    print(f"the stages the model's path visits, in order: {len(path)} visits, {returns} of them back to an "
          f"earlier stage: {' '.join(path)}")
    print(f"calls back up (a function calling one of a later layer): {sum(against.values())}")
    for (a, b), n in sorted(against.items()):
        top = ", ".join(f"{name} {count}" for name, count in callees[(a, b)].most_common(3))
        print(f"  {a} -> {b}: {n} (calls of {top})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", action="store_true", help="also build a test model and count the calls back up")
    args = parser.parse_args()
    up = static_report()
    if args.trace:
        trace_report()
    return 1 if up else 0


if __name__ == "__main__":
    sys.exit(main())
