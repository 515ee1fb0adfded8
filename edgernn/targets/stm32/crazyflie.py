"""The ``crazyflie`` board's verbs: OUT/firmware/ is an out-of-tree app of Bitcraze's Crazyflie firmware (its
Makefile includes the firmware's tools/make/oot.mk), with the model stepping in the app task.

``edgernn build`` writes the app and compiles its model with the board's flags (those of qemu_stm32f405,
which the board file extends); where ``$CRAZYFLIE_BASE`` names a firmware checkout it also builds the whole cf2
image with the app in it, and reads from its linker map what the app takes of the flash and the RAM.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from edgernn import procs
from edgernn.errors import EdgeRNNError
from edgernn.targets.adapter import Adapter, Device, FirmwareBuild, Log
from edgernn.targets.board import Board, board_from_data
from edgernn.targets.compile import Part, compile_firmware, find_compiler

BASE_ENV = "CRAZYFLIE_BASE"
# what the firmware's make leaves in the app's build/, and where edgernn build puts it: OUT/cf2/
IMAGE_FILES = ("cf2.bin", "cf2.elf", "cf2.map")
IMAGE_DIR = "cf2"
# What the firmware's own size report (tools/make/size.py, Makefile's MEM_SIZE_*) counts against: the flash after
# the 16 KiB bootloader, and the SRAM.
FLASH_BYTES = 1008 * 1024
RAM_BYTES = 128 * 1024


def model_check_board(board: Board) -> Board:
    """The board with its compiler and flags as the portable-source check's: the model and the server compiled
    alone, with exactly the flags the app's Kbuild gives them."""
    toolchain = {**board.data.get("toolchain", {})}
    toolchain["check_cc"] = toolchain.get("cc")
    toolchain["check_cflags"] = list(toolchain.get("cflags", []))
    return board_from_data(board.path, {**board.data, "toolchain": toolchain})


@dataclass
class AppSizes:
    """From a cf2 image's linker map: the bytes the app's objects take (flash: code, constants and .data's
    initial values; RAM: .data and .bss), and the whole image's, against what the firmware has."""

    app_flash: int
    app_ram: int
    image_flash: int
    image_ram: int

    def lines(self) -> list[str]:
        return [f"app in the cf2 image (linker map): flash {self.app_flash} B, RAM {self.app_ram} B",
                f"whole image: flash {self.image_flash} of {FLASH_BYTES} B ({FLASH_BYTES - self.image_flash} free), "
                f"RAM {self.image_ram} of {RAM_BYTES} B ({RAM_BYTES - self.image_ram} free)"]


_OUTPUT = re.compile(r"^(\.\S+)\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)")
_SECTION = re.compile(r"^ (\.\S+|COMMON)(?:\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+(\S+))?$")
_CONTINUED = re.compile(r"^\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+(\S+)$")


def read_map(map_file: Path, app_object: Path) -> AppSizes:
    """The app's and the image's bytes from the GNU ld map of a cf2 image. The image's are its output
    sections, counted as the firmware's tools/make/size.py counts them (flash: .text, .data, .ccmdata; RAM:
    .data, .bss). The app's are the input sections of its folder's built-in.o (Kbuild joins the folder's
    objects into it): flash for those placed in flash and for .data's initial values, RAM for those in SRAM."""
    text = Path(map_file).read_text(errors="replace")
    start = text.find("Linker script and memory map")
    if start < 0:
        raise EdgeRNNError(f"{map_file} is not a GNU ld map (no 'Linker script and memory map')")
    owner_wanted = str(app_object)
    outputs: dict[str, int] = {}
    app_flash = app_ram = 0
    pending = None
    for line in text[start:].splitlines():
        out = _OUTPUT.match(line)
        if out:
            outputs[out.group(1)] = outputs.get(out.group(1), 0) + int(out.group(3), 16)
            pending = None
            continue
        m = _SECTION.match(line)
        if m and m.group(2) is None:
            pending = m.group(1)
            continue
        if m:
            name, address, size, owner = m.group(1), int(m.group(2), 16), int(m.group(3), 16), m.group(4)
        else:
            c = _CONTINUED.match(line) if pending else None
            name, pending = pending, None
            if c is None:
                continue
            address, size, owner = int(c.group(1), 16), int(c.group(2), 16), c.group(3)
        pending = None
        if owner != owner_wanted or size == 0:
            continue
        in_ram = 0x20000000 <= address < 0x20020000
        if 0x08000000 <= address < 0x08100000 or (in_ram and name.startswith(".data")):
            app_flash += size
        if in_ram:
            app_ram += size
    if ".text" not in outputs:
        raise EdgeRNNError(f"{map_file} places no .text: not a cf2 image's map")
    image_flash = outputs[".text"] + outputs.get(".data", 0) + outputs.get(".ccmdata", 0)
    image_ram = outputs.get(".bss", 0) + outputs.get(".data", 0)
    return AppSizes(app_flash, app_ram, image_flash, image_ram)


def make_command(app: Path, base: Path) -> list[str]:
    command = ["make", "-C", str(app), f"-j{min(os.cpu_count() or 1, 2)}", f"CRAZYFLIE_BASE={base}"]
    if shutil.which("ccache"):
        command.append("CC=ccache arm-none-eabi-gcc")
    return command


def firmware_checkout(base: Path) -> Path:
    if not (base / "tools" / "make" / "oot.mk").is_file():
        raise EdgeRNNError(f"${BASE_ENV}={base} is no crazyflie-firmware checkout (no tools/make/oot.mk)")
    return base


def build_image(app: Path, base: Path) -> AppSizes:
    """The whole cf2 image with the app (its Makefile, oot.mk) in app/build/, and what the app takes, from the
    map."""
    firmware_checkout(base)
    command = make_command(app, base)
    env = None
    if any(word.startswith("CC=ccache") for word in command):
        # the firmware's ~600 sources through ccache: paths under the app (its build/include/generated) made
        # relative, and the folder not hashed (the firmware builds with -g3), so a second app compiles little
        env = {**os.environ, "CCACHE_BASEDIR": str(app.resolve()), "CCACHE_NOHASHDIR": "1"}
    done = procs.run(command, env=env)
    if done.returncode != 0 or not (app / "build" / "cf2.bin").is_file():
        lines = ((done.stdout or "") + "\n" + (done.stderr or "")).strip().splitlines() or ["no output"]
        errors = [line for line in lines if "error" in line.lower()] or lines[-1:]
        raise EdgeRNNError(f"the Crazyflie app does not build: {errors[0].strip()} (command: {shlex.join(command)})")
    return read_map(app / "build" / "cf2.map", app.resolve() / "built-in.o")


class CrazyflieAdapter(Adapter):
    family = "crazyflie"

    def check_toolchain(self) -> None:
        """The compiler, and a $CRAZYFLIE_BASE that is a firmware checkout where it is set: refused before converting."""
        find_compiler(self.board)
        base = os.environ.get(BASE_ENV)
        if base:
            firmware_checkout(Path(base))

    def build(self, out_dir: Path, *, scratch: Path, final_out: Path, log: Log, verbose: bool) -> FirmwareBuild:
        app = Path(out_dir) / "firmware"
        log("compiling the model")
        checked = compile_firmware(app, model_check_board(self.board), part=Part.PORTABLE,
                                   build_dir=scratch / "model")
        messages = [f"model and server ({len(checked.objects)} files) compile warning-free with "
                    f"{checked.compiler} {' '.join(self.board.toolchain.cflags)}"]
        if verbose:
            messages += [f"compiled: {shlex.join(c)}" for c in checked.commands]
        base = os.environ.get(BASE_ENV)
        record = {"app": "firmware", "image": None, "built": False, "compilers": [checked.compiler]}
        if not base:
            by_hand = (f"not built into a cf2 image here (set ${BASE_ENV} to a crazyflie-firmware checkout); "
                       f"cd {final_out / 'firmware'} && make CRAZYFLIE_BASE=/path/to/crazyflie-firmware -j2")
            return FirmwareBuild(firmware=record, messages=messages, by_hand=by_hand)
        log("building the cf2 image")
        # in a copy: Kbuild's dependency files name the folder it built in, which is not where OUT ends up, so
        # OUT/firmware stays as generated (its own make starts clean) and the image goes to OUT/cf2/
        work = Path(scratch) / "cf2-app"
        shutil.copytree(app, work, ignore=shutil.ignore_patterns("build"))
        sizes = build_image(work, Path(base).resolve())
        image_dir = Path(out_dir) / IMAGE_DIR
        image_dir.mkdir(exist_ok=True)
        for name in IMAGE_FILES:
            shutil.copyfile(work / "build" / name, image_dir / name)
        record.update(built=True, image=f"{IMAGE_DIR}/cf2.bin", elf=f"{IMAGE_DIR}/cf2.elf", map=f"{IMAGE_DIR}/cf2.map",
                      app_flash_bytes=sizes.app_flash,
                      app_ram_bytes=sizes.app_ram, image_flash_bytes=sizes.image_flash,
                      image_ram_bytes=sizes.image_ram)
        return FirmwareBuild(firmware=record, code_bytes=sizes.app_flash, data_bytes=sizes.app_ram,
                             messages=messages + sizes.lines())

    def summary(self, out: Path, manifest, facts, build: FirmwareBuild) -> list[str]:
        lines = [f"Crazyflie app in {out / 'firmware'}: arena {manifest.arena_bytes} B, weights "
                 f"{manifest.weight_bytes} B; settings in "
                 f"{out / 'firmware' / 'edgernn_app_config.h'}"]
        if build.by_hand:
            lines.append(build.by_hand)
        else:
            lines.append(f"cf2 image: {out / IMAGE_DIR / 'cf2.bin'}; flash it with `cfloader flash "
                         f"{out / IMAGE_DIR / 'cf2.bin'} stm32-fw -w radio://0/80/2M` (docs/boards/stm32.md)")
        return lines

    def firmware_candidates(self, out_dir: Path) -> list[Path]:
        return [Path(out_dir) / IMAGE_DIR / "cf2.elf"]

    def flash(self, out_dir: Path, *, rebuild: bool = False, radio: str | None = None) -> Device:
        image = Path(out_dir) / IMAGE_DIR / "cf2.bin"
        raise EdgeRNNError(f"board {self.board.name} is flashed with cfloader over a Crazyradio: cfloader flash {image} "
                           "stm32-fw -w radio://0/80/2M (or make cload in OUT/firmware); to validate, build it with "
                           "EDGERNN_APP_SERVE 1 and pass the deck UART's port (docs/boards/stm32.md)")

    def code_bytes(self, elf: Path | None) -> int | None:
        return None

