"""The STM32 family's verbs: bare-metal Cortex-M4F firmware that edgernn compiles itself, as the native
family does, and runs in QEMU (``qemu_stm32f405``). What differs is the link: the board's linker script is
rendered into the firmware folder beside the HAL, so its ``ldflags`` name it through ``{firmware}``."""

from __future__ import annotations

from pathlib import Path

from edgernn.targets.adapter import Device
from edgernn.targets.board import Board, board_from_data
from edgernn.targets.native.adapter import NativeAdapter


def linked_board(board: Board, firmware_dir: Path) -> Board:
    """The board with ``{firmware}`` in its linker flags replaced by the firmware folder's absolute path."""
    folder = str(Path(firmware_dir).resolve())
    toolchain = dict(board.data.get("toolchain", {}))
    toolchain["ldflags"] = [flag.replace("{firmware}", folder) for flag in toolchain.get("ldflags", [])]
    return board_from_data(board.path, {**board.data, "toolchain": toolchain})


class Stm32Adapter(NativeAdapter):
    family = "stm32"

    def compiled_board(self, firmware_dir: Path) -> Board:
        """The board with its linker script's folder filled in (linked_board)."""
        return linked_board(self.board, firmware_dir)

    def start_counted(self, elf, log: Path, marks: list[int] = ()) -> Device:
        """Start a firmware in QEMU with the family's instruction-counting plugin (insn_plugin), which logs the
        count at each executed instruction of ``marks`` and the total into ``log``."""
        from edgernn.targets.stm32 import insn_plugin

        if self.board.emulator is None:
            return super().start(elf)
        return self._start_announced(Path(elf), insn_plugin.qemu_args(insn_plugin.build_plugin(), Path(log), marks))
