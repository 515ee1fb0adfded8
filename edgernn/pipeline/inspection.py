"""``edgernn inspect``: how each layer of a model would stream, what it costs, and where it fits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgernn.keras.decompose import decompose
from edgernn.errors import EdgeRNNError
from edgernn.keras.describe import layer_rows
from edgernn.keras.fused_rebuild import diagnose
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


def board_fit(params: int, state_elements: int, activations: int) -> list[dict]:
    """Rough memory per shipped board: weights, state and the activation peak (``activations`` elements) at
    each quantization against the budget of the memory that holds the weights (placement.weights_memory, the
    last of a list: their home; else the largest memory)."""
    from edgernn.targets.board import known_boards, load_board

    out = []
    for name in known_boards():
        board = load_board(name)
        weights_memory = board.placement.weights_memory
        if isinstance(weights_memory, list):
            weights_memory = weights_memory[-1] if weights_memory else None
        if weights_memory:
            capacity = board.memory_typed(weights_memory).budget
        else:
            capacity = max(m.size for m in board.memories_typed)
        entry = {"board": name, "memory_bytes": capacity}
        for quant, per in BYTES_PER_WEIGHT.items():
            act = 4 if quant == "float32" else (2 if quant == "int16" else 1)
            entry[quant] = params * per + (state_elements + activations) * act
        out.append(entry)
    return out


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
    try:
        result.boards = board_fit(result.params, result.state_elements, result.activation_peak_elements)
    except EdgeRNNError:
        result.boards = []
    return result
