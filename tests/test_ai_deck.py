"""The ai_deck board: the GAP SDK project edgernn writes, its memory budget, its flash and validate paths.

There is no GAP SDK and no AI-deck here. What needs them is checked up to that boundary: the portable
sources compile warning-free for RV32IMC, the PMSIS-facing sources compile against test declarations
(tests/c/pmsis_decls/pmsis.h, copied from the SDK's signatures, never shipped), and every path that
would need the SDK, cfloader or the board fails with a one-line error that says how to get it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import zoo
from conftest import require_tools
from edgernn.errors import EdgeRNNError, LinkError

TESTS = Path(__file__).resolve().parent
PMSIS_DECLS = TESTS / "c" / "pmsis_decls"
RV32 = ["riscv64-unknown-elf-gcc", "-march=rv32imc", "-mabi=ilp32", "--specs=picolibc.specs"]
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]
# The PMSIS names design.md allows the ai_deck HAL to use (GAP SDK pmsis_api)
ALLOWED_PMSIS = {
    "pi_uart_conf_init", "pi_open_from_conf", "pi_uart_open", "pi_uart_write", "pi_uart_read",
    "pi_uart_conf", "pi_device", "pi_cluster_conf_init", "pi_cluster_open", "pi_cluster_send_task_to_cl",
    "pi_cluster_task", "pi_cluster_conf", "pi_cl_team_fork", "pi_cl_team_barrier", "pi_core_id",
    "pi_l2_malloc", "pi_cl_l1_malloc", "pi_perf_conf", "pi_perf_reset", "pi_perf_start", "pi_perf_read",
    "pmsis_kickoff", "pmsis_exit",
}
HAL_FILES = ("hal.c", "main.c", "edgernn_team.c")

pytestmark = pytest.mark.slow


def small_lstm(seed: int = 0):
    keras = zoo._keras(seed)
    L = keras.layers
    return keras.Sequential([keras.Input((None, 4)), L.LSTM(24, return_sequences=True), L.Dense(3)],
                            name="deck_lstm")


def _deck_build(tmp_path_factory, mode: str):
    from edgernn.building import build_firmware

    out = tmp_path_factory.mktemp(f"deck_{mode}") / "out"
    warnings = []
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(io.StringIO()):
        mp.delenv("GAP_SDK_HOME", raising=False)
        result = build_firmware(small_lstm(), out, board="ai_deck", quant="int8", mode=mode,
                                warn=warnings.append)
    return out, result, warnings


@pytest.fixture(scope="module")
def deck_build(tmp_path_factory):
    """An int8 LSTM step model built for ai_deck where no GAP SDK is set up."""
    return _deck_build(tmp_path_factory, "step")


@pytest.fixture(scope="module")
def deck_build_fused(tmp_path_factory):
    """The same LSTM as TFLite's fused UNIDIRECTIONAL_SEQUENCE_LSTM."""
    return _deck_build(tmp_path_factory, "fused")


def test_boards_lists_ai_deck():
    proc = subprocess.run([sys.executable, "-m", "edgernn", "boards", "--json"], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(TESTS.parent)))
    assert proc.returncode == 0, proc.stderr
    deck = json.loads(proc.stdout)["ai_deck"]
    assert deck["cpu"]["fpu"] is False and deck["cpu"]["cluster_cores"] == 8
    sizes = {m["name"]: m["size"] for m in deck["memory"]}
    assert sizes == {"l1": 64 * 1024, "l2": 512 * 1024, "l3": 8 * 1024 * 1024}
    assert deck["serial"]["baud"] == 115200 and deck["placement"]["weights_section"] == ".l2_data"
    table = subprocess.run([sys.executable, "-m", "edgernn", "boards"], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=str(TESTS.parent), COLUMNS="200"))
    assert table.returncode == 0 and "ai_deck" in table.stdout


def test_project_files(deck_build):
    out, result, _ = deck_build
    fw = out / "firmware"
    make = (fw / "Makefile").read_text()
    sources = sorted(p.name for p in fw.glob("*.c"))
    srcs = re.search(r"^APP_SRCS \+= (.*)$", make, re.M).group(1).split()
    assert sorted(srcs) == sources
    for line in ("io = uart", "PMSIS_OS ?= freertos", "APP = edgernn", "APP_INC += .",
                 'APP_CFLAGS += -DEDGERNN_BOARD_NAME=\\"ai_deck\\"', "include $(RULES_DIR)/pmsis_rules.mk"):
        assert line in make
    # the int8 dot products take the Xpulp SIMD path on the device
    assert re.search(r"^APP_CFLAGS \+= .*-DEDGERNN_XPULP=1\b", make, re.M)
    assert "pmsis_kickoff" in (fw / "main.c").read_text()
    hal = (fw / "hal.c").read_text()
    conf_init = hal.index("pi_uart_conf_init(&uart_conf)")
    assert conf_init < hal.index("uart_conf.enable_tx = 1") < hal.index("pi_uart_open")
    assert conf_init < hal.index("uart_conf.enable_rx = 1") < hal.index("pi_uart_open")
    assert "EDGERNN_UART_BAUD 115200" in hal and "PI_PERF_CYCLES" in hal and "pmsis_exit" in hal
    # the same server and protocol as the emulated boards, unchanged
    templates = TESTS.parent / "templates" / "firmware"
    for name in ("server.c", "protocol.c", "protocol.h", "server.h", "hal.h"):
        assert (fw / name).read_text() == (templates / name).read_text()
    # weights in L2 through the section attribute; arena in L1, from the cluster's allocator
    assert '__attribute__((section(".l2_data")))' in (fw / "model.h").read_text()
    model_c = (fw / "model.c").read_text()
    assert "edgernn_team_fast_alloc(" in model_c and "edgernn_team_fully_connected_s8(" in model_c
    assert "pi_cl_l1_malloc(&cluster_dev" in (fw / "edgernn_team.c").read_text()
    placement = result["manifest"]["placement"]["items"]
    assert placement["arena"]["memory"] == "l1" and placement["weights"]["memory"] == "l2"
    assert placement["state"]["memory"] == "l2"
    # only the allowed PMSIS names
    used = set()
    for name in HAL_FILES:
        used |= set(re.findall(r"\b(pi_\w+|pmsis_\w+)", (fw / name).read_text()))
    used -= {"pi_perf_event_e"}
    assert used <= ALLOWED_PMSIS, used - ALLOWED_PMSIS


def test_build_says_how_to_build_and_flash(deck_build):
    out, result, _ = deck_build
    lines = [m for m in result["messages"] if "not built here" in m]
    assert len(lines) == 1 and "\n" not in lines[0]
    line = lines[0]
    assert "GAP_SDK_HOME" in line
    assert f"source $GAP_SDK_HOME/configs/ai_deck.sh && make -C {out / 'firmware'} clean all" in line
    assert f"edgernn flash {out}" in line and "--radio radio://" in line
    assert result["manifest"]["firmware"]["built"] is False
    nntool = (out / "nntool" / "nntool_script").read_text()
    assert "UNTESTED" in nntool and "open ../step.tflite -q" in nntool and "gen " in nntool
    assert "UNTESTED" in (out / "nntool" / "host_loop.c").read_text()


@pytest.mark.toolchain
@pytest.mark.parametrize("mode", ["step", "fused"])
def test_portable_sources_compile_warning_free_for_rv32imc(request, mode, tmp_path):
    require_tools("riscv64-unknown-elf-gcc")
    out, result, _ = request.getfixturevalue("deck_build" if mode == "step" else "deck_build_fused")
    assert result["manifest"]["mode"] == mode
    fw = out / "firmware"
    portable = [p for p in sorted(fw.glob("*.c")) if p.name not in HAL_FILES]
    assert {"server.c", "protocol.c", "model.c", "weights.c", "edgernn_team_kernels.c"} <= {p.name for p in portable}
    if mode == "fused":
        # the LSTM's 24 units (96 gate rows) are forked across the cluster cores
        assert "edgernn_lstm.c" in {p.name for p in portable} and "edgernn_team_lstm_s8(" in (fw / "model.c").read_text()
        make = (fw / "Makefile").read_text()
        assert "edgernn_lstm.c" in re.search(r"^APP_SRCS \+= (.*)$", make, re.M).group(1).split()
    for src in portable:
        cmd = [*RV32, *STRICT, "-O2", "-DEDGERNN_LINK_MAX_FRAME=4096", '-DEDGERNN_BOARD_NAME="ai_deck"',
               f"-I{fw}", "-c", str(src), "-o", str(tmp_path / (src.stem + ".o"))]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0 and not proc.stderr.strip(), f"{src.name}: {proc.stderr}"
    # The PMSIS-facing files, in the SDK's GNU C dialect, against the test declarations
    for name in HAL_FILES:
        cmd = [*RV32, "-std=gnu99", "-Wall", "-Wextra", "-Werror", "-O2", f"-I{PMSIS_DECLS}", f"-I{fw}",
               "-DEDGERNN_LINK_MAX_FRAME=4096", "-c", str(fw / name), "-o", str(tmp_path / f"{name}.o")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0 and not proc.stderr.strip(), f"{name}: {proc.stderr}"
    assert not any(PMSIS_DECLS.name in str(p) for p in fw.rglob("*"))


def test_float32_builds_with_a_warning(tmp_path):
    from edgernn.building import _check_quant
    from edgernn.boards import load_board

    said = []
    _check_quant(load_board("ai_deck"), "float32", said.append)
    assert len(said) == 1 and "no FPU" in said[0] and "soft-float" in said[0]
    said.clear()
    _check_quant(load_board("ai_deck"), "int8", said.append)
    assert said == []


def test_model_too_big_for_l2_is_refused(tmp_path):
    keras = zoo._keras(0)
    wide = keras.Sequential([keras.Input((None, 3)), keras.layers.LSTM(320), keras.layers.Dense(2)], name="wide")
    model = tmp_path / "wide.keras"
    wide.save(model)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "edgernn", "build", str(model), "--board", "ai_deck", "-o", str(out)],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(TESTS.parent)))
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    assert len(errors) == 1
    assert re.match(r"error: the model does not fit board ai_deck: over budget in l2 by \d+ B", lines[errors[0]])
    table = "\n".join(lines[errors[0] + 1:])
    assert re.search(r"weights\s+l2\s+\d+", table) and re.search(r"l2\s+\d+\s+327680\s+\d+", table)
    assert "overflow" in table
    assert not out.exists() and not list(tmp_path.glob(".out*"))


def test_flash_without_the_tools_says_how_to_get_them(deck_build, monkeypatch, tmp_path):
    from edgernn import devices

    out, _, _ = deck_build
    monkeypatch.delenv("GAP_SDK_HOME", raising=False)
    with pytest.raises(EdgeRNNError, match=r"GAP_SDK_HOME is unset.*source \$GAP_SDK_HOME/configs/ai_deck.sh"):
        devices.flash(out)
    monkeypatch.setenv("GAP_SDK_HOME", str(tmp_path))
    with pytest.raises(EdgeRNNError, match=r"has no configs/ai_deck.sh"):
        devices.flash(out)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EdgeRNNError, match=r"cfloader is not installed: install cfloader with `pip install cfclient`"):
        devices.flash(out, radio="radio://0/80/2M/E7E7E7E7E7")


def test_flash_cli_is_one_line(deck_build):
    out, _, _ = deck_build
    env = {k: v for k, v in os.environ.items() if k != "GAP_SDK_HOME"}
    proc = subprocess.run([sys.executable, "-m", "edgernn", "flash", str(out)], capture_output=True, text=True,
                          env=dict(env, PYTHONPATH=str(TESTS.parent)))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "GAP SDK" in proc.stderr


def test_validate_never_starts_an_emulator_for_ai_deck(deck_build):
    from edgernn.validation import validate

    out, _, _ = deck_build
    with pytest.raises(EdgeRNNError, match=r"board ai_deck is hardware: .*--port /dev/ttyUSB0"):
        validate(out, steps=3, show=False)
    with pytest.raises(LinkError, match="cannot open port"):
        validate(out, port=str(out / "no-such-tty"), steps=3, show=False)


def test_validate_on_a_port_that_does_not_answer(deck_build):
    from edgernn.validation import validate

    out, _, _ = deck_build
    master, slave = os.openpty()
    try:
        with pytest.raises(LinkError, match=r"gave no valid answer to HELLO .*no answer within"):
            validate(out, port=os.ttyname(slave), steps=3, show=False, timeout=0.1)
    finally:
        os.close(master)
        os.close(slave)
    assert not (out / "report.json").exists()


def test_arena_goes_to_l2_when_l1_is_too_small(deck_build, tmp_path):
    import copy
    import shutil

    from edgernn.backend import generate_firmware
    from edgernn.backend.placement import place
    from edgernn.boards import Board, load_board

    deck = load_board("ai_deck")
    small = place(deck, weight_bytes=1000, state_bytes=64, arena_bytes=2048)
    assert small.items["arena"][0] == "l1" and small.arena_in_team_memory
    large = place(deck, weight_bytes=1000, state_bytes=64, arena_bytes=60000)
    assert large.items["arena"][0] == "l2" and not large.arena_in_team_memory and large.notes

    out, _, _ = deck_build
    folder = tmp_path / "out"
    shutil.copytree(out, folder)
    data = copy.deepcopy(deck.data)
    for mem in data["memory"]:
        if mem["name"] == "l1":
            mem["reserved"] = mem["size"] - 8      # no room left in L1
    facts = generate_firmware(folder, Board(deck.name, deck.description, deck.path, data))
    assert facts["placement"]["items"]["arena"]["memory"] == "l2"
    model_c = (folder / "firmware" / "model.c").read_text()
    assert "static int64_t edgernn_arena[" in model_c and "edgernn_team_fast_alloc" not in model_c


def test_nntool_files_for_a_fused_float_model(tmp_path):
    from edgernn.nntool import write_nntool

    manifest = {"model_sha256": "0" * 64, "quant": "float32", "mode": "fused", "ops": ["UNIDIRECTIONAL_SEQUENCE_LSTM"],
                "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 3]}],
                "outputs": [{"name": "y", "dtype": "float32", "shape": [1, 2]}],
                "states": [{"name": "lstm.h", "dtype": "float32", "shape": [1, 8], "zero_point": None},
                           {"name": "lstm.c", "dtype": "float32", "shape": [1, 8], "zero_point": None}]}
    assert write_nntool(tmp_path, manifest) == ["nntool_script", "host_loop.c"]
    script = (tmp_path / "nntool" / "nntool_script").read_text()
    assert "nodeoption LSTM_NODE RNN_STATES_AS_INPUTS 1" in script and "aquant" in script
    loop = (tmp_path / "nntool" / "host_loop.c").read_text()
    assert "edgernnCNN(x_step, state0[current], state1[current], y_step, state0[next], state1[next])" in loop
