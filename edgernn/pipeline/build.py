"""``edgernn build``: convert, generate OUT/firmware/ for a board, and build it with the board's toolchain.

The board's family adapter (edgernn.targets.device.adapter_for) does what differs between boards:
checking the toolchain, generating, building, and the lines the build ends with. The whole build
happens in a staging folder beside OUT; OUT is replaced only when every stage passed.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

from edgernn.errors import EdgeRNNError
from edgernn.outdir import BuildFacts, BuildFolder
from edgernn.pipeline.convert import convert
from edgernn.targets.board import Board, load_board, with_app, with_link
from edgernn.targets.device import adapter_for

Log = Callable[[str], None]


def _check_quant(board: Board, quant: str, warn: Log | None) -> None:
    """A board may refuse a quantization, or allow it with a warning ([quant] in its board file)."""
    policy, reason = board.quant_rule(quant)
    if policy == "refuse":
        raise EdgeRNNError(f"--quant {quant} is refused for board {board.name}: {reason}")
    if policy == "warn" and warn is not None:
        warn(f"warning: {reason}")


def build_model(model: Any, out: str | Path, *, board: str, quant: str = "int8", calib: Any = None,
                mode: str = "auto", unsafe: bool = False, roll: bool = False, verbose: bool = False,
                log: Log | None = None, warn: Log | None = None, max_error: float = 0.02,
                horizon: int | None = None, link: str | None = None, app=None) -> dict:
    """A model to a build folder: returns ``{"manifest", "firmware", "messages"}``; OUT holds step.tflite,
    manifest.json, firmware/ (and what the board's family writes beside it). ``link``: one of the board's
    links (``serial.links``; its first by default), recorded in the manifest. ``app``: an application
    (edgernn.targets.gap8.app.AppOptions) instead of the validation server, on a board whose family has one."""
    log = log or (lambda _: None)
    loaded = load_board(board)
    if app is not None:
        if link == "uart":
            raise EdgeRNNError("the camera application sends its outputs over CPX (the deck's ESP32): "
                               "--link uart does not apply to --app")
        family = adapter_for(loaded)
        if app.kind not in family.app_kinds:
            raise EdgeRNNError(f"board {loaded.name} has no {app.kind!r} application (boards with one: ai_deck, "
                               "gvsoc_gap8)")
        link = "wifi"
    adapter = adapter_for(with_app(with_link(loaded, link), app.kind if app is not None else None))
    board_obj = adapter.board
    _check_quant(board_obj, quant, warn)
    adapter.check_toolchain()
    out = Path(out)
    folder = BuildFolder(out)
    folder.check()

    with folder.staged() as staging:
        inner = staging / "out"
        manifest = convert(model, inner, quant=quant, calib=calib, mode=mode, unsafe=unsafe, roll=roll,
                           board=board_obj.name, max_error=max_error, horizon=horizon, log=log, warn=warn)
        manifest.link = link or board_obj.serial.links[0]
        log(f"generating C for board {board_obj.name} (link: {manifest.link})")
        facts = adapter.generate(inner, verbose=verbose)
        if app is not None:
            manifest.app = adapter.write_app(inner, manifest, app, facts)
            log(f"the {app.kind} application written (its summary ends the build)")
        built = adapter.build(inner, scratch=staging, final_out=out, log=log, verbose=verbose)
        manifest.record_build(
            BuildFacts(liveness_bound_bytes=facts.liveness_bound_bytes, state_bytes=facts.state_bytes,
                       data_bytes=built.data_bytes, placement=facts.placement, team_ops=facts.team_ops,
                       firmware=built.firmware),
            arena_bytes=facts.arena_bytes, weight_bytes=facts.weight_bytes, code_bytes=built.code_bytes)
        from edgernn.tflite.quantize import calibration_sequences

        # the calibration steps, for a family that hands them on (GAP8: NNTool's aquant); made only if asked
        adapter.write_extras(inner, manifest,
                             calibration=lambda: calibration_sequences(calib, manifest.inputs[0]["shape"][1:]))
        manifest = folder.commit(inner, manifest)
    shutil.rmtree(staging, ignore_errors=True)
    messages = built.messages + adapter.summary(out, manifest, facts, built)
    return {"manifest": manifest.as_dict(), "firmware": str(out / "firmware"), "messages": messages}



