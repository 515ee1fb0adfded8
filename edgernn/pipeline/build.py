"""``edgernn build``: convert, generate OUT/firmware/ for a board, and compile it with the board's toolchain.

The whole build happens in a staging folder beside OUT; OUT is replaced only when every stage passed.
"""

from __future__ import annotations

import os

import shlex
import shutil
from pathlib import Path
from typing import Any, Callable

from edgernn.targets.board import Board, load_board
from edgernn.outdir import BuildFacts, BuildFolder
from edgernn.pipeline.convert import convert
from edgernn.targets.compile import Part, compile_firmware, find_compiler
from edgernn.errors import EdgeRNNError

Log = Callable[[str], None]
_GAP_COMPILERS = {"gap": "GAP's riscv32-unknown-elf-gcc",
                  "debian": "Debian's riscv64-unknown-elf-gcc through edgernn's GAP8 wrapper"}


def _check_quant(board: Board, quant: str, warn: Log | None) -> None:
    """A board may refuse a quantization, or allow it with a warning ([quant] in its board file)."""
    rules = board.get("quant", {}) or {}
    policy = rules.get(quant, "ok")
    reason = rules.get(f"{quant}_reason", f"board {board.name} does not support {quant}")
    if policy == "refuse":
        raise EdgeRNNError(f"--quant {quant} is refused for board {board.name}: {reason}")
    if policy == "warn" and warn is not None:
        warn(f"warning: {reason}")


def _placement_line(facts: dict) -> str:
    placement = facts.get("placement")
    if not placement:
        return ""
    items = ", ".join(f"{k} {v['bytes']} B in {v['memory']}" for k, v in placement["items"].items())
    used = {v["memory"] for v in placement["items"].values()}
    budgets = ", ".join(f"{m} {b} B" for m, b in placement["budgets"].items() if m in used)
    return f"memory: {items} (budgets: {budgets})"


def build_firmware(model: Any, out: str | Path, *, board: str, quant: str = "int8", calib: Any = None,
                   mode: str = "auto", unsafe: bool = False, roll: bool = False, verbose: bool = False, log: Log | None = None,
                   warn: Log | None = None) -> dict:
    """Returns ``{"manifest", "firmware", "messages"}``; OUT holds step.tflite, manifest.json, firmware/."""
    from edgernn.targets import device as devices
    from edgernn.backend import generate_firmware

    log = log or (lambda _: None)
    board_obj = load_board(board)
    _check_quant(board_obj, quant, warn)
    gap_sdk = devices.is_gap_sdk(board_obj)
    if not gap_sdk:
        find_compiler(board_obj)
    elif not board_obj["toolchain"].get("optional", False) or os.environ.get(board_obj["gap_sdk"]["home_env"]):
        # before converting: an emulated GAP8 cannot run an unbuilt project, and a named SDK that is not
        # a supported release (older than 4.8.0) is refused before any work
        devices.gap_sdk_config(board_obj)
    out = Path(out)
    folder = BuildFolder(out)
    folder.check()

    messages = []
    with folder.staged() as staging:
        inner = staging / "out"
        manifest = convert(model, inner, quant=quant, calib=calib, mode=mode, unsafe=unsafe, roll=roll,
                                 board=board_obj.name, log=log, warn=warn)
        log(f"generating C for board {board_obj.name}")
        facts = generate_firmware(inner, board_obj, verbose=verbose)
        firmware_dir = inner / "firmware"
        if gap_sdk:
            sdk_line, gap_built = _build_gap_sdk(board_obj, firmware_dir, staging / "check", out, log, messages,
                                                 verbose)
            manifest.record_build(
                BuildFacts(liveness_bound_bytes=facts["liveness_bound_bytes"], state_bytes=facts["state_bytes"],
                           data_bytes=gap_built.data_bytes if gap_built else None, placement=facts["placement"],
                           team_ops=facts["team_ops"],
                           firmware={"project": "firmware/Makefile", "built": gap_built is not None,
                                     "elf": f"firmware/{board_obj['gap_sdk']['elf']}" if gap_built else None,
                                     "image": f"firmware/{board_obj['gap_sdk']['image']}",
                                     "compilers": [_GAP_COMPILERS[gap_built.compiler]] if gap_built else []}),
                arena_bytes=facts["arena_bytes"], weight_bytes=facts["weight_bytes"],
                code_bytes=gap_built.code_bytes if gap_built else None)
            from edgernn.pipeline.convert import calibration_sequences
            from edgernn.targets.nntool import write_nntool

            log("writing the NNTool flow's files")
            write_nntool(inner, manifest, calibration_sequences(calib, manifest.inputs[0]["shape"][1:]))
        else:
            log("compiling")
            # the board's compiler, then each installed `also` compiler into its own build folder
            built = compile_firmware(firmware_dir, board_obj)
            if verbose:
                messages += [f"compiled: {line}" for line in built.command_lines]
            compilers = [b.compiler for b in built.builds]
            manifest.record_build(
                BuildFacts(liveness_bound_bytes=facts["liveness_bound_bytes"], state_bytes=facts["state_bytes"],
                           data_bytes=built.data_bytes, placement=facts["placement"], team_ops=facts["team_ops"],
                           firmware={"elf": str(built.elf.relative_to(inner)), "compilers": compilers}),
                arena_bytes=facts["arena_bytes"], weight_bytes=facts["weight_bytes"], code_bytes=built.code_bytes)
        manifest = folder.commit(inner, manifest)
    shutil.rmtree(staging, ignore_errors=True)
    placement_line = _placement_line(facts)
    if gap_sdk:
        messages.append(
            f"GAP SDK project for {board_obj.name} in {out / 'firmware'}: arena {manifest.arena_bytes} B, "
            f"weights {manifest.weight_bytes} B; {len(facts['team_ops'])} ops split across "
            f"{board_obj['parallel']['workers']} cluster cores")
        if placement_line:
            messages.append(placement_line)
        messages.append(f"for GreenWaves' NNTool flow: {out / 'nntool'}/nntool_script, host_loop.c (see docs/boards/ai_deck.md)")
        if board_obj.emulated:
            messages.append(f"built with the GAP SDK ({manifest.build.firmware['compilers'][0]}, code "
                            f"{manifest.code_bytes} B) -> {out / manifest.build.firmware['elf']}; "
                            f"next: edgernn validate {out}")
        else:
            messages.append(sdk_line or f"built with the GAP SDK ({manifest.build.firmware['compilers'][0]}, code "
                                        f"{manifest.code_bytes} B) -> {out / manifest.build.firmware['image']}; "
                                        f"flash: edgernn flash {out} (JTAG) or edgernn flash {out} --radio "
                                        f"{board_obj['flash']['radio_example']}")
        return {"manifest": manifest.as_dict(), "firmware": str(out / "firmware"), "messages": messages}
    messages.append(
        f"firmware for {board_obj.name}: arena {manifest.arena_bytes} B (liveness bound "
        f"{manifest.build.liveness_bound_bytes} B), weights {manifest.weight_bytes} B, code {manifest.code_bytes} B; "
        f"built with {', '.join(manifest.build.firmware['compilers'])} -> {out / manifest.build.firmware['elf']}"
    )
    if board_obj.emulated:
        messages.append(f"next: edgernn validate {out}")
    return {"manifest": manifest.as_dict(), "firmware": str(out / "firmware"), "messages": messages}


def _build_gap_sdk(board: Board, firmware_dir: Path, check_dir: Path, out: Path, log: Log,
                   messages: list[str], verbose: bool):
    """Check the portable sources with the board's check compiler, then build with the GAP SDK when it
    is set up. Returns (None, the build) when built, else (the one line saying how to build and flash
    by hand, None)."""
    from edgernn.targets import device as devices

    cc = find_compiler(board, check=True, required=False)
    if cc is not None:
        checked = compile_firmware(firmware_dir, board, part=Part.PORTABLE, build_dir=check_dir).commands
        messages.append(f"portable sources ({len(checked)} files) compile warning-free with {cc} "
                        f"{' '.join(board['toolchain'].get('check_cflags', []))}")
    try:
        devices.gap_sdk_config(board)
    except EdgeRNNError as missing:
        if not board["toolchain"].get("optional", False):
            raise   # an emulated GAP8 runs only what was built: the SDK is required
        reason = str(missing).split(":")[0]
        return f"not built here ({reason}); {devices.manual_commands(board, out)}", None
    log("building with the GAP SDK")
    built = devices.build_gap_project(firmware_dir, board)
    if verbose:
        messages.append(f"built: {shlex.join(built.command)}")
    return None, built
