"""The STM32 family's kernel set (templates/targets/stm32/kernels/: the Cortex-M4's SXTB16 and SMLAD under the
reference kernels' int8 dot-product hooks) against the portable reference set, on qemu_stm32f405: both validate
with 0 mismatching bytes against LiteRT on the same model, the set's firmware holds the DSP instructions and
the reference's none, and the set runs fewer instructions a step."""

from __future__ import annotations

import subprocess

import pytest

from conftest import require_tools
from edgernn.testing import zoo

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
