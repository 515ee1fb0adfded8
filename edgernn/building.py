"""``edgernn build``: convert, generate OUT/firmware/ for a board, and compile it with the board's toolchain.

The whole build happens in a staging folder beside OUT; OUT is replaced only when every stage passed.
"""

from __future__ import annotations

import copy
import json
import shlex
import shutil
from pathlib import Path
from typing import Any, Callable

from edgernn.boards import Board, load_board
from edgernn.conversion import MANIFEST, check_output_folder, commit_folder, convert_model, staging_folder
from edgernn.errors import EdgeRNNError

Log = Callable[[str], None]


def _require_compiler(board: Board) -> None:
    tc = board["toolchain"]
    if tc.get("cc") and shutil.which(tc["cc"]) is None and not tc.get("optional", False):
        raise EdgeRNNError(f"board {board.name} needs the compiler {tc['cc']}, which is not installed: "
                           f"{tc.get('install_hint', 'install it')}")


def _with_compiler(board: Board, cc: str) -> Board:
    data = copy.deepcopy(board.data)
    data["toolchain"]["cc"] = cc
    return Board(name=board.name, description=board.description, path=board.path, data=data)


def build_firmware(model: Any, out: str | Path, *, board: str, quant: str = "int8", calib: Any = None,
                   mode: str = "auto", unsafe: bool = False, verbose: bool = False, log: Log | None = None,
                   warn: Log | None = None) -> dict:
    """Returns ``{"manifest", "firmware", "messages"}``; OUT holds step.tflite, manifest.json, firmware/."""
    from edgernn import devices
    from edgernn.backend import generate_firmware

    log = log or (lambda _: None)
    from edgernn.backend import supported_ops
    from edgernn.fused import FUSED_OP

    if mode == "fused" and FUSED_OP not in supported_ops():
        raise EdgeRNNError("--mode fused cannot be built: the C backend has no fused LSTM kernel yet "
                           "(edgernn convert --mode fused makes the .tflite); use --mode auto or step")
    board_obj = load_board(board)
    _require_compiler(board_obj)
    out = Path(out)
    check_output_folder(out)

    staging = staging_folder(out)
    inner = staging / "out"
    messages = []
    try:
        manifest = convert_model(model, inner, quant=quant, calib=calib, mode=mode, unsafe=unsafe,
                                 board=board_obj.name, for_firmware=True, log=log, warn=warn)
        log(f"generating C for board {board_obj.name}")
        facts = generate_firmware(inner, board_obj, verbose=verbose)
        firmware_dir = inner / "firmware"
        log("compiling")
        built = devices.build_firmware(firmware_dir, board_obj)
        if verbose:
            messages.append(f"compiled: {shlex.join(built.command)}")
        compilers = [board_obj["toolchain"]["cc"]]
        for other in board_obj["toolchain"].get("also", []):
            if shutil.which(other):
                variant = devices.build_firmware(firmware_dir, _with_compiler(board_obj, other),
                                                 build_dir=firmware_dir / "build" / f"{board_obj.name}-{other}")
                compilers.append(other)
                if verbose:
                    messages.append(f"compiled: {shlex.join(variant.command)}")
        manifest.update({
            "arena_bytes": facts["arena_bytes"],
            "liveness_bound_bytes": facts["liveness_bound_bytes"],
            "weight_bytes": facts["weight_bytes"],
            "state_bytes": facts["state_bytes"],
            "code_bytes": built.code_bytes,
            "data_bytes": built.data_bytes,
            "firmware": {"elf": str(built.elf.relative_to(inner)), "compilers": compilers},
        })
        (inner / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        commit_folder(inner, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    messages.append(
        f"firmware for {board_obj.name}: arena {manifest['arena_bytes']} B (liveness bound "
        f"{manifest['liveness_bound_bytes']} B), weights {manifest['weight_bytes']} B, code {manifest['code_bytes']} B; "
        f"built with {', '.join(compilers)} -> {out / manifest['firmware']['elf']}"
    )
    if board_obj.emulated:
        messages.append(f"next: edgernn validate {out}")
    return {"manifest": manifest, "firmware": str(out / "firmware"), "messages": messages}
