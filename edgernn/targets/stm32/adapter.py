"""The STM32 family's verbs: bare-metal Cortex-M4F firmware that edgernn compiles itself, as the native
family does, and runs in QEMU (``qemu_stm32f405``). What differs is the link: the board's linker script is
rendered into the firmware folder beside the HAL, so its ``ldflags`` name it through ``{firmware}``."""

from __future__ import annotations

from pathlib import Path

from edgernn.errors import EdgeRNNError
from edgernn.targets.adapter import Device, FirmwareBuild, Log, is_complete, require_firmware_folder, stage_firmware
from edgernn.targets.board import Board, board_from_data
from edgernn.targets.compile import BuildResult, compile_firmware, find_compiler
from edgernn.targets.native.adapter import NativeAdapter


def linked_board(board: Board, firmware_dir: Path) -> Board:
    """The board with ``{firmware}`` in its linker flags replaced by the firmware folder's absolute path."""
    folder = str(Path(firmware_dir).resolve())
    toolchain = dict(board.data.get("toolchain", {}))
    toolchain["ldflags"] = [flag.replace("{firmware}", folder) for flag in toolchain.get("ldflags", [])]
    return board_from_data(board.path, {**board.data, "toolchain": toolchain})


class Stm32Adapter(NativeAdapter):
    family = "stm32"

    def build(self, out_dir: Path, *, scratch: Path, final_out: Path, log: Log, verbose: bool) -> FirmwareBuild:
        log("compiling")
        firmware = Path(out_dir) / "firmware"
        built = compile_firmware(firmware, linked_board(self.board, firmware))
        messages = [f"compiled: {line}" for line in built.command_lines] if verbose else []
        return FirmwareBuild(firmware={"elf": str(built.elf.relative_to(out_dir)),
                                       "compilers": [b.compiler for b in built.builds]},
                             code_bytes=built.code_bytes, data_bytes=built.data_bytes, messages=messages, built=built)

    def build_elf(self, firmware_dir, build_dir=None, optimize=None, extra_cflags=None, make_vars=None) -> BuildResult:
        """The native family's build_elf (a bare model staged with the server and HAL first), linked with the
        board's linker script from the folder that is compiled."""
        board = self.board
        firmware_dir = Path(firmware_dir)
        require_firmware_folder(firmware_dir)
        if make_vars:
            raise EdgeRNNError(f"board {board.name} is compiled by edgernn: pass compiler flags, not make_vars")
        build_dir = Path(build_dir) if build_dir else firmware_dir / "build" / board.name
        if not is_complete(firmware_dir, board):
            firmware_dir = stage_firmware(firmware_dir, board, build_dir / "project")
        cflags = [*(extra_cflags or []), *([optimize] if optimize else [])]
        return compile_firmware(firmware_dir, linked_board(board, firmware_dir), build_dir=build_dir, cflags=cflags,
                                compilers=[find_compiler(board)])

    def start_counted(self, elf, log: Path, marks: list[int] = ()) -> Device:
        """Start a firmware in QEMU with the family's instruction-counting plugin (insn_plugin), which logs the
        count at each executed instruction of ``marks`` and the total into ``log``."""
        from edgernn.targets.stm32 import insn_plugin

        if self.board.emulator is None:
            return super().start(elf)
        return self._start_announced(Path(elf), insn_plugin.qemu_args(insn_plugin.build_plugin(), Path(log), marks))
