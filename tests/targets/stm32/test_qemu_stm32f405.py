"""The qemu_stm32f405 board end to end: models of the zoo converted in float32, int8 and int16, the firmware
built with arm-none-eabi-gcc for the Cortex-M4F (hard float, newlib-nano, the family's start-up and linker
script), run in qemu-system-arm's netduinoplus2 and validated over USART1. Every output and state byte equal
to the interpreter's (float32: within 1e-5 relative); the instructions a step are counted, the same at
every step."""

from __future__ import annotations

import pytest

from conftest import require_tools
from edgernn.targets.board import load_board
from edgernn.testing import zoo

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

BOARD = "qemu_stm32f405"
STEPS = 200


def gru16(seed: int = 0):
    keras = zoo._keras(seed)
    return keras.Sequential([keras.Input((None, 2)), keras.layers.GRU(16, return_sequences=True),
                             keras.layers.Dense(1)], name="gru16")


MODELS = {"lstm": zoo.functional_lstm, "gru": gru16, "cfc": zoo.cfc_default, "ltc": zoo.ltc_wired}
# the LTC, the slowest to convert, in int8 only (its int16 and float32 kernels are the ones the CfC and the
# host's tests run)
CASES = [(name, quant) for name in MODELS for quant in ("int8", "int16", "float32") if name != "ltc" or quant == "int8"]


@pytest.fixture(scope="module")
def tools():
    require_tools("arm-none-eabi-gcc", "qemu-system-arm")


def convert_for_board(folder, make, quant: str, mode: str = "step"):
    from edgernn.backend import generate_firmware
    from edgernn.pipeline.convert import convert

    model = make()
    path = folder / f"{model.name}.keras"
    model.save(path)
    out = folder / "out"
    features = zoo.features_of(model)
    manifest = convert(str(path), out, quant=quant, calib=zoo.trajectories(8, 60, features, 1), board=BOARD,
                       mode=mode)
    generate_firmware(out, load_board(BOARD))
    return out, manifest, features


def check_parity(out, features: int, quant: str) -> dict:
    from edgernn.validate.run import validate

    report = validate(out, data=zoo.trajectories(1, STEPS, features, 5))
    ref = report["reference"]
    assert report["steps"] == STEPS and report["board"] == BOARD
    assert ref["mismatches"] == 0 and ref["state_mismatches"] == 0, (
        f"{ref['mismatches']} output and {ref['state_mismatches']} state mismatches, "
        f"max {ref['max_abs_lsb']} LSB, first at {ref['first_mismatch']}")
    assert report["pass"]
    device = report["device"]
    # instructions (QEMU), counted by TIM2 under -icount shift=0; an integer step runs nearly the same code
    # every time, a float32 step's expf and tanhf take paths that depend on their arguments
    assert "instructions (QEMU)" in device["cycle_counter"] and device["cycles_per_step"] > 0
    if quant != "float32":
        assert device["cycles_per_step_max"] - device["cycles_per_step"] < 0.01 * device["cycles_per_step"]
    return report


@pytest.mark.parametrize("name,quant", CASES)
def test_zoo_model_validates_on_qemu_stm32f405(tools, tmp_path, name, quant):
    out, manifest, features = convert_for_board(tmp_path, MODELS[name], quant)
    assert manifest.quant == quant
    check_parity(out, features, quant)
    if quant == "int16":
        # the 16x8 FULLY_CONNECTED ran on the family's DSP routine (EDGERNN_FC_S16_ROWS4): SMLAD in its row functions
        # (the 32-bit one of a group whose sums are bounded to int32, the other's)
        rows = [f for f in ("fc_s16_row", "fc_s16_row_words") if f"<{f}>:" in function_code(out, None)]
        assert rows and all("\tsmlad\t" in function_code(out, f) for f in rows)


def function_code(out, name: str) -> str:
    """The disassembly of one function of the board's firmware ELF (``name`` None: of them all)."""
    import subprocess

    elf = out / "firmware" / "build" / BOARD / "firmware.elf"
    listing = subprocess.run(["arm-none-eabi-objdump", "-d", "--no-show-raw-insn", str(elf)], capture_output=True,
                             text=True, check=True).stdout
    if name is None:
        return listing
    start = listing.index(f"<{name}>:\n")
    return listing[start:listing.find("\n\n", start)]


def test_fused_lstm_validates_on_qemu_stm32f405(tools, tmp_path):
    def lstm64():
        keras = zoo._keras(0)
        return keras.Sequential([keras.Input((None, 2)), keras.layers.LSTM(64, return_sequences=True),
                                 keras.layers.Dense(1)], name="lstm64")

    out, manifest, features = convert_for_board(tmp_path, lstm64, "int8", mode="fused")
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in manifest.ops
    check_parity(out, features, "int8")


@pytest.fixture(scope="module")
def built_gru8(tools, tmp_path_factory):
    """A GRU(8) int8 firmware for the board, built as `edgernn build` builds it."""
    import contextlib
    import io

    from edgernn.pipeline.build import build_model

    folder = tmp_path_factory.mktemp("gru8")
    keras = zoo._keras(0)
    model = keras.Sequential([keras.Input((None, 2)), keras.layers.GRU(8, return_sequences=True),
                              keras.layers.Dense(1)], name="gru8")
    model.save(folder / "gru8.keras")
    with contextlib.redirect_stdout(io.StringIO()):
        build_model(str(folder / "gru8.keras"), folder / "out", board=BOARD, quant="int8",
                    calib=zoo.trajectories(4, 40, 2, 1))
    return folder / "out"


def test_validate_starts_qemu_with_usart1_on_a_loopback_tcp_port(built_gru8):
    from edgernn.validate.run import validate

    report = validate(built_gru8, data=zoo.trajectories(1, 20, 2, 5))
    assert report["pass"]
    assert report["link"]["port"].startswith("socket://127.0.0.1:")
    assert report["link"]["transport"] == "TCP to the simulated UART"
    assert report["device"]["count_unit"] == "instructions (QEMU)"      # what report.html and the table call them
    html = (built_gru8 / "report.html").read_text()
    assert "instructions (QEMU)/step" in html and "cycles/step" not in html


# (signal, exit status): every way a command is stopped ends QEMU with it
SIGNALS = [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)]


@pytest.mark.parametrize("name, code", SIGNALS)
def test_flash_serves_the_tcp_port_and_a_signal_ends_qemu(built_gru8, name, code):
    """`edgernn flash` prints socket://127.0.0.1:PORT; validate passes through it; a signal to flash ends QEMU and
    flash exits with 128 + the signal; validate against the port QEMU left says so in one line, exit 3."""
    import os
    import signal
    import subprocess
    import sys

    from conftest import processes_mentioning, wait_until

    cli = subprocess.Popen([sys.executable, "-m", "edgernn", "flash", str(built_gru8)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = ""
        while "port:" not in line:
            line = cli.stdout.readline()
            assert line, "flash ended before it printed the port: " + cli.stderr.read()
        url = line.split("port:")[1].split()[0]
        assert url.startswith("socket://127.0.0.1:")
        assert processes_mentioning(str(built_gru8)), "no QEMU is running"
        validated = subprocess.run([sys.executable, "-m", "edgernn", "validate", str(built_gru8), "--port", url,
                                    "--steps", "10"], capture_output=True, text=True, timeout=120)
        assert validated.returncode == 0, validated.stderr[-500:]
        cli.send_signal(getattr(signal, name))
        assert cli.wait(20) == code
        assert wait_until(lambda: not processes_mentioning(str(built_gru8))), "QEMU outlived edgernn flash"
        refused = subprocess.run([sys.executable, "-m", "edgernn", "validate", str(built_gru8), "--port", url,
                                  "--steps", "10"], capture_output=True, text=True, timeout=120)
        errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
        assert refused.returncode == 3 and len(errors) == 1 and "cannot open port" in errors[0], refused.stderr
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
