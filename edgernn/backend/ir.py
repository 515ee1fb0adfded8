"""The backend's view of a step model: tensors, constant buffers and operators, in graph order.

Plain dataclasses with numpy arrays, free of any flatbuffer object, so that the memory plan, the
quantization arithmetic and the code generator can be read and tested on their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

DTYPES = {
    "float32": (np.float32, "float", 4),
    "int8": (np.int8, "int8_t", 1),
    "int16": (np.int16, "int16_t", 2),
    "int32": (np.int32, "int32_t", 4),
    "int64": (np.int64, "int64_t", 8),
    "uint8": (np.uint8, "uint8_t", 1),
    "bool": (np.bool_, "uint8_t", 1),
}


@dataclass
class Tensor:
    index: int
    name: str
    dtype: str
    shape: tuple[int, ...]
    scale: np.ndarray | None = None          # float32 scales, one or one per channel
    zero_point: np.ndarray | None = None     # int64 zero points
    quantized_dimension: int = 0
    data: np.ndarray | None = None           # constant contents, or None for a runtime tensor
    is_variable: bool = False                # persistent across invokes (a fused RNN op's state)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype][2]

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def ctype(self) -> str:
        return DTYPES[self.dtype][1]

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def quantized(self) -> bool:
        return self.scale is not None and len(self.scale) > 0

    @property
    def per_channel(self) -> bool:
        return self.quantized and len(self.scale) > 1

    def qparams(self) -> tuple[float, int]:
        """The per-tensor (scale, zero point); (0.0, 0) for an unquantized tensor."""
        if not self.quantized:
            return 0.0, 0
        return float(self.scale[0]), int(self.zero_point[0]) if self.zero_point is not None else 0


@dataclass
class Operator:
    index: int
    op: str                      # builtin name, e.g. "FULLY_CONNECTED"
    inputs: list[int]            # tensor indices, -1 for an omitted optional input
    outputs: list[int]
    options: dict[str, Any] = field(default_factory=dict)
    intermediates: list[int] = field(default_factory=list)   # tensors that only carry quantization


@dataclass
class Graph:
    """One subgraph with the signature that names its inputs and outputs."""

    tensors: list[Tensor]
    operators: list[Operator]
    inputs: dict[str, int]       # signature key -> tensor index
    outputs: dict[str, int]
    sha256: str
    signature: str = "serving_default"
    # The LiteRT kernels the graph is validated against: "reference", or "builtin" for a graph with a
    # quantized SUM (edgernn.tflite.interpreter.oracle_kernels, the rule load_interpreter follows). None: derived
    # from the operators. Lowering picks, for an op whose builtin kernel rounds differently, that variant.
    oracle: str | None = None

    def __post_init__(self) -> None:
        if self.oracle is None:
            from edgernn.tflite.interpreter import oracle_kernels

            self.oracle = oracle_kernels(
                (op.op, self.tensors[op.inputs[0]].dtype if op.inputs and op.inputs[0] >= 0 else "")
                for op in self.operators)

    def tensor(self, index: int) -> Tensor:
        return self.tensors[index]

    @property
    def op_names(self) -> list[str]:
        return [op.op for op in self.operators]
