"""Stage 5, the C backend: step.tflite (and head.tflite) -> self-contained C99 in OUT/firmware/.

``generate_firmware`` (edgernn/backend/firmware.py) writes every source of the board's firmware into
OUT/firmware/ and returns the facts of the build, a :class:`FirmwareFacts`: ``plan_firmware`` decides
everything (a :class:`FirmwarePlan`, nothing written), then ``write_firmware`` writes it;
``edgernn.targets.compile.compile_firmware`` compiles the folder. See docs/architecture.md for the
backend's modules and docs/ops.md for the ops and the exactness of each kernel.
"""

from __future__ import annotations

from edgernn.backend.firmware import (FirmwareFacts, FirmwarePlan, generate_firmware, plan_firmware, state_keys,
                                      write_firmware)
from edgernn.backend.placement import MemoryBudgetError
from edgernn.backend.reader import read_tflite

__all__ = ["FirmwareFacts", "FirmwarePlan", "generate_firmware", "plan_firmware", "write_firmware", "state_keys",
           "read_tflite", "supported_ops", "MemoryBudgetError"]


def supported_ops() -> list[str]:
    from edgernn.backend.lowering import SUPPORTED

    return list(SUPPORTED)
