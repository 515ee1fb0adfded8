"""``edgernn inspect``: how each layer of a model would stream, what it costs, and where it fits."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from edgernn.keras.decompose import decompose
from edgernn.errors import EdgeRNNError
from edgernn.keras.describe import layer_rows
from edgernn.keras.fused_rebuild import diagnose
from edgernn.outdir import Manifest, read_manifest
from edgernn.pytorch.load import load_any

BYTES_PER_WEIGHT = {"float32": 4, "int16": 1, "int8": 1}  # 16x8 keeps int8 weights


@dataclass
class Inspection:
    model_name: str
    keras: str
    features: int
    steps: int | None
    rows: list[dict]
    sequence_output: str
    input_shape: tuple[int, ...] = ()  # one step: (features,) or a frame (H, W, C)
    quant: str = "int8"
    mode: str = "auto"
    plan_lines: list[str] = field(default_factory=list)
    boards: list[dict] = field(default_factory=list)

    @property
    def params(self) -> int:
        return sum(r["params"] for r in self.rows)

    @property
    def macs_per_step(self) -> int:
        return sum(r["macs_per_step"] for r in self.rows if r["path"] in ("step", "fused", "per step"))

    @property
    def state_elements(self) -> int:
        return sum(s["size"] for r in self.rows for s in r["states"])

    @property
    def activation_peak_elements(self) -> int:
        return activation_peak(self.features, self.rows)

    def as_dict(self) -> dict:
        return {
            "model": self.model_name, "keras": self.keras, "features": self.features, "steps": self.steps,
            "input_shape": list(self.input_shape), "activation_peak_elements": self.activation_peak_elements,
            "sequence_output": self.sequence_output, "params": self.params, "macs_per_step": self.macs_per_step,
            "state_elements": self.state_elements, "quant": self.quant, "mode": self.mode,
            "rnn_paths": self.plan_lines, "layers": self.rows, "boards": self.boards,
        }


def activation_peak(features: int, rows: list[dict]) -> int:
    """The most activation elements alive at once in one step, by liveness along the chain: a layer's input
    and output live together. An estimate before conversion: build plans the real arena (backend memplan) and
    checks it against the board."""
    peak, previous = features, features
    for row in rows:
        if row["path"] in ("dropped", "once, after the last step") or not row["activation_elements"]:
            continue
        peak = max(peak, previous + row["activation_elements"])
        previous = row["activation_elements"]
    return peak


# the cells on the step path: their gates are FULLY_CONNECTEDs of (gates x units) rows, one of the input and
# one of the state, each streamable
_STEP_GATES = {"LSTM": 4, "GRU": 3, "SimpleRNN": 1}


def stream_candidates(rows: list[dict], features: int | None = None) -> list[tuple]:
    """The weight matrices an int8 build could stream from a board's stream memory, by the kernels of
    edgernn/backend/streaming.py's table STREAMED, as ``(layer, kernel, units, unit bytes, array names)``:
    the LSTMs on the fused path (two gate matrices, ``4 n_cell`` rows of ``n_input`` and of ``n_cell``), each
    Dense (a FULLY_CONNECTED of its units), and the step-path cells' gate FULLY_CONNECTEDs (of the input and
    of the state). An estimate from the layer rows: a layer's inputs are the row before's outputs (the
    model's ``features`` for the first), else derived from its MACs; the build decides from the lowering."""
    out = []
    fc = "edgernn_fully_connected_s8"
    before = features
    for row in rows:
        shape = row.get("output_shape") or []
        name, cls = row["name"], row["class"]
        n_in = before
        if cls == "LSTM" and row["path"] == "fused" and row["states"]:
            n_cell = int(row["states"][0]["size"])
            if not n_in and n_cell:
                n_in = (int(row["macs_per_step"]) - 4 * n_cell * n_cell) // (4 * n_cell)
            if n_cell > 0 and n_in and n_in > 0:
                out.append((name, "edgernn_lstm_s8", n_cell, (4 * n_in, 4 * n_cell), (f"{name}.w_in", f"{name}.w_rec")))
        elif cls in _STEP_GATES and row["path"] == "step" and row["states"]:
            units = int(row["states"][0]["size"])
            gates = _STEP_GATES[cls]
            if not n_in and units:
                n_in = int(row["macs_per_step"]) // (gates * units) - units
            if units > 0 and n_in and n_in > 0:
                out.append((name, fc, gates * units, (n_in,), (f"{name}.w_in",)))
                out.append((name, fc, gates * units, (units,), (f"{name}.w_rec",)))
        elif cls == "Dense" and shape:
            n_out = int(shape[-1])
            if not n_in and n_out:
                n_in = int(row["macs_per_step"]) // n_out
            if n_out > 0 and n_in and n_in > 0:
                out.append((name, fc, n_out, (n_in,), (f"{name}.w",)))
        if shape:
            before = 1
            for d in shape:
                before *= int(d)
    return out


def _streamable(candidates) -> tuple[dict[str, int], int]:
    """(array -> bytes, the double buffer's bytes) of ``stream_candidates`` at int8, as placement takes them."""
    from edgernn.backend.streaming import STREAMED, slot_bytes

    arrays, slot = {}, 0
    for _, kernel, units, unit_bytes, names in candidates:
        for array, b in zip(names, unit_bytes):
            arrays[array] = units * b
        slot = max(slot, slot_bytes(STREAMED[kernel], units, unit_bytes))
    return arrays, 2 * slot


def fit_on_board(board, params: int, state_elements: int, activations: int,
                 lstms: list[tuple] = ()) -> dict:
    """Whether a model fits ``board`` at each quantization, by placement's own rule (edgernn/backend/
    placement.py: the arena, the state and the weights in the board's memories, and, on a board with a
    ``weights_stream_memory``, the largest streamable arrays moved there until the weights' home fits),
    applied to estimates: weights ``params`` x their bytes, state and arena (``activations``, the peak)
    at the activations' bytes, the weight matrices of ``lstms`` (stream_candidates) streamable. Per quantization: ``fits``,
    ``streamed_bytes`` (from the stream memory), ``memories`` (bytes used in each, when it fits) and
    ``verdict``, one line."""
    from edgernn.backend.placement import MemoryBudgetError, place

    weights_memory = board.placement.weights_memory
    if isinstance(weights_memory, list):
        weights_memory = weights_memory[-1] if weights_memory else None
    if weights_memory:
        capacity = board.memory_typed(weights_memory).budget
    else:
        capacity = max(m.size for m in board.memories_typed)
    entry = {"board": board.name, "memory_bytes": capacity}
    stream_memory = board.placement.weights_stream_memory
    if stream_memory:
        entry["stream_memory"] = stream_memory
        entry["stream_memory_bytes"] = board.memory_typed(stream_memory).budget
    fit = {}
    for quant, per in BYTES_PER_WEIGHT.items():
        act = 4 if quant == "float32" else (2 if quant == "int16" else 1)
        entry[quant] = params * per + (state_elements + activations) * act
        streamable, tiles = _streamable(lstms) if quant == "int8" and stream_memory else ({}, 0)
        try:
            placement = place(board, weight_bytes=params * per, state_bytes=state_elements * act,
                              arena_bytes=activations * act, streamable=streamable, stream_tile_bytes=tiles)
        except MemoryBudgetError as exc:
            over = re.search(r"over budget in (.+?) \(budget", str(exc))
            verdict = f"does not fit: over budget in {over.group(1) if over else '?'}"
            if streamable:
                verdict += f", with all {sum(streamable.values())} B of its streamable arrays in {stream_memory}"
            fit[quant] = {"fits": False, "streamed_bytes": 0, "memories": {}, "verdict": verdict}
            continue
        memories = {m: placement.used(m) for m in placement.budgets if placement.used(m)}
        streamed = placement.streamed_bytes
        on_chip = ", ".join(f"{n} B in {m}" for m, n in memories.items() if not (streamed and m == placement.stream_memory))
        verdict = (f"fits, {streamed} B streamed from {placement.stream_memory}" if streamed else "fits") + \
            (f" ({on_chip})" if on_chip else "")
        fit[quant] = {"fits": True, "streamed_bytes": streamed, "memories": memories, "verdict": verdict}
    entry["fit"] = fit
    return entry


def board_fit(params: int, state_elements: int, activations: int,
              lstms: list[tuple] = ()) -> list[dict]:
    """Rough memory per shipped board (``fit_on_board``): ``memory_bytes`` is the budget of the weights' home
    (placement.weights_memory, the last of a list; else the largest memory) and each quantization's key the
    weights, state and activation peak together; ``fit`` says where they go and whether they fit."""
    from edgernn.targets.board import known_boards, load_board

    return [fit_on_board(load_board(name), params, state_elements, activations, lstms) for name in known_boards()]


def inspect_model(model: Any, *, unsafe: bool = False, quant: str = "int8", mode: str = "auto",
                  roll: bool = False) -> Inspection:
    """``quant`` and ``mode`` are those of the conversion the paths are shown for."""
    loaded = load_any(model, unsafe=unsafe, roll=roll)
    plan = decompose(loaded.model, loaded.flavour)
    diagnosis = diagnose(plan, quant, "auto" if mode == "fused" else mode)
    rows = layer_rows(plan, diagnosis)
    result = Inspection(
        model_name=loaded.path.name if loaded.path else loaded.model.name,
        keras="Keras 3" if loaded.flavour == "keras" else "tf_keras (Keras 2)",
        features=plan.features,
        steps=plan.steps,
        rows=rows,
        input_shape=plan.input_shape,
        sequence_output="every step" if plan.head_per_step else "last step (head runs once)",
        quant=quant,
        mode=mode,
        plan_lines=diagnosis.lines(),
    )
    int8_rows = rows
    if quant != "int8":
        try:
            int8_rows = layer_rows(plan, diagnose(plan, "int8", "auto" if mode == "fused" else mode))
        except EdgeRNNError:
            int8_rows = []
    try:
        result.boards = board_fit(result.params, result.state_elements, result.activation_peak_elements,
                                  stream_candidates(int8_rows, plan.features if isinstance(plan.features, int) else None))
    except EdgeRNNError:
        result.boards = []
    return result


# ---------------------------------------------------------------- a build folder

def inspect_build(folder) -> dict:
    """``edgernn inspect OUT/``: a build folder's model, quantization and sizes, and for ``--quant auto`` its
    precision plan (manifest ``precision``): the budget, the error reached against int8's and int16's, the
    estimated cost of the int8, int16 and chosen plans, and the dtype of every op, by layer."""
    from pathlib import Path

    manifest = read_manifest(folder)
    source = manifest.source or {}
    precision = manifest.precision
    error = manifest.quantization_error or {}
    out = {
        "folder": str(Path(folder)),
        "model": source.get("name") or (Path(manifest.model_file).name if manifest.model_file else None),
        "quant": manifest.quant, "mode": manifest.mode, "board": manifest.board,
        "ops": len(manifest.ops or []), "macs_per_step": manifest.macs_per_step,
        "weight_bytes": manifest.weight_bytes, "arena_bytes": manifest.arena_bytes,
        "l2r": error.get("l2r"),
        "precision": None,
        "horizon": _horizon(manifest),
    }
    if isinstance(precision, dict) and isinstance(precision.get("plan"), list):
        by_layer: dict[str, dict[str, list[str]]] = {}
        for row in precision["plan"]:
            layer = by_layer.setdefault(row.get("layer") or "(graph)", {"int8": [], "int16": []})
            layer[row["dtype"]].append(row["name"])
        out["precision"] = {
            **{k: precision.get(k) for k in ("max_error", "error", "int8_error", "int16_error", "met", "note", "head",
                                             "on", "int16_ops", "int8_ops", "quantize_ops", "groups", "x", "y",
                                             "states", "float_fallback_ops", "two_part_weights", "weight_bytes",
                                             "arena_estimate_bytes", "estimate")},
            "layers": [{"layer": name, "int16": len(d["int16"]), "int8": len(d["int8"]),
                        "int16_ops": sorted(set(d["int16"])), "int8_ops": sorted(set(d["int8"]))}
                       for name, d in by_layer.items()],
            "plan": precision["plan"],
        }
    elif isinstance(precision, dict):      # --quant auto with one precision for the whole model (fused mode)
        out["precision"] = {"plan": precision.get("plan"), "note": precision.get("note"),
                            "error": precision.get("error")}
    return out


def _horizon(manifest: Manifest) -> dict | None:
    """The horizon the quantization was judged over (docs/quantization.md): its steps, the streams, the error on them
    (the plan's held-out check under --quant auto, else the quantized step model's), and the states whose range the
    horizon widened beyond the calibration windows'; None for a model without streams (stateless, float32, or
    calibration windows as long as the horizon)."""
    calibration = manifest.calibration or {}
    if not calibration.get("horizon_streams"):
        return None
    error = (manifest.quantization_error or {}).get("horizon") or {}
    held = (manifest.precision or {}).get("held_out") or {}
    budget_error = held.get("l2r") if held.get("horizon") else max(error.get("l2r", 0.0),
                                                                   error.get("sequence_l2r", 0.0))
    return {"steps": calibration.get("horizon"), "streams": calibration.get("horizon_streams"),
            "error": budget_error, "widened": calibration.get("horizon_widened") or {}}
