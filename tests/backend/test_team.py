"""The team: heavy kernels split by output range across 1, 2 and 8 workers give the same bytes as the
interpreter, and a ThreadSanitizer build of the thread team reports nothing. The fused LSTM
(UNIDIRECTIONAL_SEQUENCE_LSTM) splits its units at every time step; its float32 build gives the same
bytes for every number of workers, within 1e-5 of the interpreter.

The host board's portable team is serial unless compiled with -DEDGERNN_THREADS=N; the GAP8 team
(templates/targets/gap8/hal/edgernn_team.c) uses the same sub-range arithmetic (edgernn_team_range) and the
same team kernels, on the cluster.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess

import numpy as np
import pytest

from edgernn.testing import backend_harness as H
from conftest import tool_unavailable
from edgernn.testing import zoo

WORKERS = (1, 2, 8)

pytestmark = pytest.mark.slow


def wide_lstm(seed: int = 0):
    return zoo.lstm_dense(40, 4, 5, "team_lstm", seed)


def gru_stack(seed: int = 0):
    keras = zoo._keras(seed)
    L = keras.layers
    return keras.Sequential([keras.Input((None, 3)), L.GRU(20, return_sequences=True),
                             L.GRU(9, reset_after=False, return_sequences=True)], name="team_gru")


MODELS = {"lstm": wide_lstm, "gru": gru_stack, "ltc": zoo.ltc_wired}
# what each model's schedule shares: FULLY_CONNECTEDs, or an LTC's int16 synapse SUMs (12 outputs, each over the
# synapses onto a neuron)
SHARED = {"lstm": "edgernn_team_fully_connected_", "gru": "edgernn_team_fully_connected_", "ltc": "edgernn_team_sum_s16("}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    from edgernn.pipeline.convert import convert

    cache = {}

    def get(name: str, quant: str, mode: str = "step"):
        if (name, quant, mode) not in cache:
            out = tmp_path_factory.mktemp(f"team_{name}_{quant}_{mode}") / "out"
            with contextlib.redirect_stdout(io.StringIO()):
                convert(MODELS[name](), out, quant=quant, mode=mode)
            cache[(name, quant, mode)] = out
        return cache[(name, quant, mode)]

    return get


def _inputs(folder, steps: int = 60):
    n = int(H.load_interpreter(folder / "step.tflite").get_signature_runner("serving_default")
            .get_input_details()["x"]["shape"][-1])
    return H.quantize_x(folder, zoo.trajectories(1, steps, n, seed=4)[0] * 1.5)


@pytest.mark.toolchain
@pytest.mark.parametrize("name,quant", [("lstm", "int8"), ("lstm", "int16"), ("gru", "int16"), ("gru", "int8"),
                                       ("ltc", "int16")])
def test_workers_give_identical_bytes(converted, name, quant, tmp_path):
    folder = converted(name, quant)
    xq = _inputs(folder)
    ref, _ = H.reference_bytes(folder, xq)
    results = {}
    for n in WORKERS:
        b = H.build(folder, cflags=["-O2", f"-DEDGERNN_THREADS={n}", "-pthread"], name=f"driver_t{n}")
        model_c = (folder / "firmware" / "model.c").read_text()
        assert SHARED[name] in model_c, f"the schedule shares no {SHARED[name]}"
        got, _ = H.run_driver(b.exe, xq, ref.shape[1], tmp_path)
        results[n] = got
        assert H.compare(got, ref, quant)["mismatches"] == 0, f"{n} workers differ from the interpreter"
    assert all(np.array_equal(results[1], results[n]) for n in WORKERS)
    assert len({bytes(r) for r in ref}) > xq.shape[0] // 4


def _matches_interpreter(folder, got, ref, quant) -> bool:
    if quant == "float32":
        return H.compare_float_per_tensor(got, ref, H.tensor_sizes(folder, ref.shape[1] // 4))["not_close"] == 0
    return H.compare(got, ref, quant)["mismatches"] == 0


@pytest.mark.toolchain
@pytest.mark.parametrize("quant", ["int8", "float32"])
def test_fused_lstm_workers_give_identical_bytes(converted, quant, tmp_path):
    """The fused LSTM's units split at every step: every worker reads the whole previous h, so a
    worker that published its part of h early would change the others' gates."""
    folder = converted("lstm", quant, "fused")
    xq = _inputs(folder)
    ref, _ = H.reference_bytes(folder, xq)
    results = {}
    for n in WORKERS:
        b = H.build(folder, cflags=["-O2", f"-DEDGERNN_THREADS={n}", "-pthread"], name=f"driver_t{n}")
        assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in b.facts.ops
        model_c = (folder / "firmware" / "model.c").read_text()
        assert ("edgernn_team_lstm_s8(" if quant == "int8" else "edgernn_team_lstm_f32(") in model_c
        got, _ = H.run_driver(b.exe, xq, ref.shape[1], tmp_path)
        results[n] = got
        assert _matches_interpreter(folder, got, ref, quant), f"{n} workers differ from the interpreter"
    assert all(np.array_equal(results[1], results[n]) for n in WORKERS)
    assert len({bytes(r) for r in ref}) > xq.shape[0] // 4


def test_sub_ranges_cover_the_output_once():
    """The split arithmetic of edgernn_team_range, mirrored: disjoint, in order, grain-aligned, complete."""
    def team_range(k, n, count, grain):
        units = (count + grain - 1) // grain
        first, last = units * k // n, units * (k + 1) // n
        return min(first * grain, count), min(last * grain, count)

    for count in (1, 3, 4, 7, 8, 9, 64, 97, 256):
        for grain in (1, 4):
            for n in (1, 2, 3, 8):
                ranges = [team_range(k, n, count, grain) for k in range(n)]
                assert ranges[0][0] == 0 and ranges[-1][1] == count
                assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
                assert all(b % grain == 0 for b, _ in ranges if b < count)
    from edgernn.backend.kernel_sources import render_sources

    header = render_sources()["edgernn_team.h"]
    assert "(int64_t)units * k / n" in header and "(int64_t)units * (k + 1) / n" in header


@pytest.mark.toolchain
def test_thread_sanitizer_reports_nothing(converted, tmp_path):
    probe = tmp_path / "race.c"
    probe.write_text("#include <pthread.h>\nint x;\nstatic void *f(void *a) { x++; return a; }\n"
                     "int main(void) { pthread_t t; pthread_create(&t, 0, f, 0); x++; pthread_join(t, 0); "
                     "return 0; }\n")
    tsan = ["-fsanitize=thread", "-g", "-O1", "-pthread"]
    built = subprocess.run(["gcc", *tsan, str(probe), "-o", str(tmp_path / "race")], capture_output=True, text=True)
    if built.returncode != 0:
        tool_unavailable(f"gcc cannot build with -fsanitize=thread here: {built.stderr.strip()[:200]}")
    control = subprocess.run([str(tmp_path / "race")], capture_output=True, text=True)
    command_prefix = []
    if "ThreadSanitizer" not in control.stderr:
        # Some kernels' address-space randomisation defeats TSan's memory map; setarch -R turns it off.
        command_prefix = ["setarch", "-R"]
        control = subprocess.run(command_prefix + [str(tmp_path / "race")], capture_output=True, text=True)
    assert "WARNING: ThreadSanitizer: data race" in control.stderr, "TSan does not work here: " + control.stderr[:300]

    for name, quant, mode in (("lstm", "int8", "step"), ("gru", "int16", "step"), ("lstm", "int8", "fused")):
        folder = converted(name, quant, mode)
        b = H.build(folder, cflags=[*tsan, "-DEDGERNN_THREADS=8"], name="driver_tsan")
        xq = _inputs(folder, steps=25)
        ref, _ = H.reference_bytes(folder, xq)
        inp, out = tmp_path / "tsan.in", tmp_path / "tsan.out"
        inp.write_bytes(np.int32(xq.shape[0]).tobytes() + np.ascontiguousarray(xq).tobytes())
        env = dict(os.environ, TSAN_OPTIONS="halt_on_error=0 exitcode=66")
        proc = subprocess.run(command_prefix + [str(b.exe), str(inp), str(out)], capture_output=True, text=True,
                              env=env)
        assert "ThreadSanitizer" not in proc.stderr, proc.stderr[:2000]
        assert proc.returncode == 0, proc.stderr[:500]
        if mode == "fused":
            assert "edgernn_team_lstm_s8(" in (folder / "firmware" / "model.c").read_text()
        got = np.frombuffer(out.read_bytes(), np.uint8).reshape(xq.shape[0], -1)
        assert H.compare(got, ref, quant)["mismatches"] == 0
