"""Lower IR operators to kernel calls with every constant computed.

Each supported (op, dtype) pair has one lowering function. It checks what the kernel assumes, computes
the multipliers, shifts, folded biases and lookup tables the way TFLite's Prepare does, and returns a
:class:`Call`: the kernel's name, its arguments and the constant data it needs. Anything else is refused
with the op's name and its index in the graph.
"""

from __future__ import annotations

from edgernn.backend.lowering.activations import ActivationsOps
from edgernn.backend.lowering.conv import ConvOps
from edgernn.backend.lowering.base import Call, ConstArray, ConstStruct, LoweringBase, Unsupported
from edgernn.backend.lowering.elementwise import ElementwiseOps
from edgernn.backend.lowering.fully_connected import FullyConnectedOps
from edgernn.backend.lowering.lstm import LstmOps
from edgernn.backend.lowering.reduce import ReduceOps
from edgernn.backend.lowering.shape import ShapeOps

__all__ = ["Call", "ConstArray", "ConstStruct", "Lowering", "SUPPORTED", "Unsupported"]


class Lowering(FullyConnectedOps, ConvOps, ElementwiseOps, ActivationsOps, ReduceOps, ShapeOps, LstmOps,
               LoweringBase):
    """A graph's operators lowered to kernel calls: ``lower()``; one ``op_<name>`` method per op, by family."""


SUPPORTED = sorted(n[3:].upper() for n in dir(Lowering) if n.startswith("op_"))
