"""The GAP8 family on hardware (``ai_deck``): edgernn generates a GAP SDK (PMSIS/FreeRTOS) project, the
SDK's make builds it, and JTAG (``make flash``) or the Crazyradio (cfloader) puts it on the board.

Where the SDK is absent, ``edgernn build`` still writes the project and checks its portable sources
with the board's ``check_cc``; GAP's own compiler or Debian's riscv64 gcc (through edgernn's flag-mapping
wrapper, against a copy of the SDK with edgernn's overrides) builds it where the SDK is set up.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from edgernn import procs
from edgernn.errors import EdgeRNNError
from edgernn.targets.adapter import Adapter, Device, FirmwareBuild, Log, require_firmware_folder, stage_firmware
from edgernn.targets.board import Board
from edgernn.targets.compile import BuildResult, Part, compile_firmware, find_compiler

if TYPE_CHECKING:
    from edgernn.backend.firmware import FirmwareFacts

_GAP_COMPILERS = {"gap": "GAP's riscv32-unknown-elf-gcc",
                  "debian": "Debian's riscv64-unknown-elf-gcc through edgernn's GAP8 wrapper"}


class Gap8Adapter(Adapter):
    family = "gap8"

    def check_toolchain(self) -> None:
        board = self.board
        if not board.toolchain.optional or os.environ.get(board.gap_sdk.home_env):
            # before converting: an emulated GAP8 cannot run an unbuilt project, and a named SDK that is not
            # a supported release (older than 4.8.0) is refused before any work
            gap_sdk_config(board)

    app_kinds = ("camera",)

    def write_app(self, out_dir: Path, manifest, options, facts: FirmwareFacts) -> dict:
        """The deck application (edgernn.targets.gap8.app): camera, model, CPX out."""
        from edgernn.targets.gap8.app import write_camera_app

        return write_camera_app(out_dir, manifest, options, self.board, facts.placement)

    def write_extras(self, out_dir: Path, manifest, calibration=None) -> None:
        """GreenWaves' NNTool flow's files (OUT/nntool/), with calibration steps for its aquant; none for a
        model its script cannot describe (more than one fused LSTM), which the firmware still runs."""
        from edgernn.targets.gap8.nntool import NntoolUnsupported, write_nntool

        try:
            write_nntool(out_dir, manifest, calibration())
        except NntoolUnsupported as why:
            shutil.rmtree(Path(out_dir) / "nntool", ignore_errors=True)
            self.nntool_skipped = str(why)

    def build(self, out_dir: Path, *, scratch: Path, final_out: Path, log: Log, verbose: bool) -> FirmwareBuild:
        """Check the portable sources with the board's check compiler, then build with the GAP SDK when it
        is set up; else the record says how to build and flash by hand."""
        board, sdk = self.board, self.board.gap_sdk
        firmware_dir = Path(out_dir) / "firmware"
        messages = []
        cc = find_compiler(board, check=True, required=False)
        if cc is not None:
            checked = compile_firmware(firmware_dir, board, part=Part.PORTABLE, build_dir=scratch / "check").commands
            messages.append(f"portable sources ({len(checked)} files) compile warning-free with {cc} "
                            f"{' '.join(board.toolchain.check_cflags)}")
        built, by_hand = None, None
        try:
            gap_sdk_config(board)
        except EdgeRNNError as missing:
            if not board.toolchain.optional:
                raise   # an emulated GAP8 runs only what was built: the SDK is required
            reason = str(missing).split(":")[0]
            by_hand = f"not built here ({reason}); {manual_commands(board, final_out)}"
        if by_hand is None:
            log("building with the GAP SDK")
            built = build_gap_project(firmware_dir, board)
            if built.compiler == "gap":
                messages.append(GAP_COMPILER_UNTESTED)
            if verbose:
                messages.append(f"built: {shlex.join(built.command)}")
        if (Path(out_dir) / "firmware" / "app_config.h").is_file():
            from edgernn.targets.gap8.app import build_crazyflie_side

            messages += build_crazyflie_side(Path(out_dir))
        record = {"project": "firmware/Makefile", "built": built is not None,
                  "elf": f"firmware/{sdk.elf}" if built else None, "image": f"firmware/{sdk.image}",
                  "compilers": [_GAP_COMPILERS[built.compiler]] if built else []}
        return FirmwareBuild(firmware=record, code_bytes=built.code_bytes if built else None,
                             data_bytes=built.data_bytes if built else None, messages=messages, built=built,
                             by_hand=by_hand)

    def summary(self, out: Path, manifest, facts: FirmwareFacts, build: FirmwareBuild) -> list[str]:
        board = self.board
        lines = [f"GAP SDK project for {board.name} in {out / 'firmware'}: arena {manifest.arena_bytes} B, "
                 f"weights {manifest.weight_bytes} B; {len(facts.team_ops)} ops split across "
                 f"{board.parallel.workers} cluster cores"]
        placement = _placement_line(facts)
        if placement:
            lines.append(placement)
        if manifest.app:
            app, pre = manifest.app, manifest.app["preprocess"]
            lines.append(f"the camera application (docs/app.md): frames reduced by {pre['factor']}, the "
                         f"{pre['width']} x {pre['height']} window at ({pre['crop_x']}, {pre['crop_y']}), value = pixel x "
                         f"{pre['scale']:.6g} + {pre['offset']:.6g}; {app['frame_buffers']} frame buffer(s); outputs to "
                         f"{' and '.join(app['destinations'])}; the Crazyflie's side: {out / app['crazyflie_app']}")
        if getattr(self, "nntool_skipped", ""):
            lines.append(f"no NNTool flow: {self.nntool_skipped}")
        else:
            lines.append(f"for GreenWaves' NNTool flow: {out / 'nntool'}/nntool_script, host_loop.c (see docs/boards/ai_deck.md)")
        lines.append(self._next_line(out, manifest, build))
        return lines

    def _next_line(self, out: Path, manifest, build: FirmwareBuild) -> str:
        return build.by_hand or (
            f"built with the GAP SDK ({manifest.build.firmware['compilers'][0]}, code "
            f"{manifest.code_bytes} B) -> {out / manifest.build.firmware['image']}; "
            f"flash: edgernn flash {out} (JTAG) or edgernn flash {out} --radio {self.board.flash.radio_example}")

    def build_elf(self, firmware_dir, build_dir=None, optimize=None, extra_cflags=None, make_vars=None) -> BuildResult:
        """Stage the firmware folder as a GAP SDK project in build_dir and build it with the SDK's make
        (with make_vars); a bare model (model.c, model.h) gets the kernels, server and HAL around it."""
        board = self.board
        firmware_dir = Path(firmware_dir)
        require_firmware_folder(firmware_dir)
        build_dir = Path(build_dir) if build_dir else firmware_dir / "build" / board.name
        if optimize or extra_cflags:
            raise EdgeRNNError(f"board {board.name} is built by the GAP SDK's make: pass make_vars, not compiler flags")
        project = stage_firmware(firmware_dir, board, build_dir / "project")
        return build_gap_project(project, board, make_vars=make_vars, image=False)

    def firmware_candidates(self, out_dir: Path) -> list[Path]:
        fw = Path(out_dir) / "firmware"
        elf = self.board.gap_sdk.elf
        return [fw / elf, fw / "build" / self.board.name / "project" / elf]

    def flash(self, out_dir: Path, *, rebuild: bool = False, radio: str | None = None) -> Device:
        """Flash over JTAG (``make flash``) or, with ``radio``, with cfloader; the device returned has no
        port (the UART is the user's: pass it to validate)."""
        self._require_project(out_dir)
        command = flash_hardware(out_dir, self.board, radio)
        return Device(self.board, "", None, None, [], command)

    def _require_project(self, out_dir: Path) -> None:
        if not (Path(out_dir) / "firmware" / "Makefile").is_file():
            raise EdgeRNNError(f"{out_dir}/firmware has no GAP SDK project: build it with `edgernn build MODEL "
                               f"--board {self.board.name} -o {out_dir}`")


def _placement_line(facts: FirmwareFacts) -> str:
    placement = facts.placement
    if not placement:
        return ""
    items = ", ".join(f"{k} {v['bytes']} B in {v['memory']}" for k, v in placement["items"].items())
    used = {v["memory"] for v in placement["items"].values()}
    budgets = ", ".join(f"{m} {b} B" for m, b in placement["budgets"].items() if m in used)
    return f"memory: {items} (budgets: {budgets})"


# ---- the GAP SDK on this machine ----

def gap_sdk_config(board: Board) -> Path:
    """The SDK's board configuration script, from $GAP_SDK_HOME (else the SDK `edgernn setup gvsoc --fetch`
    fetched), checked to be a supported release; a one-line error saying how to get one."""
    from edgernn.targets.gap8.sdk import check_sdk, fetched_sdk

    sdk = board.gap_sdk
    home = os.environ.get(sdk.home_env)
    hint = board.toolchain.install_hint
    if not home:
        fetched = fetched_sdk()
        if fetched is None:
            raise EdgeRNNError(f"the GAP SDK is not set up (${sdk.home_env} is unset): {hint}, "
                               "or run `edgernn setup gvsoc --fetch`")
        home = str(fetched)
    config = Path(home).resolve() / sdk.config  # CI passes it relative to the working folder
    if not config.is_file():
        raise EdgeRNNError(f"${sdk.home_env}={home} has no {sdk.config}: {hint}")
    check_sdk(config.parent.parent)
    if shutil.which("make") is None:
        raise EdgeRNNError("the GAP SDK builds with make, which is not installed: apt-get install make")
    return config


@dataclass
class GapSdkSetup:
    """How this machine builds a GAP SDK project: which SDK tree's configuration is sourced, and which
    compiler answers to the SDK's ``riscv32-unknown-elf-gcc``."""

    board: Board
    home: Path                      # $GAP_SDK_HOME, never written
    sdk: Path                       # home itself (GAP's compiler) or edgernn's copy with overrides (Debian's)
    compiler: str                   # "gap" or "debian"
    path_prefix: list[Path] = field(default_factory=list)

    def script(self, cwd: Path, *commands: list[str]) -> list[str]:
        """``bash -c`` running the commands in cwd with the SDK's configuration sourced."""
        config = self.sdk / self.board.gap_sdk.config
        lines = [f"cd {shlex.quote(str(self.sdk))}", f"source {shlex.quote(str(config))} >/dev/null"]
        if self.path_prefix:
            lines.append("export PATH=" + ":".join(shlex.quote(str(p)) for p in self.path_prefix) + ':"$PATH"')
        lines.append(f"cd {shlex.quote(str(Path(cwd).resolve()))}")
        lines += [shlex.join(c) for c in commands]
        return ["bash", "-c", " && ".join(lines)]


# A build with GAP's own compiler says this once: no test here has compiled with it (its public prebuilt copy lacks
# cc1, and its patched sources could not be had), so its code paths are unproven (docs/boards/ai_deck.md).
GAP_COMPILER_UNTESTED = ("built with GAP's gcc (EDGERNN_GAP_COMPILER=gap): edgernn's tests do not cover that compiler; "
                         "Debian's riscv64-unknown-elf-gcc is the one they prove")


def gap_sdk_setup(board: Board) -> GapSdkSetup:
    """Debian's riscv64-unknown-elf-gcc through edgernn's wrapper, against a copy of the SDK with edgernn's overrides:
    the compiler edgernn's tests prove, the default wherever it is installed. GAP's own compiler (gcc 7.1) only with
    EDGERNN_GAP_COMPILER=gap, which the build's messages then flag (GAP_COMPILER_UNTESTED). Neither: one line says
    what to install."""
    from edgernn.targets.gap8.sdk import debian_toolchain, gap_compiler, prepare_sdk

    config = gap_sdk_config(board)
    home = config.parent.parent
    sdk = board.gap_sdk
    choice = os.environ.get("EDGERNN_GAP_COMPILER", "debian")
    if choice not in ("gap", "debian"):
        raise EdgeRNNError(f"EDGERNN_GAP_COMPILER={choice}: use debian (the default) or gap")
    if choice == "gap":
        if gap_compiler() is None:
            raise EdgeRNNError(f"EDGERNN_GAP_COMPILER=gap, but GAP's compiler ({sdk.gap_cc}) is not installed "
                               "(GAP_RISCV_GCC_TOOLCHAIN, /usr/lib/gap_riscv_toolchain or PATH)")
        return GapSdkSetup(board, home, home, "gap")
    if shutil.which(sdk.debian_cc) is None:
        found = gap_compiler()
        also = (f"; GAP's own compiler ({found}) builds it only with EDGERNN_GAP_COMPILER=gap, which edgernn's "
                "tests do not cover" if found else "")
        raise EdgeRNNError(f"GAP8 code builds with Debian's {sdk.debian_cc}, which is not installed: "
                           f"{sdk.debian_hint}{also}")
    return GapSdkSetup(board, home, prepare_sdk(home), "debian", [debian_toolchain()])


def gap_sdk_command(board: Board, firmware_dir: Path, make_args: list[str]) -> list[str]:
    """``make ...`` in firmware_dir after sourcing the SDK's board configuration, as one bash command."""
    return gap_sdk_setup(board).script(firmware_dir, make_args)


def manual_commands(board: Board, out_dir: Path) -> str:
    """The commands that build and flash a generated GAP SDK project by hand."""
    sdk, fl = board.gap_sdk, board.flash
    fw = Path(out_dir) / "firmware"
    return (f"build: source ${sdk.home_env}/{sdk.config} && make -C {fw} {' '.join(sdk.build[1:])}; "
            f"flash: edgernn flash {out_dir} (JTAG, {shlex.join(fl.jtag)}) or "
            f"edgernn flash {out_dir} --radio {fl.radio_example} (cfloader)")


def _first_error(proc: subprocess.CompletedProcess) -> str:
    """What the compiler or linker said (edgernn.targets.buildlog), else the output's last line."""
    from edgernn.targets.buildlog import summarize

    lines = ((proc.stderr or "") + "\n" + (proc.stdout or "")).strip().splitlines() or ["(no output)"]
    return summarize(lines) or lines[-1].strip()


def build_gap_project(firmware_dir: Path, board: Board, make_vars: dict[str, object] | None = None,
                      image: bool = True) -> BuildResult:
    """Build the GAP SDK project in firmware_dir with the SDK's own rules (its FreeRTOS, its GAP8.ld) to a
    linked ELF, and with ``image`` the flash image; fails unless the ELF has no undefined symbol.
    make_vars (``EDGERNN_CLUSTER_CORES=1``, ...) go on make's command line."""
    firmware_dir = Path(firmware_dir).resolve()
    setup = gap_sdk_setup(board)
    sdk = board.gap_sdk
    targets = [a for a in sdk.build[1:] if image or a != "image"]
    jobs = f"-j{max(1, min(os.cpu_count() or 1, 8))}"
    variables = [f"{k}={v}" for k, v in {**sdk.make_vars, **(make_vars or {})}.items()]
    if "clean" in targets:
        # clean first, alone: make runs its goals in parallel with -j
        targets.remove("clean")
        make = [["make", "clean"], ["make", jobs, *variables, *targets]]
    else:
        make = [["make", jobs, *variables, *targets]]
    command = setup.script(firmware_dir, *make)
    proc = procs.run(command)
    if proc.returncode != 0:
        raise EdgeRNNError(f"the GAP SDK build failed: {_first_error(proc)} (command: {shlex.join(command)})")
    elf = firmware_dir / sdk.elf
    if not elf.is_file():
        raise EdgeRNNError(f"the GAP SDK build left no ELF at {elf} (command: {shlex.join(command)})")
    tools = setup.script(firmware_dir, ["riscv32-unknown-elf-nm", "-u", str(elf)],
                         ["riscv32-unknown-elf-size", str(elf)])
    proc = procs.run(tools)
    if proc.returncode != 0:
        raise EdgeRNNError(f"reading {elf} failed: {_first_error(proc)}")
    lines = proc.stdout.splitlines()
    size_at = next((i for i, line in enumerate(lines) if line.split()[:2] == ["text", "data"]), len(lines))
    undefined = [line.split()[-1] for line in lines[:size_at] if line.strip()]
    if undefined:
        raise EdgeRNNError(f"{elf.name} links with {len(undefined)} undefined symbols ({', '.join(undefined[:8])}): "
                           "they would fault on the device")
    result = BuildResult(elf, command, compiler=setup.compiler, commands=[command],
                         image=firmware_dir / sdk.image if image else None)
    result.hardware_loops = len(check_hardware_loops(elf, firmware_dir, setup))
    if size_at + 1 < len(lines):
        text, data, bss = (int(v) for v in lines[size_at + 1].split()[:3])
        result.code_bytes, result.data_bytes = text, data + bss
    return result


def check_hardware_loops(elf: Path, firmware_dir: Path, setup) -> list:
    """The hardware loops of a GAP8 ELF, refused if one breaks a rule that silicon has and GVSOC does not
    check (edgernn.targets.gap8.hwloop_check): such a firmware would pass in the simulator and fail on the chip."""
    from edgernn.targets.gap8 import hwloop_check

    proc = procs.run(setup.script(firmware_dir, ["riscv32-unknown-elf-objdump", "-d", str(elf)]))
    if proc.returncode != 0:
        raise EdgeRNNError(f"disassembling {elf} failed: {_first_error(proc)}")
    loops, problems = hwloop_check.check(hwloop_check.parse_objdump(proc.stdout))
    if problems:
        raise EdgeRNNError(f"{elf.name} has {len(problems)} hardware-loop faults that GAP8 would not run as GVSOC "
                           "does: " + "; ".join(str(p) for p in problems[:4]))
    return loops


def image_path(out_dir: Path, board: Board) -> Path:
    return Path(out_dir) / "firmware" / board.gap_sdk.image


def flash_command(out_dir: Path, board: Board, radio: str | None = None) -> list[str]:
    """The command that puts OUT's firmware on a GAP SDK board: make flash (JTAG) or cfloader (radio)."""
    fl = board.flash
    if radio:
        tool = fl.radio[0]
        if shutil.which(tool) is None:
            raise EdgeRNNError(f"{tool} is not installed: {fl.radio_hint}")
        image = image_path(out_dir, board)
        if not image.is_file():
            raise EdgeRNNError(f"no GAP8 image at {image}: build it first ({manual_commands(board, out_dir)})")
        return [a.format(image=image, uri=radio) for a in fl.radio]
    return gap_sdk_command(board, Path(out_dir) / "firmware", list(fl.jtag))


def flash_hardware(out_dir: Path, board: Board, radio: str | None = None) -> list[str]:
    command = flash_command(out_dir, board, radio)
    env = dict(os.environ)
    if not radio and board.flash.jtag_cable:
        env.setdefault("GAPY_OPENOCD_CABLE", board.flash.jtag_cable)
    proc = procs.run(command, env=env, stdout=None, stderr=None)
    if proc.returncode != 0:
        raise EdgeRNNError(f"flashing {board.name} failed (exit status {proc.returncode}; command: {shlex.join(command)})")
    return command
