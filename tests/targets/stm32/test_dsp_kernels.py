"""The STM32 family's kernel set (templates/targets/stm32/kernels/: the Cortex-M4's SXTB16 and SMLAD under the
reference kernels' int8 dot-product hooks) against the portable reference set, on qemu_stm32f405: both validate
with 0 mismatching bytes against LiteRT on the same model, the set's firmware holds the DSP instructions and
the reference's none, and the set runs fewer instructions a step."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import require_tools
from edgernn.testing import frames_zoo, zoo

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]


def lstm24(seed: int = 0):
    keras = zoo._keras(seed)
    return keras.Sequential([keras.Input((None, 6)), keras.layers.LSTM(24, return_sequences=True),
                             keras.layers.Dense(3)], name="lstm24")


def validated(tmp_path, board: str):
    from edgernn.backend import generate_firmware
    from edgernn.pipeline.convert import convert
    from edgernn.targets.board import load_board
    from edgernn.validate.run import validate

    model = lstm24()
    model.save(tmp_path / "lstm24.keras")
    out = tmp_path / "out"
    convert(str(tmp_path / "lstm24.keras"), out, quant="int8", calib=zoo.trajectories(4, 40, 6, 1), board=board)
    generate_firmware(out, load_board(board))
    report = validate(out, data=zoo.trajectories(1, 100, 6, 5))
    assert report["reference"]["mismatches"] == 0 and report["reference"]["state_mismatches"] == 0
    assert report["pass"]
    elf = next((out / "firmware" / "build").glob("*/firmware.elf"))
    disassembly = subprocess.run(["arm-none-eabi-objdump", "-d", str(elf)], capture_output=True, text=True,
                                 check=True).stdout
    return report, disassembly


def test_the_dsp_set_gives_the_reference_bytes_in_fewer_instructions(tmp_path):
    require_tools("arm-none-eabi-gcc", "qemu-system-arm")
    reference_board = tmp_path / "qemu_stm32f405_reference.toml"
    reference_board.write_text('extends = "qemu_stm32f405"\nname = "qemu_stm32f405_reference"\n'
                               'description = "qemu_stm32f405 with the portable reference kernels"\n'
                               '[toolchain]\nkernels = "reference"\n')
    (tmp_path / "dsp").mkdir()
    (tmp_path / "reference").mkdir()
    dsp, dsp_code = validated(tmp_path / "dsp", "qemu_stm32f405")
    ref, ref_code = validated(tmp_path / "reference", str(reference_board))
    assert "\tsmlad\t" in dsp_code and "\tsxtb16\t" in dsp_code
    assert "\tsmlad\t" not in ref_code
    assert dsp["device"]["cycles_per_step"] < ref["device"]["cycles_per_step"]


# FULLY_CONNECTED's external names, renamed in the reference set's copy so that both sets link into one check: every
# function the kernel source defines at file scope without `static` (read from the source, so that a new one, such as
# the group's range function that the team calls, is renamed too)
FC_SOURCE = Path(__file__).resolve().parents[3] / "templates" / "kernels" / "edgernn_fully_connected.c"
RENAMED = sorted(set(re.findall(r"^(?!static\b)[A-Za-z_][\w ]*?\b(edgernn_\w+)\(", FC_SOURCE.read_text(), re.M)))


def test_the_dsp_set_matches_the_reference_on_edge_values(tmp_path):
    """tests/c/stm32_kernels_check.c on the Cortex-M4 in QEMU: the family's 16x8 and 8-bit FULLY_CONNECTED and its
    SSAT clamps against the portable reference's, case by case on the edge values its table lists (extremes,
    rounding ties of both roundings, multipliers 2^30 and 2^31 - 1, shifts from -31 to +1, narrow clamps, every
    tail of rows and inputs, inputs across the 256-input chunks), and its int8 CONV_2D, DEPTHWISE_CONV_2D and
    MAX_POOL_2D on the geometries of its frame table, compiled with the board's compiler and flags."""
    require_tools("arm-none-eabi-gcc", "qemu-system-arm")
    import shutil

    from edgernn import procs
    from edgernn.backend import generate_firmware
    from edgernn.pipeline.convert import convert
    from edgernn.resources import templates_dir
    from edgernn.targets.board import load_board
    from edgernn.targets.stm32.adapter import linked_board

    keras = zoo._keras(0)
    model = keras.Sequential([keras.Input((None, 2)), keras.layers.GRU(4, return_sequences=True),
                              keras.layers.Dense(1)], name="gru4")
    model.save(tmp_path / "gru4.keras")
    out = tmp_path / "out"
    convert(str(tmp_path / "gru4.keras"), out, quant="int16", calib=zoo.trajectories(2, 20, 2, 1),
            board="qemu_stm32f405")
    board = load_board("qemu_stm32f405")
    generate_firmware(out, board)
    dsp = out / "firmware"
    ref = tmp_path / "reference"
    shutil.copytree(dsp, ref, ignore=shutil.ignore_patterns("build"))
    shutil.copyfile(templates_dir() / "kernels" / "edgernn_arch.h", ref / "edgernn_arch.h")
    assert "EDGERNN_FC_S16_ROWS4" in (dsp / "edgernn_arch.h").read_text()
    assert "EDGERNN_FC_S16_ROWS4" not in (ref / "edgernn_arch.h").read_text().split("*/", 1)[1]

    for folder in (dsp, ref):   # the frame kernels, which a GRU's folder does not hold
        shutil.copyfile(templates_dir() / "kernels" / "edgernn_conv.c", folder / "edgernn_conv.c")
    linked = linked_board(board, dsp)
    cc, cflags = linked.toolchain.cc, list(linked.toolchain.cflags)
    check_dir = Path(__file__).resolve().parents[2] / "c"
    objects = []
    for name, folder, source, defines in [
            ("probe_dsp", dsp, "stm32_kernel_probe.c", ["-DPROBE=dsp"]),
            ("probe_ref", ref, "stm32_kernel_probe.c", ["-DPROBE=ref", *(f"-D{n}=ref_{n[8:]}" for n in RENAMED)]),
            ("conv_dsp", dsp, "edgernn_conv.c", []),
            ("conv_m4", dsp, "edgernn_conv_m4.c", []),
            ("conv_ref", ref, "edgernn_conv.c", []),
            ("team", dsp, "edgernn_team.c", []),
            ("check", dsp, "stm32_kernels_check.c", []),
            ("startup", dsp, "startup.c", []),
            ("hal", dsp, "hal.c", [])]:
        obj = tmp_path / f"{name}.o"
        path = check_dir / source if source.startswith("stm32_") else folder / source
        command = [cc, *cflags, *defines, f"-I{folder}", "-c", str(path), "-o", str(obj)]
        done = procs.run(command)
        assert done.returncode == 0, f"{' '.join(command)}\n{done.stderr}"
        objects.append(str(obj))
    # the reference's CONV_2D object: every name it defines renamed ref_... (its own calls with them)
    conv_ref = tmp_path / "conv_ref.o"
    defined = subprocess.run(["arm-none-eabi-nm", "--defined-only", "-g", str(conv_ref)], capture_output=True,
                             text=True, check=True).stdout.split()[2::3]
    done = procs.run(["arm-none-eabi-objcopy", *(f"--redefine-sym={n}=ref_{n[8:]}" for n in defined
                                                 if n.startswith("edgernn_")), str(conv_ref)])
    assert done.returncode == 0, done.stderr
    elf = tmp_path / "check.elf"
    done = procs.run([cc, *cflags, *objects, *linked.toolchain.ldflags, "-o", str(elf)])
    assert done.returncode == 0, done.stderr
    symbols = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True).stdout
    assert " T ref_fully_connected_s16" in symbols and " T edgernn_fully_connected_s16" in symbols
    assert " T ref_conv_s8" in symbols and " T edgernn_m4_conv_s8" in symbols
    # the set's instructions are in the set's object, the DSP products not in the reference's (gcc finds SSAT
    # by itself for a clamp whose constant bounds it sees directly, as in the probe, but not through a fused
    # loop's constants, where the set's edgernn_clamp asks for it)
    code = {name: subprocess.run(["arm-none-eabi-objdump", "-d", str(tmp_path / f"{name}.o")], capture_output=True,
                                 text=True, check=True).stdout for name in ("probe_dsp", "probe_ref")}
    assert "\tssat\t" in code["probe_dsp"]
    for instruction in ("\tpkhbt\t", "\tpkhtb\t", "\tsmlad\t"):
        assert instruction in code["probe_dsp"] and instruction not in code["probe_ref"], instruction

    serial = tmp_path / "serial.txt"
    command = [a.format(elf=elf) for a in board.emulator.command] + ["-serial", f"file:{serial}"]
    done = procs.run(command, timeout=120)
    said = serial.read_text()
    assert "~~~STM32 KERNEL CHECK DONE~~~" in said, said[-500:]
    assert done.returncode == 0 and "mismatches 0" in said, said[-2000:]


def frame_strided(seed: int = 0):
    """A VALID 3x3 convolution over 2 channels into 8 clamped by ReLU6, a stride-2 SAME depthwise convolution over
    them, a stride-1 SAME 3x3 pool, then a GRU: strides, both paddings, a clamp narrower than int8."""
    keras = zoo._keras(seed)
    L = keras.layers
    TD = L.TimeDistributed
    return keras.Sequential([
        keras.Input((None, 7, 9, 2)),
        TD(L.Conv2D(8, 3, padding="valid", activation="relu6")),
        TD(L.DepthwiseConv2D(3, strides=2, padding="same", activation="relu6")),
        TD(L.MaxPooling2D(3, strides=1, padding="same")),
        TD(L.Flatten()),
        L.GRU(4, return_sequences=True),
    ], name="frame_strided")


# Frame models whose int8 convolutions and pools take the set's edgernn_conv_m4.c: a 3x3 stride-2 stem over one
# channel, a 3x3 depthwise convolution and a 2x2 pool over 4 (frame_cfc); stems over 3 channels at odd frame
# sizes, so that SAME padding falls on every border, a 3x3 stride-1 convolution over 4 channels and a 1x1 one of 2
# outputs (frame_res_gru); VALID and strided SAME padding, 8 channels, ReLU6's clamps (frame_strided)
FRAME_MODELS = {
    "frame_cfc": (lambda: frames_zoo.frame_cfc(12, 12, 1), (12, 12, 1),
                  ["edgernn_m4_conv_s8", "edgernn_m4_depthwise_conv_s8", "edgernn_m4_max_pool_s8"]),
    "frame_res_gru": (lambda: frames_zoo.frame_res_gru(9, 11, 3), (9, 11, 3), ["edgernn_m4_conv_s8"]),
    "frame_strided": (frame_strided, (7, 9, 2),
                      ["edgernn_m4_conv_s8", "edgernn_m4_depthwise_conv_s8", "edgernn_m4_max_pool_s8"]),
}


@pytest.mark.parametrize("name", sorted(FRAME_MODELS))
def test_the_dsp_set_convolutions_give_litert_bytes(tmp_path, name):
    require_tools("arm-none-eabi-gcc", "qemu-system-arm")
    from edgernn.backend import generate_firmware
    from edgernn.pipeline.convert import convert
    from edgernn.targets.board import load_board
    from edgernn.validate.run import validate

    make, frame, functions = FRAME_MODELS[name]
    make().save(tmp_path / f"{name}.keras")
    out = tmp_path / "out"
    convert(str(tmp_path / f"{name}.keras"), out, quant="int8", calib=frames_zoo.moving_blobs(3, 12, *frame, seed=1),
            board="qemu_stm32f405")
    generate_firmware(out, load_board("qemu_stm32f405"))
    report = validate(out, data=frames_zoo.moving_blobs(1, 12, *frame, seed=5))
    assert report["reference"]["mismatches"] == 0 and report["reference"]["state_mismatches"] == 0
    assert report["pass"]
    elf = next((out / "firmware" / "build").glob("*/firmware.elf"))
    symbols = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True).stdout
    for function in functions:
        assert f" T {function}\n" in symbols, function
