"""The gvsoc_gap8 board end to end: the ai_deck PMSIS/FreeRTOS firmware, built with the real GAP SDK's
rules, runs in GVSOC on the fabric controller and the 8-core cluster, and is validated over its
simulated UART at 115200 baud: every output and state byte equal to the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import gap_sdk_params, require_gap_sdk, require_gap_sdk_at, require_tools
from edgernn.testing.zoo import gap8_model

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

BOARD = "gvsoc_gap8"
STEPS = 1000
VARIANT_STEPS = 200


# kind: (quant, mode)
MODELS = {
    "lstm64": ("int8", "step"),
    "lstm64_fused": ("int8", "fused"),
    "gru": ("int8", "step"),
    "cfc": ("int8", "step"),
    "ltc": ("int8", "step"),
    "gru_int16": ("int16", "step"),
    "cfc_int16": ("int16", "step"),     # its cells' 16x8 heads as grouped calls (sums bounded to int32: in 32-bit
                                        # words), split by rows over the cores
}
# the team kernel each kind's model.c must call
TEAM_CALLS = {"cfc_int16": "edgernn_team_fully_connected_group_s16_words(",
              # the int8 heads' group, through its argument block (filled at init) and in blocks of 4 rows
              "cfc": "edgernn_team_split(edgernn_fully_connected_group_s8_range, &edgernn_step_group_args[0], 36, 4)"}


@pytest.fixture(scope="module")
def gvsoc():
    require_gap_sdk()
    require_tools("make", "riscv64-unknown-elf-gcc")
    from edgernn.targets.gap8 import sdk as gap_sdk

    return gap_sdk.build_gvsoc()


@pytest.fixture(scope="module")
def built(gvsoc, tmp_path_factory):
    """``built(kind)`` -> (OUT folder built for gvsoc_gap8, number of inputs), once per module."""
    from edgernn.testing.zoo import trajectories

    from edgernn.pipeline.build import build_model as build_folder

    made = {}

    def get(kind: str):
        if kind not in made:
            quant, mode = MODELS[kind]
            folder = tmp_path_factory.mktemp(kind)
            model, n_in = gap8_model(kind)
            path = folder / f"{kind}.keras"
            model.save(path)
            result = build_folder(str(path), folder / "out", board=BOARD, quant=quant, mode=mode,
                                    calib=trajectories(8, 80, n_in, 1))
            manifest = result["manifest"]
            assert manifest["board"] == BOARD and manifest["firmware"]["built"]
            assert manifest["mode"] == mode
            made[kind] = (folder / "out", n_in)
        return made[kind]

    return get


@pytest.mark.parametrize("kind", list(MODELS))
def test_validates_on_gvsoc_gap8(built, kind):
    from edgernn.testing.zoo import trajectories

    from edgernn.validate.run import validate

    out, n_in = built(kind)
    assert TEAM_CALLS.get(kind, "(") in (out / "firmware" / "model.c").read_text()
    report = validate(out, data=trajectories(1, STEPS, n_in, 5))
    ref, dev = report["reference"], report["device"]
    assert report["steps"] >= STEPS and report["board"] == BOARD
    assert ref["mismatches"] == 0 and ref["state_mismatches"] == 0, ref
    assert report["pass"]
    # The step ran on the 8-core cluster with the Xpulp dot products. cycles_per_step is the whole step as
    # the application sees it (the FC's timer around edgernn_step); the cluster's own work, counted by its
    # PULP counter, is a field of its own and always the smaller: it happens inside the step.
    assert (dev["workers"], dev["simd_dot"], dev["offloaded"]) == (8, True, True)
    assert dev["cycles_per_step"] > 0 and dev["macs_per_cycle"] > 0
    assert "dispatch to the cluster and its wake-up included" in dev["cycle_counter"]
    assert "PI_PERF_CYCLES" in dev["cluster_cycle_counter"]
    assert 0 < dev["cluster_cycles_per_step"] < dev["cycles_per_step"]
    assert 0 < dev["cluster_cycles_per_step_median"] < dev["cycles_per_step_median"]


def test_validate_profile_says_where_a_steps_cycles_go_per_op_and_core(built, tmp_path, monkeypatch):
    """validate --profile traces one step of the cluster's 8 cores in GVSOC: each op of model.c's step gets its
    cycles, the ops add up to the firmware's own count of that step's body within 2 %, every row (the
    team's call and the fabric controller's share too) to the whole step it counted, the ops the team shares keep
    all 8 cores at work while the others run on the master alone, and each op's MACs are the step model's.
    Each run's first port is one another process already listens on: the validation's run and the traced one
    each choose again (the traced one with a new trace pipe: its first reader ended with the first GVSOC)."""
    import json
    import socket

    from edgernn.targets.gap8 import gvsoc
    from edgernn.testing.zoo import trajectories

    from edgernn.validate.run import FC_ROW, TEAM_ROW, validate

    out, n_in = built("lstm64")
    manifest = json.loads((out / "manifest.json").read_text())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        calls = []
        real = gvsoc.free_port
        monkeypatch.setattr(gvsoc, "free_port",
                            lambda: taken.getsockname()[1] if len(calls.append(0) or calls) % 2 else real())
        report = validate(out, data=trajectories(1, 20, n_in, 5), profile=True, json_path=tmp_path / "r.json")
    # two runs, each taken once, then free (more where a parallel run takes a free one too)
    assert len(calls) >= 4, calls
    assert report["pass"]
    assert "profile" in report, report["notes"]
    prof = report["profile"]
    assert prof["step"] == 2 and prof["cores"] == list(range(8)) and "GVSOC" in prof["source"]
    # An accounting identity, not a timing: the rows add up to the whole step the firmware counted (the
    # FC's timer, dispatch included), the body's rows to the traced window, and the two rows after them
    # are the team's call and counter and the fabric controller's share, named.
    total = sum(op["cycles"] for op in prof["ops"])
    assert total == prof["cycles"] == prof["whole_step_cycles"]
    body = [op for op in prof["ops"] if not op["outside"]]
    assert sum(op["cycles"] for op in body) == prof["traced_cycles"]
    assert [op["label"] for op in prof["ops"] if op["outside"]] == [TEAM_ROW, FC_ROW]
    fc_row = prof["ops"][-1]
    assert fc_row["cycles"] == prof["whole_step_cycles"] - prof["counted_cycles"] > 0
    assert fc_row["work"] == [0] * 8 and fc_row["wait"] == [fc_row["cycles"]] * 8
    # the trace's window against the firmware's own count (PI_PERF_CYCLES around the step's body)
    assert abs(prof["traced_cycles"] - prof["counted_cycles"]) <= 0.02 * prof["counted_cycles"], prof
    assert prof["counted_cycles"] < prof["whole_step_cycles"]
    for k in range(8):
        assert sum(op["work"][k] + op["wait"][k] for op in prof["ops"]) == total
        assert prof["work"][k] + prof["wait"][k] == total
    ops = {op["label"]: op for op in prof["ops"] if op["ops"]}
    # the cell is one split by units (edgernn/backend/cells.py): both FULLY_CONNECTEDs and the gates' finish
    # in one statement, its ops all named
    first = next(iter(ops))
    assert first.startswith("0: FULLY_CONNECTED+FULLY_CONNECTED+") and "one split by units" in first, first
    for label, op in ops.items():
        shared = bool(set(op["ops"]) & set(manifest["team_ops"]))
        at_work = [w > 0 for w in op["work"]]
        assert at_work == ([True] * 8 if shared else [True] + [False] * 7), (label, op["work"])
    assert sum(op["macs"] for op in prof["ops"]) == manifest["macs_per_step"]
    cell = ops[first]
    assert {0, 2} <= set(cell["ops"])
    assert cell["macs"] >= (64 + 6) * 256 and cell["macs_per_cycle"] == cell["macs"] / cell["cycles"]
    page = (tmp_path / "r.html").read_text()
    assert 'id="cycles-by-op"' in page and 'id="cycles-by-core"' in page and "core 7" in page


def run_variant(out, make_vars: dict, xs: np.ndarray, tmp_path):
    """The same project built with other make variables, run in GVSOC: outputs, states, what ran."""
    from edgernn.targets import device as devices
    from edgernn.link import LinkClient

    board = devices.load_board(BOARD)
    built = devices.build_elf(out / "firmware", board, tmp_path, make_vars=make_vars)
    with devices.start(built.elf, board) as device:
        with LinkClient.open(device.url, baud=board["serial"]["baud"], timeout=board["serial"]["timeout_s"]) as link:
            link.wait_ready(board["emulator"]["start_timeout_s"])
            info = link.hello()
            result = link.run(xs, states="every")
    return result, info, built.hardware_loops


# (cluster cores, Xpulp SIMD, EDGERNN_DOT_ASM, one cluster task for the run) built and run beside the
# (8, 1, 1, 1) build. Each variant is a GAP SDK build and a GVSOC run (about 22 s), so each value of each
# make variable runs once across the two models rather than in every combination: the dot products'
# assembly inlined (1), called in the .S (2) and gcc's SIMD C (0) on the LSTM, whose gates are the long
# dot products; 1 core scalar on both (the slowest, the furthest from the default); 1 core SIMD and the
# fabric controller alone (0 cores) on the CfC; a cluster task per step (persistent 0) on 8 cores on the LSTM.
VARIANTS = {"lstm64": ((8, 1, 1, 1), (8, 1, 0, 1), (8, 1, 2, 1), (1, 0, 1, 1), (8, 1, 1, 0)),
            "cfc": ((8, 1, 1, 1), (1, 1, 1, 1), (1, 0, 1, 1), (0, 1, 1, 1))}


@pytest.mark.parametrize("kind", list(VARIANTS))
def test_one_core_and_scalar_dot_products_give_the_same_bytes(built, kind, tmp_path):
    """1 and 8 cluster cores, the fabric controller alone (0), Xpulp SIMD and scalar dot products, the
    SIMD ones in gcc's C or in the hand-written assembly, one cluster task for the whole run and one per
    step: identical outputs and states. Every ELF built passed the hardware-loop check (build_gap_project),
    and the assembly's builds have its loops."""
    from edgernn.testing.zoo import trajectories

    from edgernn.tflite.oracle import quantize

    out, n_in = built(kind)
    import json

    manifest = json.loads((out / "manifest.json").read_text())
    xs = quantize(trajectories(1, VARIANT_STEPS, n_in, 7)[0], manifest["inputs"][0])
    runs = {}
    for cores, simd, asm, persistent in VARIANTS[kind]:
        result, info, loops = run_variant(out, {"EDGERNN_CLUSTER_CORES": cores, "EDGERNN_XPULP": simd,
                                                "EDGERNN_DOT_ASM": asm, "EDGERNN_CLUSTER_PERSISTENT": persistent},
                                          xs, tmp_path / f"c{cores}s{simd}a{asm}p{persistent}")
        target = info.describe_target()
        assert (target["workers"], target["simd_dot"], target["offloaded"]) == (max(cores, 1), bool(simd), cores > 0)
        assert (loops > 0) == bool(simd and asm), (cores, simd, asm, loops)
        runs[(cores, simd, asm, persistent)] = result
    base = runs[(8, 1, 1, 1)]
    for variant, result in runs.items():
        assert np.array_equal(result.outputs, base.outputs), variant
        assert np.array_equal(result.states, base.states), variant
    # More cores or SIMD take less of the cluster's time: the counter measures the work, not a constant.
    assert np.median(base.team_cycles) < np.median(runs[(1, 0, 1, 1)].team_cycles)
    # A cluster task per step costs the application more than the one task of the whole run.
    if (8, 1, 1, 0) in runs:
        assert np.median(base.cycles[2:]) < np.median(runs[(8, 1, 1, 0)].cycles[2:])


def test_the_whole_step_and_the_clusters_work_are_counted_apart(built, tmp_path):
    """By default each step is counted twice: the whole step on the FC's tick timer around edgernn_step
    (in cluster cycles) and the cluster's own work on its PULP counter. The first holds the second and
    the dispatch around it: more, but the same order. EDGERNN_CYCLES_FC=0 makes the step's count the
    cluster's, the same counter as the second, and the bytes do not move."""
    import json

    from edgernn.testing.zoo import trajectories

    from edgernn.tflite.oracle import quantize

    out, n_in = built("lstm64")
    manifest = json.loads((out / "manifest.json").read_text())
    xs = quantize(trajectories(1, VARIANT_STEPS, n_in, 7)[0], manifest["inputs"][0])
    whole, _, _ = run_variant(out, {}, xs, tmp_path / "default")
    cluster, _, _ = run_variant(out, {"EDGERNN_CYCLES_FC": 0}, xs, tmp_path / "cluster")
    assert np.array_equal(whole.outputs, cluster.outputs) and np.array_equal(whole.states, cluster.states)
    assert whole.team_cycles is not None and len(whole.team_cycles) == len(whole.cycles) == VARIANT_STEPS
    assert np.all(whole.team_cycles < whole.cycles)
    task, step = np.median(whole.team_cycles[2:]), np.median(whole.cycles[2:])
    assert task < step < 2 * task
    assert np.array_equal(cluster.cycles, cluster.team_cycles)


def test_a_device_reset_mid_sequence_is_caught(built, tmp_path):
    """GVSOC restarted mid-sequence (a new simulator on the same port; the host reconnects as to a
    UART adapter that stays while the board resets): the host says so, it never passes."""
    from edgernn.targets import device as devices
    from edgernn.errors import LinkError
    from edgernn.link import LinkClient, open_port
    from faults import FaultPlan, FaultyPort

    out, n_in = built("gru")
    board = devices.load_board(BOARD)
    elf = devices.find_firmware(out, board)
    with devices.start(elf, board) as device:
        port = None

        def power_cycle():
            device.restart()
            port.inner.close()
            port.inner = open_port(device.url, board["serial"]["baud"])
            LinkClient(port.inner, url=device.url).wait_ready(board["emulator"]["start_timeout_s"])

        port = FaultyPort(open_port(device.url, board["serial"]["baud"]), FaultPlan(reset_at_write=5),
                          reset_device=power_cycle)
        link = LinkClient(port, url=device.url, timeout=board["serial"]["timeout_s"], retries=2)
        link.wait_ready(board["emulator"]["start_timeout_s"])
        link.hello()
        xs = np.zeros((400, n_in), np.int8)
        with pytest.raises(LinkError, match="restarted during the sequence .* its state is lost"):
            link.run(xs, states="every", steps_per_frame=20)
        link.close()


OTHER_SDKS = [p for p in gap_sdk_params() if p.values[0] is not None] or [
    pytest.param(None, marks=pytest.mark.skip(reason="no other GAP SDK named in $EDGERNN_TEST_GAP_SDKS"))]


@pytest.mark.parametrize("sdk", OTHER_SDKS)
def test_validates_on_gvsoc_built_from_another_sdk(sdk, tmp_path, monkeypatch):
    """The whole flow with another SDK a user has (CI: 4.8.0, Bitcraze's docker image, as upstream ships
    it): GVSOC built from it with edgernn's corrections passes its UART self-test, and a model built
    against it validates with every byte equal to the interpreter."""
    from edgernn.testing.zoo import trajectories

    from edgernn.pipeline.build import build_model as build_folder
    from edgernn.targets.gap8 import sdk as gap_sdk
    from edgernn.targets.gap8.gvsoc import gvsoc_marker
    from edgernn.validate.run import validate

    home = require_gap_sdk_at(sdk)
    monkeypatch.setenv("GAP_SDK_HOME", str(home))
    install = gap_sdk.build_gvsoc()
    marker = gvsoc_marker(install)
    # the entry is keyed by content: it may have been built from another copy of the same SDK
    assert marker["key"] == gap_sdk.sdk_key(home) and marker["selftest"]["mismatches"] == 0
    model, n_in = gap8_model("gru")
    path = tmp_path / "gru.keras"
    model.save(path)
    result = build_folder(str(path), tmp_path / "out", board=BOARD, quant="int8", calib=trajectories(8, 80, n_in, 1))
    assert result["manifest"]["firmware"]["built"]
    report = validate(tmp_path / "out", data=trajectories(1, VARIANT_STEPS, n_in, 9))
    ref = report["reference"]
    assert report["pass"] and ref["mismatches"] == 0 and ref["state_mismatches"] == 0, ref

