"""The ai_deck board: the GAP SDK project edgernn writes, its build with the GAP SDK, its memory budget,
its flash and validate paths.

The project is built against the real GAP SDK ($GAP_SDK_HOME; CI sets ../shared/gap_sdk): with GAP's
own compiler where it is installed, else with Debian's riscv64-unknown-elf-gcc through edgernn's
wrapper (templates/targets/gap8/sdk/). Those tests skip without the SDK, and fail instead under
EDGERNN_REQUIRE_TOOLCHAINS=1. What needs an AI-deck (flashing, the UART link on the chip) fails here
with a one-line error that says how to get it; the firmware's run in GVSOC is the gvsoc_gap8 board's.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgernn.testing import zoo
from conftest import TOY_MODEL, gap_sdk_params, require_gap_sdk, require_gap_sdk_at, require_tools
from edgernn.errors import EdgeRNNError, LinkError
from edgernn.targets.gap8 import hwloop_check

TESTS = Path(__file__).resolve().parents[2]
TEMPLATES = TESTS.parent / "templates"
RV32 = ["riscv64-unknown-elf-gcc", "-march=rv32imc", "-mabi=ilp32", "--specs=picolibc.specs"]
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]
# The PMSIS names the ai_deck HAL uses (GAP SDK pmsis_api), and the one GAP8 FreeRTOS HAL call
# (hal_uart_tx_status_get, the UART's TX-busy bit, to drain the line before pmsis_exit)
ALLOWED_PMSIS = {
    "pi_uart_conf_init", "pi_open_from_conf", "pi_uart_open", "pi_uart_write", "pi_uart_read_async",
    "pi_uart_ioctl", "pi_uart_conf", "pi_device", "pi_task_t", "pi_task_block", "pi_task_wait_on",
    "pi_cluster_conf_init", "pi_cluster_open", "pi_cluster_send_task_to_cl", "pi_cluster_task", "pi_cluster_conf",
    # the one cluster task of the whole run (EDGERNN_CLUSTER_PERSISTENT=1), sent once without a wait
    "pi_cluster_send_task_to_cl_async",
    "pi_cl_team_fork", "pi_cl_team_barrier", "pi_core_id", "pi_cl_l1_malloc", "pi_l2_malloc", "pi_perf_conf",
    "pi_perf_reset",
    "pi_perf_start", "pi_perf_read", "pi_freq_set", "pi_freq_get", "pmsis_kickoff", "pmsis_exit",
    # the board's set-up before the FC clock is raised, as Bitcraze's examples do it (bsp/bsp.h, the PMU driver)
    "pi_bsp_init", "__pi_pmu_voltage_set",
    # EDGERNN_CYCLES_FC=1 (the default): the FreeRTOS tick timer's count (the GAP8 FreeRTOS PMSIS timer driver)
    "pi_timer_value_read",
    # the WiFi link (link_cpx.c, EDGERNN_LINK_WIFI=1): SPI1 and two GPIOs to the ESP32, as Bitcraze's lib/cpx uses them
    "pi_spi_conf", "pi_spi_conf_init", "pi_spi_open", "pi_spi_transfer", "pi_gpio_conf", "pi_gpio_conf_init",
    "pi_gpio_open", "pi_gpio_pin_configure", "pi_gpio_pin_write", "pi_gpio_pin_read", "pi_gpio_pin_notif_configure",
    "pi_gpio_callback_init", "pi_gpio_callback_add", "pi_gpio_callback_t", "pi_pad_set_function",
}
HAL_FILES = ("hal.c", "main.c", "edgernn_team.c", "edgernn_libm.c", "link_cpx.c")
ELF = "BUILD/GAP8_V2/GCC_RISCV_FREERTOS/edgernn"

pytestmark = pytest.mark.slow


def small_lstm(seed: int = 0):
    return zoo.lstm_dense(24, 4, 3, "deck_lstm", seed)


def _deck_build(tmp_path_factory, mode: str):
    from edgernn.pipeline.build import build_model

    out = tmp_path_factory.mktemp(f"deck_{mode}") / "out"
    warnings = []
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(io.StringIO()):
        mp.delenv("GAP_SDK_HOME", raising=False)
        result = build_model(small_lstm(), out, board="ai_deck", quant="int8", mode=mode,
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


def test_fused_loops_read_constant_operands_from_the_fast_copy(tmp_path):
    """An LTC's fused loops take constant tensors as operands (the cell's per-unit parameters): with the weights
    copied into L1 they read those from the copy too, not from their const arrays in L2 (about 10 cycles a load
    in GVSOC)."""
    from edgernn.pipeline.build import build_model

    out = tmp_path / "out"
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(io.StringIO()):
        mp.delenv("GAP_SDK_HOME", raising=False)
        build_model(zoo.ltc_wired(), out, board="ai_deck", quant="int8", mode="step",
                    calib=zoo.trajectories(4, 24, 2, 1), warn=lambda _: None)
    model_c = (out / "firmware" / "model.c").read_text()
    loops = re.findall(r"static void edgernn_step_fused\d+\(.*?\n}\n", model_c, re.S)
    assert loops
    # the loops do read constant tensors (edgernn_step_c<N>), through the copy
    assert any(re.search(r"EDGERNN_FAST_WEIGHT\(int8_t, edgernn_step_c\d+\)", loop) for loop in loops)
    for loop in loops:
        direct = re.sub(r"EDGERNN_FAST_WEIGHT\(\w+, \w+\)", "", loop)
        assert not re.search(r"\bedgernn_step_(c\d+|op\d+_\w+|fused\d+_\w+)", direct), loop


def test_boards_lists_ai_deck():
    proc = subprocess.run([sys.executable, "-m", "edgernn", "boards", "--json"], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(TESTS.parent)))
    assert proc.returncode == 0, proc.stderr
    deck = json.loads(proc.stdout)["ai_deck"]
    assert deck["cpu"]["fpu"] is False and deck["cpu"]["cluster_cores"] == 8
    sizes = {m["name"]: m["size"] for m in deck["memory"]}
    assert sizes == {"l1": 64 * 1024, "l2": 512 * 1024, "l3": 8 * 1024 * 1024}
    assert deck["serial"]["baud"] == 115200 and deck["placement"]["weights_attribute"] == "PI_L2"
    assert deck["cpu"]["fc_hz"] == 250_000_000 and deck["cpu"]["cluster_hz"] == 175_000_000
    table = subprocess.run([sys.executable, "-m", "edgernn", "boards"], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=str(TESTS.parent), COLUMNS="200"))
    assert table.returncode == 0 and "ai_deck" in table.stdout


def test_project_files(deck_build):
    out, result, _ = deck_build
    fw = out / "firmware"
    make = (fw / "Makefile").read_text()
    sources = sorted(p.name for p in fw.glob("*.c"))
    srcs = re.search(r"^APP_SRCS \+= (.*)$", make, re.M).group(1).split()
    assert sorted(srcs) == sources and "edgernn_libm.c" in srcs
    for line in ("io = disable", "PMSIS_OS ?= freertos", "APP = edgernn", "APP_INC += .",
                 'APP_CFLAGS += -DEDGERNN_BOARD_NAME=\\"ai_deck\\"', "include $(RULES_DIR)/pmsis_rules.mk",
                 # the board file's clocks, cores, Xpulp and baud rate, each changeable on make's command line
                 "EDGERNN_FC_HZ ?= 250000000", "EDGERNN_CLUSTER_HZ ?= 175000000", "EDGERNN_CLUSTER_CORES ?= 8",
                 "EDGERNN_XPULP ?= 1", "EDGERNN_UART_BAUD ?= 115200", "EDGERNN_CYCLES_FC ?= 1",
                 "EDGERNN_CLUSTER_PERSISTENT ?= 1", "APP_CFLAGS += -DEDGERNN_CLUSTER_PERSISTENT=$(EDGERNN_CLUSTER_PERSISTENT)",
                 "APP_CFLAGS += -DEDGERNN_CLUSTER_CORES=$(EDGERNN_CLUSTER_CORES) -DEDGERNN_XPULP=$(EDGERNN_XPULP)",
                 # the hand-written Xpulp dot products, assembled by the SDK's rules
                 "APP_ASM_SRCS += edgernn_dot_xpulp.S", "EDGERNN_DOT_ASM ?= 1",
                 "APP_CFLAGS += -DEDGERNN_DOT_ASM=$(EDGERNN_DOT_ASM)"):
        assert line in make, line
    for name in ("edgernn_dot_xpulp.S", "edgernn_xpulp_asm.h"):
        assert (fw / name).read_text() == (TEMPLATES / "targets" / "gap8" / "kernels" / name).read_text()
    assert "pmsis_kickoff" in (fw / "main.c").read_text()
    hal = (fw / "hal.c").read_text()
    assert "EDGERNN_UART_BAUD 115200" in hal and "pmsis_exit" in hal
    # the same server and protocol as the emulated boards, unchanged but for the frame one step needs
    templates = TEMPLATES / "firmware"
    for name in ("server.c", "protocol.c", "server.h", "hal.h"):
        assert (fw / name).read_text() == (templates / name).read_text()
    protocol = (fw / "protocol.h").read_text()
    for direction in ("RX", "TX"):
        model_frame = re.search(rf"^#define EDGERNN_LINK_MODEL_{direction}_FRAME (\d+)$", protocol, re.M)
        assert model_frame and int(model_frame.group(1)) > 0
        protocol = protocol.replace(model_frame.group(0), f"#define EDGERNN_LINK_MODEL_{direction}_FRAME 0")
    assert protocol == (templates / "protocol.h").read_text()
    # weights in L2 through PMSIS's own placement macro, copied into L1 at init; arena in L1, from the
    # cluster's allocator
    weights = (fw / "weights.c").read_text()
    assert '#include "pmsis.h"\n#define EDGERNN_WEIGHTS_SECTION PI_L2' in weights
    assert ".l2_data" not in (fw / "model.h").read_text() + weights
    model_c = (fw / "model.c").read_text()
    # the team runs the FULLY_CONNECTEDs: as team kernels, or in a cell's split by units (edgernn/backend/cells.py)
    assert "edgernn_team_fast_alloc(" in model_c
    assert "edgernn_team_fully_connected_s8(" in model_c or "edgernn_fully_connected_gates_s8(" in model_c
    assert "memmove" not in model_c and "edgernn_move_bytes(" in model_c
    assert "pi_cl_l1_malloc(&cluster_dev" in (fw / "edgernn_team.c").read_text()
    placement = result["manifest"]["placement"]["items"]
    assert placement["arena"]["memory"] == "l1" and placement["weights"]["memory"] == "l1"
    assert placement["weights_src"]["memory"] == "l2"
    assert placement["state"]["memory"] == "l1" and "static int64_t *edgernn_state;" in model_c
    # only the allowed PMSIS names
    used = set()
    for name in HAL_FILES:
        code = re.sub(r"/\*.*?\*/|//[^\n]*", "", (fw / name).read_text(), flags=re.S)
        used |= set(re.findall(r"\b(pi_\w+|pmsis_\w+)", code))
    used -= {"pi_perf_event_e"}
    assert used <= ALLOWED_PMSIS, used - ALLOWED_PMSIS
    # no C library function that the GAP SDK's FreeRTOS libc lacks
    for src in fw.glob("*.c"):
        assert not re.search(r"\bmemmove\s*\(", src.read_text()), src.name


def _body(source: str, function: str) -> str:
    """The text of a C function's body (from its opening brace to the matching one)."""
    start = source.index("{", re.search(rf"^\w[\w\s\*]*\b{function}\(", source, re.M).end())
    depth = 0
    for i in range(start, len(source)):
        depth += {"{": 1, "}": -1}.get(source[i], 0)
        if depth == 0:
            return source[start:i + 1]
    raise AssertionError(f"{function}: no end")


def test_hal_turns_uart_receive_on_after_open():
    """With `io = uart` FreeRTOS opens UART0 before main with enable_rx = 0, and a later pi_uart_open
    only counts another user (uart_internal.c). GVSOC's UART stores the RX-enable bit but never checks
    it, so no simulation can catch this: the HAL must apply its configuration and turn RX (and TX) on
    through the open device, and it must do so before it queues the first read."""
    hal = (TEMPLATES / "targets" / "gap8" / "hal" / "hal.c").read_text()
    init = _body(hal, "edgernn_hal_init")
    assert init.index("pi_freq_set(PI_FREQ_DOMAIN_FC") < init.index("open_link()")
    uart = _body(hal, "open_link")      # the first: the UART's (the CPX one is under EDGERNN_LINK_WIFI)
    order = ["pi_uart_conf_init(&uart_conf)", "uart_conf.enable_rx = 1",
             "pi_uart_open(&uart)", "pi_uart_ioctl(&uart, PI_UART_IOCTL_CONF_SETUP, &uart_conf)",
             "pi_uart_ioctl(&uart, PI_UART_IOCTL_ENABLE_RX", "pi_uart_ioctl(&uart, PI_UART_IOCTL_ENABLE_TX",
             "rx_queue(&rx_slots[i])"]
    at = [uart.index(s) for s in order]
    assert at == sorted(at), dict(zip(order, at))
    # and the board does not give UART0 to printf at all
    from edgernn.targets.board import load_board

    assert load_board("ai_deck")["gap_sdk"]["io"] == "disable"


# A stand-in for the PMSIS calls the HAL's init makes, each recording itself: GVSOC does not model the
# PMU, so the order in which the HAL sets the board up is checked by running its init on the host.
PMSIS_RECORDER = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#define PI_FREQ_DOMAIN_FC 0
#define PI_FREQ_DOMAIN_CL 1
#define PI_PMU_DOMAIN_FC 0
#define PI_UART_IOCTL_CONF_SETUP 1
#define PI_UART_IOCTL_ENABLE_RX 2
#define PI_UART_IOCTL_ENABLE_TX 3
typedef struct pi_task { int done; } pi_task_t;
struct pi_device { void *config; };
struct pi_uart_conf { uint32_t baudrate_bps; int enable_tx, enable_rx; int uart_id; };
extern char calls[4096];
#define RECORD(...) (snprintf(calls + strlen(calls), sizeof calls - strlen(calls), __VA_ARGS__))
static inline void pi_bsp_init(void) { RECORD("pi_bsp_init;"); }
static inline int __pi_pmu_voltage_set(int domain, uint32_t mv) { RECORD("voltage(%d,%u);", domain, (unsigned)mv); return 0; }
static inline int pi_freq_set(int domain, uint32_t hz) { RECORD("freq(%d,%u);", domain, (unsigned)hz); return 0; }
static inline uint32_t pi_freq_get(int domain) { (void)domain; return 250000000u; }
static inline void pi_uart_conf_init(struct pi_uart_conf *c) { RECORD("uart_conf_init;"); memset(c, 0, sizeof *c); }
static inline void pi_open_from_conf(struct pi_device *d, void *c) { d->config = c; }
static inline int pi_uart_open(struct pi_device *d) {
    struct pi_uart_conf *c = d->config; RECORD("uart_open(%u,%d,%d);", (unsigned)c->baudrate_bps, c->enable_tx, c->enable_rx); return 0; }
static inline int pi_uart_ioctl(struct pi_device *d, int cmd, void *arg) { (void)d; (void)arg; RECORD("ioctl(%d);", cmd); return 0; }
static inline void pi_task_block(pi_task_t *t) { t->done = 0; }
static inline int pi_uart_read_async(struct pi_device *d, void *b, int n, pi_task_t *t) { (void)d; (void)b; (void)n; (void)t; RECORD("r"); return 0; }
static inline void pi_task_wait_on(pi_task_t *t) { (void)t; }
static inline int pi_uart_write(struct pi_device *d, void *b, uint32_t n) { (void)d; (void)b; RECORD("write(%u);", (unsigned)n); return 0; }
static inline void pmsis_exit(int code) { RECORD("exit(%d);", code); }
static inline int hal_uart_tx_status_get(int id) { (void)id; return 0; }
/* the FC tick timer that edgernn_hal_cycles reads (EDGERNN_CYCLES_FC=1, the default) */
#define SYS_TIMER 0
#define configTICK_RATE_HZ 1000u
static inline uint32_t xTaskGetTickCount(void) { return 0u; }
static inline uint32_t pi_timer_value_read(int timer) { (void)timer; return 0u; }
static inline uint32_t system_core_clock_get(void) { return 250000000u; }
"""
HAL_INIT_DRIVER = r"""
#include <stdint.h>
#include <stdio.h>
char calls[4096];
void edgernn_hal_init(int argc, char **argv);
uint64_t edgernn_team_cluster_cycles(void) { return 0; }
int main(void) { edgernn_hal_init(0, 0); puts(calls); return 0; }
"""


def test_hal_sets_the_board_up_as_bitcrazes_examples_do(tmp_path):
    """Before it raises the FC clock, the HAL sets the AI-deck's pads (pi_bsp_init) and the FC's supply
    to 1.2 V (__pi_pmu_voltage_set), as Bitcraze's examples do: voltage first, then the frequency that
    needs it; then the UART. GVSOC does not model the PMU, so the init runs here on the host, against a
    PMSIS that records each call."""
    require_tools("gcc")
    include = tmp_path / "include"
    for header in ("pmsis.h", "bsp/bsp.h", "pmsis/implem/hal/hal.h"):
        (include / header).parent.mkdir(parents=True, exist_ok=True)
        (include / header).write_text(PMSIS_RECORDER if header == "pmsis.h" else "")
    (tmp_path / "driver.c").write_text(HAL_INIT_DRIVER)
    exe = tmp_path / "hal_init"
    from edgernn.targets.board import load_board

    cpu = load_board("ai_deck")["cpu"]
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", f"-I{include}", f"-I{TEMPLATES / 'firmware'}",
                    f"-DEDGERNN_FC_HZ={cpu['fc_hz']}", f"-DEDGERNN_FC_MV={cpu['fc_mv']}",
                    str(TEMPLATES / "targets" / "gap8" / "hal" / "hal.c"), str(tmp_path / "driver.c"), "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    calls = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.strip().split(";")
    assert cpu["fc_mv"] == 1200 and cpu["fc_hz"] == 250_000_000
    assert calls[:4] == ["pi_bsp_init", "voltage(0,1200)", "freq(0,250000000)", "uart_conf_init"], calls
    assert calls[4] == "uart_open(115200,1,1)" and "exit" not in ";".join(calls)
    # with EDGERNN_FC_HZ=0 (the boot clock kept) neither the voltage nor the clock is touched
    subprocess.run(["gcc", "-std=c99", f"-I{include}", f"-I{TEMPLATES / 'firmware'}", "-DEDGERNN_FC_HZ=0",
                    str(TEMPLATES / "targets" / "gap8" / "hal" / "hal.c"), str(tmp_path / "driver.c"), "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    calls = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.strip().split(";")
    assert calls[:2] == ["pi_bsp_init", "uart_conf_init"], calls


def test_hal_keeps_a_receive_transfer_queued():
    """The uDMA drops every byte that arrives while no receive transfer is queued (on the chip and in
    GVSOC's udma_v2_impl.cpp): the HAL queues all its one-byte slots at start and re-queues each slot
    as soon as it has taken its byte, before it waits for anything else; slots are whole aligned words,
    because the uDMA writes 32-bit words."""
    hal = (TEMPLATES / "targets" / "gap8" / "hal" / "hal.c").read_text()
    assert re.search(r"typedef struct \{\s*pi_task_t task;\s*uint32_t word;", hal)
    assert "pi_uart_read_async(&uart, &slot->word, 1, &slot->task)" in _body(hal, "rx_queue")
    read = _body(hal, "edgernn_hal_uart_read")
    taken = read.index("buf[n++] = ")
    assert read.index("pi_task_wait_on(&slot->task)") < taken < read.index("rx_queue(slot)")
    assert "pi_uart_read(" not in hal  # no blocking read: it would leave the uDMA without a transfer
    assert re.search(r"#define EDGERNN_UART_RX_SLOTS (\d+)", hal).group(1) == "64"


def test_build_says_how_to_build_and_flash(deck_build):
    out, result, _ = deck_build
    lines = [m for m in result["messages"] if "not built here" in m]
    assert len(lines) == 1 and "\n" not in lines[0]
    line = lines[0]
    assert "GAP_SDK_HOME" in line
    assert f"source $GAP_SDK_HOME/configs/ai_deck.sh && make -C {out / 'firmware'} clean build image" in line
    assert f"edgernn flash {out}" in line and "--radio radio://" in line
    assert result["manifest"]["firmware"]["built"] is False
    nntool = (out / "nntool" / "nntool_script").read_text()
    assert "UNTESTED" not in nntool and "open step_nntool.tflite\n" in nntool and "gen " in nntool
    assert (out / "nntool" / "step_nntool.tflite").is_file() and list((out / "nntool" / "calibration").glob("*.npy"))
    assert "edgernnCNN(Input_1, Input_2, Input_3, Output_1, Output_2, Output_3);" in (out / "nntool" / "host_loop.c").read_text()


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
               "-DEDGERNN_WEIGHTS_SECTION=", f"-I{fw}", "-c", str(src), "-o", str(tmp_path / (src.stem + ".o"))]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0 and not proc.stderr.strip(), f"{src.name}: {proc.stderr}"
    # the PMSIS-facing files are compiled against the real SDK by the tests below


def test_float32_builds_with_a_warning(tmp_path):
    from edgernn.pipeline.build import _check_quant
    from edgernn.targets.board import load_board

    said = []
    _check_quant(load_board("ai_deck"), "float32", said.append)
    assert len(said) == 1 and "no FPU" in said[0] and "soft-float" in said[0]
    said.clear()
    _check_quant(load_board("ai_deck"), "int8", said.append)
    assert said == []


def test_model_too_big_for_l2_is_refused(tmp_path):
    # a per-frame 3x3 convolution to 16 channels over a 160x160 frame, not followed by a pool: its 409,600-byte
    # int8 output is an activation, which nothing keeps in L3 (weights stream from L3: filters, LSTMs and
    # FULLY_CONNECTED, tests/targets/gap8/test_gvsoc_l3.py and test_gvsoc_dronet.py; the L3 decision itself:
    # tests/backend/test_placement_l3.py), so the arena alone is over L2's budget
    keras = zoo._keras(0)
    L = keras.layers
    wide = keras.Sequential([keras.Input((None, 160, 160, 1)), L.TimeDistributed(L.Conv2D(16, 3, padding="same")),
                             L.TimeDistributed(L.Conv2D(4, 3, strides=4)), L.TimeDistributed(L.Flatten()),
                             L.LSTM(8), L.Dense(2)], name="wide")
    model = tmp_path / "wide.keras"
    wide.save(model)
    # a few calibration frames of its own: the synthetic calibration's sequences through 160x160 frames take over a
    # minute before the memory plan is reached
    calib = tmp_path / "calib.npy"
    np.save(calib, np.random.default_rng(0).uniform(-1, 1, (1, 3, 160, 160, 1)).astype(np.float32))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "edgernn", "build", str(model), "--board", "ai_deck", "--calib",
                           str(calib), "-o", str(out)],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(TESTS.parent)))
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    assert len(errors) == 1
    assert re.match(r"error: the model does not fit board ai_deck: over budget in l2 by \d+ B", lines[errors[0]])
    table = "\n".join(lines[errors[0] + 1:])
    assert re.search(r"arena\s+l2\s+\d+", table) and re.search(r"l2\s+\d+\s+327680\s+\d+", table)
    assert "overflow" in table
    assert not out.exists() and not list(tmp_path.glob(".out*"))


def test_flash_without_the_tools_says_how_to_get_them(deck_build, monkeypatch, tmp_path):
    from edgernn.targets import device as devices

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
    from edgernn.validate.run import validate

    out, _, _ = deck_build
    with pytest.raises(EdgeRNNError, match=r"board ai_deck is hardware: .*--port /dev/ttyUSB0"):
        validate(out, steps=3)
    with pytest.raises(LinkError, match="cannot open port"):
        validate(out, port=str(out / "no-such-tty"), steps=3)


def test_validate_on_a_port_that_does_not_answer(deck_build):
    from edgernn.validate.run import validate

    out, _, _ = deck_build
    master, slave = os.openpty()
    try:
        with pytest.raises(LinkError, match=r"gave no valid answer to HELLO .*no answer within"):
            validate(out, port=os.ttyname(slave), steps=3, timeout=0.1)
    finally:
        os.close(master)
        os.close(slave)
    assert not (out / "report.json").exists()


def test_the_steps_input_is_copied_into_l1_for_the_team_kernels_that_read_it(deck_build):
    """The step's input sits where the caller left it (L2 on GAP8: some 9 cycles a load from the cluster, byte by
    byte at an unknown alignment). When a team kernel reads it and the arena is in L1, placement keeps it a
    copy there (item input, on 8 bytes) and the body copies it first, once; with the arena in L2 there is none.
    The body reads the team memory's bases once, into locals, not from their L2 globals after every call."""
    from edgernn.backend.placement import place
    from edgernn.targets.board import load_board

    deck = load_board("ai_deck")
    small = place(deck, weight_bytes=1000, state_bytes=64, arena_bytes=2048, input_stage_bytes=6)
    assert small.items["input"] == ("l1", 8)
    large = place(deck, weight_bytes=1000, state_bytes=64, arena_bytes=60000, input_stage_bytes=6)
    assert "input" not in large.items
    out, _, _ = deck_build
    model_c = (out / "firmware" / "model.c").read_text()
    body = model_c[model_c.index("static void edgernn_step_body"):model_c.index("edgernn_status_t edgernn_step(")]
    # the LSTM's input FC (a team kernel) reads x: the copy is made before the first op
    assert body.index("edgernn_move_bytes(edgernn_input_stage, x, ") < body.index("/* op ")
    # read by a team kernel, or by the workers of a split by units, which get x as their range function's args
    assert "edgernn_team_fully_connected_s8(x," in body or re.search(r"edgernn_team_split\(edgernn_step_cell\d+, x,", body)
    for name in ("edgernn_arena", "edgernn_state", "edgernn_fast_weights"):
        assert f"*const {name} = {name}_at_entry;" in body


def test_arena_goes_to_l2_when_l1_is_too_small(deck_build, tmp_path):
    import copy
    import shutil

    from edgernn.backend import generate_firmware
    from edgernn.backend.placement import place
    from edgernn.targets.board import Board, load_board

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
    assert facts.placement["items"]["arena"]["memory"] == "l2"
    model_c = (folder / "firmware" / "model.c").read_text()
    assert "static int64_t edgernn_arena[" in model_c and "edgernn_team_fast_alloc" not in model_c
    assert facts.placement["items"]["state"]["memory"] == "l2" and "static int64_t edgernn_state[" in model_c


def _deck_with_l1_room(room: int):
    import copy

    from edgernn.targets.board import Board, load_board

    deck = load_board("ai_deck")
    data = copy.deepcopy(deck.data)
    for mem in data["memory"]:
        if mem["name"] == "l1":
            mem["reserved"] = mem["size"] - room
    return Board(deck.name, deck.description, deck.path, data)


def test_weights_are_copied_into_l1_when_they_fit(deck_build, tmp_path):
    import shutil

    from edgernn.backend import generate_firmware
    from edgernn.backend.placement import place
    from edgernn.targets.board import load_board

    deck = load_board("ai_deck")
    fits = place(deck, weight_bytes=20000, state_bytes=64, arena_bytes=2048, weight_copy_bytes=20008)
    assert fits.items["weights"] == ("l1", 20008) and fits.items["weights_src"] == ("l2", 20000)
    assert fits.weights_in_team_memory and fits.items["arena"][0] == "l1"
    # the arena has L1 first; weights that do not fit beside it stay in L2, read from there
    big = place(deck, weight_bytes=52000, state_bytes=64, arena_bytes=2048)
    assert big.items["weights"] == ("l2", 52000) and "weights_src" not in big.items
    assert not big.weights_in_team_memory and big.items["arena"][0] == "l1" and big.notes
    assert big.items["state"][0] == "l1" and big.state_in_team_memory

    out, _, _ = deck_build
    model_c = (out / "firmware" / "model.c").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["placement"]["items"]["weights"]["memory"] == "l1"
    assert manifest["placement"]["items"]["weights_src"]["memory"] == "l2"
    # every kernel argument that is a constant points into the copy, which init fills on the cluster
    step_body = model_c[model_c.index("static void edgernn_step_body"):model_c.index("edgernn_status_t edgernn_step(")]
    assert re.search(r"EDGERNN_FAST_WEIGHT\(int8_t, edgernn_step_\w+\)", step_body)
    direct = re.sub(r"EDGERNN_FAST_WEIGHT\(\w+, \w+\)", "", step_body)
    assert not re.search(r"\bedgernn_step_(c\d+|op\d+_\w+)", direct)
    assert "edgernn_team_enter(edgernn_fill_fast_weights, NULL)" in model_c
    # the fused element-wise loops read their tables from the copy too, through pointers taken before the loop
    loops = re.findall(r"static void edgernn_step_fused\d+\(.*?\n}\n", model_c, re.S)
    assert loops and any("EDGERNN_FAST_WEIGHT" in loop for loop in loops)
    for loop in loops:
        direct = re.sub(r"EDGERNN_FAST_WEIGHT\(\w+, \w+\)", "", loop)
        assert not re.search(r"\bedgernn_step_(c\d+|op\d+_\w+|fused\d+_\w+)", direct), loop

    # room in L1 for the arena but not for the weights: they are read from L2, as before
    folder = tmp_path / "out"
    shutil.copytree(out, folder)
    arena = manifest["placement"]["items"]["arena"]["bytes"]
    facts = generate_firmware(folder, _deck_with_l1_room(arena + 8))
    assert facts.placement["items"]["weights"]["memory"] == "l2"
    assert facts.placement["items"]["arena"]["memory"] == "l1"
    model_c = (folder / "firmware" / "model.c").read_text()
    assert "EDGERNN_FAST_WEIGHT" not in model_c and "edgernn_fill_fast_weights" not in model_c


# ---- with the GAP SDK ----------------------------------------------------------------------------------

def _riscv_tool(tool: str) -> str:
    """The binutils of the compiler that built the ELF (GAP's or Debian's; both read RV32 ELF)."""
    return shutil.which(f"riscv32-unknown-elf-{tool}") or f"riscv64-unknown-elf-{tool}"


def _symbols(elf: Path) -> dict[str, tuple[str, str]]:
    """name -> (type letter, section) of an ELF's symbols."""
    out = subprocess.run([_riscv_tool("objdump"), "-t", str(elf)], capture_output=True, text=True, check=True).stdout
    table = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 5 and re.fullmatch(r"[0-9a-f]{8}", parts[0]):
            table[parts[-1]] = (parts[-4] if len(parts) >= 6 else parts[1], parts[-3])
    return table


def _words(elf: Path, function: str) -> list[int]:
    """The 32-bit instruction words of one function."""
    out = subprocess.run([_riscv_tool("objdump"), "-d", f"--disassemble={function}", str(elf)],
                         capture_output=True, text=True, check=True).stdout
    return [int(m, 16) for m in re.findall(r"^\s*[0-9a-f]+:\s+([0-9a-f]{8})\s", out, re.M)]


def _sdotsp_pattern(home: Path) -> tuple[int, int]:
    """(mask, value) of pv.sdotsp.b from GVSOC's ISA table in the SDK, the decoder that will run it."""
    isa = home / "gvsoc" / "gvsoc" / "models" / "cpu" / "iss" / "isa_gen" / "isa_riscv_gen.py"
    bits = re.search(r"R5\('pv\.sdotsp\.b',\s*'RRRR',\s*'([01\- ]+)'\)", isa.read_text()).group(1).replace(" ", "")
    assert len(bits) == 32
    mask = int("".join("0" if b == "-" else "1" for b in bits), 2)
    value = int("".join("1" if b == "1" else "0" for b in bits), 2)
    return mask, value


def _is_sdotsp(word: int, pattern: tuple[int, int]) -> bool:
    return word & pattern[0] == pattern[1]


def _is_lp_setup(word: int) -> bool:
    """lp.setup (GVSOC's isa_riscv_gen.py: funct3 100, bits 11:8 zero, opcode 1111011)."""
    return word & 0x7F7F == 0x407B


def _gap_compiler() -> bool:
    """Whether the GAP SDK builds with GAP's own compiler here (which calls the .S kernels)."""
    from edgernn.targets import device as devices
    from edgernn.targets.gap8.adapter import gap_sdk_setup

    return gap_sdk_setup(devices.load_board("ai_deck")).compiler == "gap"


@pytest.fixture(scope="module")
def sdk_built(tmp_path_factory):
    """The int8 LSTM step model and the float32 fused LSTM, built by `edgernn build` with the GAP SDK."""
    from edgernn.pipeline.build import build_model

    home = require_gap_sdk()
    built = {}
    for quant, mode in (("int8", "step"), ("float32", "fused")):
        out = tmp_path_factory.mktemp(f"sdk_{quant}") / "out"
        with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(io.StringIO()):
            mp.setenv("GAP_SDK_HOME", str(home))
            result = build_model(small_lstm(), out, board="ai_deck", quant=quant, mode=mode, warn=lambda _: None)
        built[quant] = (out, result)
    return home, built


def test_build_links_with_the_gap_sdk(sdk_built):
    """`edgernn build` runs the SDK's own rules (pmsis_rules.mk, FreeRTOS, GAP8.ld) to a linked ELF
    with no undefined symbol and a flash image; the weights sit where PI_L2 puts them (FreeRTOS: .data,
    in L2), never in pulp-os's .l2_data, which FreeRTOS's link script does not place."""
    from edgernn.targets import device as devices

    home, built = sdk_built
    for quant, (out, result) in built.items():
        manifest = result["manifest"]
        fw = manifest["firmware"]
        assert fw["built"] is True and fw["compilers"], fw
        elf, image = out / fw["elf"], out / fw["image"]
        assert elf.is_file() and image.is_file() and manifest["code_bytes"] > 10_000
        nm = subprocess.run([_riscv_tool("nm"), "-u", str(elf)], capture_output=True, text=True, check=True)
        assert nm.stdout.strip() == "", f"{quant}: undefined symbols: {nm.stdout}"
        symbols = _symbols(elf)
        assert "memmove" not in symbols
        weights = re.findall(r"^const \w+ (\w+)", (out / "firmware" / "weights.c").read_text(), re.M)
        # the constants of the model's ops (the fused LSTM's weights, biases and parameters; the step
        # model's blocked weights and rescales), each looked up below
        assert len(weights) >= 4 and all(name.startswith("edgernn_step_") for name in weights), weights
        assert {symbols[name][1] for name in weights} <= {".data"}, {n: symbols[n] for n in weights}
        assert ".l2_data" not in {section for _, section in symbols.values()}
        # the clocks and the Xpulp path of the board file went through the Makefile
        assert "edgernn_hal_uart_read" in symbols and "edgernn_team_cluster_cycles" in symbols
        if quant == "float32":
            # expf and tanhf come from edgernn_libm.c, the SDK links with -nostdlib and has no libm
            assert {"expf", "tanhf"} <= set(symbols)
    from edgernn.targets.gap8.adapter import gap_sdk_setup

    assert gap_sdk_setup(devices.load_board("ai_deck")).home == home


def _fc_s8_words(elf):
    """The int8 FULLY_CONNECTED's words: its entry and its blocks (a function of their own per rounding, which
    a call of one output skips)."""
    return sum((_words(elf, f) for f in ("edgernn_fully_connected_s8", "fully_connected_s8_once",
                                          "fully_connected_s8_twice_up")), [])


def test_int8_dot_products_are_xpulp_and_the_variants_build(sdk_built, tmp_path):
    """The int8 FULLY_CONNECTED runs on pv.sdotsp.b, in the encoding GVSOC decodes (its ISA table in the
    SDK), its dot products' whole groups in the Xpulp assembly (edgernn_dot_xpulp.S); `EDGERNN_XPULP=0 EDGERNN_CLUSTER_CORES=1` on make's command line builds the same project
    scalar on one cluster core."""
    from edgernn.targets import device as devices

    home, built = sdk_built
    out, _ = built["int8"]
    pattern = _sdotsp_pattern(home)
    elf = out / "firmware" / ELF
    assert sum(_is_sdotsp(w, pattern) for w in _fc_s8_words(elf)) >= 4
    # the whole groups of 4 inputs go through the hand-written loops, inlined into the kernel (Debian's gcc)
    # or called in edgernn_dot_xpulp.S (EDGERNN_DOT_ASM=2, and GAP's compiler), each loop within the
    # silicon's rules (hwloop_check, which the build itself ran too)
    assert any(_is_lp_setup(w) for w in _fc_s8_words(elf)) == (not _gap_compiler())
    loops, problems = hwloop_check.check_elf(elf, _riscv_tool("objdump"))
    assert len(loops) >= 2 and problems == [], [str(p) for p in problems]
    called = devices.build_elf(out / "firmware", "ai_deck", tmp_path / "called", make_vars={"EDGERNN_DOT_ASM": 2})
    assert [sum(_is_sdotsp(w, pattern) for w in _words(called.elf, f"edgernn_dot{r}_s8_xpulp")) for r in (8, 4)] == \
        [8, 4]
    assert not any(_is_lp_setup(w) for w in _fc_s8_words(called.elf))
    assert called.hardware_loops >= 2
    scalar = devices.build_elf(out / "firmware", "ai_deck", tmp_path / "scalar",
                                    make_vars={"EDGERNN_XPULP": 0, "EDGERNN_CLUSTER_CORES": 1})
    assert not any(_is_sdotsp(w, pattern) for w in _fc_s8_words(scalar.elf))
    assert scalar.hardware_loops == 0 and "edgernn_dot8_s8_xpulp" not in _symbols(scalar.elf)
    # (EDGERNN_CLUSTER_CORES reaches the compiler by the same make variable; the team's own arithmetic
    # for 1, 2 and 8 workers is tested on the host, tests/backend/test_team.py)


@pytest.mark.parametrize("sdk", gap_sdk_params())
def test_toy_firmware_builds_from_a_bare_model(sdk, tmp_path, monkeypatch):
    """devices.build_elf stages a GAP SDK project around a bare model.c/model.h (the link tests'
    toy model, no TensorFlow needed) and builds it, linked with no undefined symbol, with each SDK a user
    has: upstream master ($GAP_SDK_HOME) and, in CI, 4.8.0 (Bitcraze's docker image), whose FreeRTOS port
    and PMSIS folders differ."""
    from edgernn.targets import device as devices

    home = require_gap_sdk_at(sdk)
    monkeypatch.setenv("GAP_SDK_HOME", str(home))
    built = devices.build_elf(TOY_MODEL, "ai_deck", tmp_path)
    project = tmp_path / "project"
    assert built.elf == project / ELF and built.elf.is_file()
    assert {"Makefile", "hal.c", "main.c", "server.c", "edgernn_team.c", "edgernn_libm.c"} <= {
        p.name for p in project.iterdir()}
    assert (project / "model.c").read_text() == (TOY_MODEL / "model.c").read_text()
    symbols = _symbols(built.elf)
    assert {"edgernn_hal_uart_read", "pi_bsp_init", "__pi_pmu_voltage_set"} <= set(symbols)
    nm = subprocess.run([_riscv_tool("nm"), "-u", str(built.elf)], capture_output=True, text=True, check=True)
    assert nm.stdout.strip() == ""


@pytest.mark.parametrize("fault, said", [
    ("extern void edgernn_no_such_symbol(void);\nvoid edgernn_reset_more(void) { edgernn_no_such_symbol(); }\n",
     r"undefined reference to `edgernn_no_such_symbol' \(in model\.c:\d+\)"),
    ("int edgernn_broken(void) { return undeclared_name; }\n",
     r"model\.c:\d+: error: .undeclared_name. undeclared"),
])
def test_a_failing_sdk_build_says_what_the_compiler_said(fault, said, tmp_path, monkeypatch):
    """Not make's last line (`collect2: error: ld returned 1 exit status`) but the undefined symbol, or the
    first compile error with its file and line."""
    from edgernn.targets import device as devices

    monkeypatch.setenv("GAP_SDK_HOME", str(require_gap_sdk()))
    model = tmp_path / "model"
    shutil.copytree(TOY_MODEL, model, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    source = (model / "model.c").read_text()
    # the fault is reached from edgernn_reset, so the linker cannot drop it with its section
    source = source.replace("void edgernn_reset(void)\n{", "void edgernn_reset_more(void);\nvoid edgernn_reset(void)\n{\n    edgernn_reset_more();", 1)
    (model / "model.c").write_text(source + fault + ("" if "reset_more" in fault else "void edgernn_reset_more(void) {}\n"))
    with pytest.raises(EdgeRNNError) as err:
        devices.build_elf(model, "ai_deck", tmp_path / "build")
    message = str(err.value)
    assert re.search(said, message), message
    assert "collect2" not in message.split("(command:")[0] and "\n" not in message


def test_wrapper_maps_gap_flags_and_builtins(tmp_path):
    """The SDK's compiler name, answered by Debian's gcc: GAP's -march and -mPE/-mFC are mapped, the
    GAP compiler's __builtin_pulp_* used by FreeRTOS/PMSIS come from gap8_builtins.h, and the object is
    RV32IMC with nothing left undefined."""
    from edgernn.targets.gap8 import sdk as gap_sdk

    require_tools("riscv64-unknown-elf-gcc")
    src = tmp_path / "b.c"
    src.write_text("int f(unsigned *p, int x) {\n"
                   "    unsigned hart = __builtin_pulp_spr_read(0xF14);\n"
                   "    __builtin_pulp_spr_write(0x7A0, x);\n"
                   "    int v = __builtin_pulp_event_unit_read((int *)p, 8);\n"
                   "    return (int)hart + v + __builtin_pulp_ff1(x) + __builtin_pulp_fl1(x)\n"
                   "        + __builtin_pulp_CoreCount() + __builtin_pulp_bextract(x, 4, 3)\n"
                   "        + __builtin_pulp_maxsi(x, 3) + __builtin_pulp_minsi(x, 3)\n"
                   "        + (int)__builtin_pulp_read_then_spr_bit_set(0x300, 8)\n"
                   "        + __builtin_pulp_binsert(x, ~0xf0, 5, 0xf0, 4);\n"
                   "}\n")
    gcc = gap_sdk.debian_toolchain() / "riscv32-unknown-elf-gcc"
    proc = subprocess.run([str(gcc), "-march=rv32imcxgap8", "-mPE=8", "-mFC=1", "-O2", "-Wall", "-Werror", "-c",
                           str(src), "-o", str(tmp_path / "b.o")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    header = subprocess.run(["riscv64-unknown-elf-readelf", "-h", str(tmp_path / "b.o")], capture_output=True,
                            text=True, check=True).stdout
    assert "ELF32" in header and "RISC-V" in header
    undefined = subprocess.run(["riscv64-unknown-elf-nm", "-u", str(tmp_path / "b.o")], capture_output=True,
                               text=True, check=True).stdout.split()
    # only libgcc's count-zeros helpers (the SDK links -lgcc), no __builtin_pulp_* left as a call
    assert set(undefined) - {"U"} <= {"__clzsi2", "__ctzsi2"}, undefined
    # p.elw is the LOAD opcode with funct3 6
    words = _words(tmp_path / "b.o", "f")
    assert any(w & 0x707F == 0x6003 for w in words)


@pytest.mark.toolchain
def test_float_functions_match_the_host_libm(tmp_path):
    """edgernn_libm.c (expf, expm1f, tanhf, sqrtf, floorf, roundf, fabsf for the GAP8 build, which has
    no libm) against glibc on every 257th float and the edge cases: float arithmetic only, so these are
    the bits GAP8's soft-float computes too."""
    names = ["expf", "expm1f", "tanhf", "sqrtf", "floorf", "roundf", "fabsf"]
    renames = [f"-D{n}=edgernn_{n}" for n in names]
    obj = tmp_path / "libm.o"
    subprocess.run(["gcc", "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fno-builtin",
                    "-ffp-contract=off", *renames, "-c", str(TEMPLATES / "targets" / "gap8" / "hal" / "edgernn_libm.c"),
                    "-o", str(obj)], check=True)
    exe = tmp_path / "libm_check"
    subprocess.run(["gcc", "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-DSTRIDE=257u",
                    str(TESTS / "c" / "libm_check.c"), str(obj), "-lm", "-o", str(exe)], check=True)
    worst = {line.split()[0]: int(line.split()[1]) for line in
             subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()}
    # ulp bounds, as edgernn_libm.c's header states them
    assert worst == {**worst, "sqrtf": 0, "floorf": 0, "roundf": 0, "fabsf": 0}, worst
    assert worst["expf"] <= 1 and worst["expm1f"] <= 1 and worst["tanhf"] <= 3, worst
