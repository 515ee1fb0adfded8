"""Two witnesses of "instructions (QEMU)" on qemu_stm32f405 agree exactly: the firmware's own count of each
step (TIM2 under -icount shift=0, which validate reports) and the family's TCG plugin (built here with the
host's gcc from templates/targets/stm32/qemu_plugin/insn_count.c), which logs its count at each entry of
edgernn_hal_cycles: the server reads the counter just before and just after each step."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from conftest import require_tools
from edgernn.targets.board import load_board
from edgernn.testing import zoo

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

BOARD = "qemu_stm32f405"


def symbol_address(elf, name: str) -> int:
    table = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True).stdout
    address = next(int(line.split()[0], 16) for line in table.splitlines() if line.split()[-1] == name)
    return address & ~1      # a Thumb function's address, without its Thumb bit


def test_the_plugin_counts_what_the_firmware_reports(tmp_path):
    require_tools("arm-none-eabi-gcc", "qemu-system-arm", "gcc")
    from edgernn.backend import generate_firmware
    from edgernn.pipeline.convert import convert
    from edgernn.targets.device import adapter_for
    from edgernn.targets.stm32 import insn_plugin
    from edgernn.validate.run import validate

    keras = zoo._keras(0)
    model = keras.Sequential([keras.Input((None, 2)), keras.layers.GRU(8, return_sequences=True),
                              keras.layers.Dense(1)], name="gru8")
    model.save(tmp_path / "gru8.keras")
    out = tmp_path / "out"
    convert(str(tmp_path / "gru8.keras"), out, quant="int8", calib=zoo.trajectories(4, 40, 2, 1), board=BOARD)
    generate_firmware(out, load_board(BOARD))
    adapter = adapter_for(BOARD)
    elf = adapter.build_elf(out / "firmware").elf
    counter = symbol_address(elf, "edgernn_hal_cycles")
    log = tmp_path / "plugin.log"
    steps = 12
    with adapter.start_counted(elf, log, [counter]) as device:
        report = validate(out, port=device.url, data=zoo.trajectories(1, steps, 2, 5), save=tmp_path / "dev.npz")
        device.stop()
    assert report["pass"]
    reported = np.load(tmp_path / "dev.npz")["cycles"].ravel()
    counts = insn_plugin.read_log(log)
    assert {address for address, _ in counts.marks} == {counter} and len(counts.marks) == 2 * steps
    between = [stop - start for (_, start), (_, stop) in zip(counts.marks[::2], counts.marks[1::2])]
    assert reported.tolist() == between
    assert counts.total is not None and counts.total > counts.marks[-1][1]
