"""The fused LSTM (UNIDIRECTIONAL_SEQUENCE_LSTM) in generated C against the LiteRT interpreter.

The models are tf_keras LSTMs converted by TFLiteConverter.from_keras_model, the path on which TF emits
the fused op. The state lives in the op's two variable tensors: the interpreter keeps them between
invokes and the firmware keeps them in its state buffer; both are compared after every invoke, with y,
byte for byte (int8) or within 1e-5 relative to the tensor's magnitude (float32, see
H.compare_float_per_tensor). Whole-sequence models (time > 1) run the kernel's own time loop; time = 1
models are streamed one step per invoke.
"""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

from edgernn.backend.kernels import call_args
from edgernn.errors import EdgeRNNError
from edgernn.testing import backend_harness as H
from edgernn.testing import zoo

FEATURES = zoo.FUSED_FEATURES


# name: (time, units, return_sequences, dense before, dense after), then zoo.fused_lstm / zoo.write_fused_lstm options.
# Cell state scales the int8 conversions get (the integer tanh of c has 15 + log2(scale) integer bits):
# seq8_* and stream_u16 2^-15; stream_u64 2^-16, where TFLite skips tanh(c) (docs/ops.md);
# seq16_bigcell 2^-11. seq4_u13: 13 units, so gate rows past the last multiple of 4 and recurrent rows
# that start off a word.
MODELS = {
    "seq8_u16_all": ((8, 16, True, True, True), {}, {}),
    "seq4_u13": ((4, 13, True, True, True), {}, {}),
    "seq8_u64_last": ((8, 64, False, False, True), {}, {}),
    "stream_u16": ((1, 16, True, True, True), {}, {}),
    "stream_u64": ((1, 64, True, False, False), {}, {}),
    "seq16_bigcell": ((16, 16, True, False, True), {"kernel_std": 2.0}, {"calib_offset": 2.0}),
}
CASES = [(name, quant) for name in MODELS for quant in ("int8", "float32") if (name, quant) != ("seq16_bigcell", "float32")]


@pytest.fixture(scope="module")
def fused(tmp_path_factory):
    cache = {}

    def get(name: str, quant: str):
        if (name, quant) not in cache:
            (time, units, seqs, before, after), model_opts, calib_opts = MODELS[name]
            folder = tmp_path_factory.mktemp(f"fused_{name}_{quant}") / "out"
            zoo.write_fused_lstm(folder, zoo.fused_lstm(time, units, seqs, before, after, **model_opts), quant, time, **calib_opts)
            cache[(name, quant)] = H.build(folder)
        return cache[(name, quant)]

    return get


def _inputs(time: int, invokes: int, seed: int) -> dict[str, np.ndarray]:
    """A smooth trajectory, and wide noise that drives the gates and the cell into saturation."""
    steps = time * invokes
    trajectory = zoo.trajectories(1, steps, FEATURES, seed=seed)[0] * 2.0
    noise = np.random.default_rng(seed).normal(0.0, 2.5, (steps, FEATURES)).astype(np.float32)
    return {name: xs.reshape(invokes, time * FEATURES) for name, xs in
            (("trajectory", trajectory), ("noise", noise))}


@pytest.mark.slow
@pytest.mark.toolchain
@pytest.mark.parametrize("name,quant", CASES)
def test_fused_lstm_matches_interpreter(fused, name, quant, record_property):
    b = fused(name, quant)
    time = MODELS[name][0][0]
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in b.facts.ops
    for label, xs in _inputs(time, 160 // time, seed=7).items():
        xq = H.quantize_x(b.folder, xs)
        ref, _ = H.reference_bytes(b.folder, xq)
        got, _ = H.run_driver(b.exe, xq, ref.shape[1], b.folder)
        if quant == "float32":
            stats = H.compare_float_per_tensor(got, ref, H.tensor_sizes(b.folder, ref.shape[1] // 4))
            record_property(f"{label}", stats)
            assert stats["not_close"] == 0, f"{name} {label}: {stats}"
        else:
            stats = H.compare(got, ref, quant)
            record_property(f"{label}", stats)
            assert stats["mismatches"] == 0, f"{name} {label}: {stats}"
        # the state carries over between invokes and really moves
        assert len({bytes(r) for r in ref}) > xs.shape[0] // 2


@pytest.mark.slow
@pytest.mark.toolchain
@pytest.mark.parametrize("name", ["seq8_u16_all", "seq4_u13"])
def test_int8_gate_dot_product_paths_are_byte_exact(fused, name):
    """The gates' dot products (edgernn_dot.h, shared with FULLY_CONNECTED) built for a scalar core
    (EDGERNN_FC_SCALAR, with the 32-bit cores' rescale, EDGERNN_LSTM_SCALE32) and on GAP8's Xpulp
    path, with the C emulation of its builtin and with GCC vectors: the same bytes as the portable
    build and as the interpreter. Inputs of 5 features, 13 units: dot products with tails, rows past
    the last multiple of 4, unaligned rows."""
    folder = fused(name, "int8").folder
    variants = {"portable": [], "scalar": ["-DEDGERNN_FC_SCALAR", "-DEDGERNN_LSTM_SCALE32"],
                "emulated": ["-DEDGERNN_XPULP_EMULATE"], "vector": ["-DEDGERNN_XPULP=1", H.VECTOR_SDOTSP4]}
    builds, objects = {}, {}
    for label, flags in variants.items():
        builds[label] = H.build(folder, cflags=["-O2", *flags], name=f"driver_dot_{label}", kernels=H.kernel_set_of(flags))
        objects[label] = builds[label].object_of("edgernn_lstm.c").read_bytes()
    # the macros select other code, or the comparison below would prove nothing
    assert all(objects[k] != objects["portable"] for k in variants if k != "portable")
    time = MODELS[name][0][0]
    for label, xs in _inputs(time, 64 // time, seed=11).items():
        xq = H.quantize_x(folder, xs)
        ref, _ = H.reference_bytes(folder, xq)
        got = {k: H.run_driver(b.exe, xq, ref.shape[1], folder)[0] for k, b in builds.items()}
        for k in variants:
            assert np.array_equal(got[k], got["portable"]), f"{name} {label}: {k} differs from portable"
        assert H.compare(got["portable"], ref, "int8")["mismatches"] == 0


@pytest.mark.slow
@pytest.mark.toolchain
def test_int8_cases_cover_three_cell_scales(fused):
    """The exactness cases above reach tanh(c) with 0 and 4 integer bits, and the cell scale
    (2^-16) where TFLite's ApplyTanh writes nothing and h becomes o * i."""
    from edgernn.backend.reader import read_tflite

    found = {}
    for name in ("stream_u16", "stream_u64", "seq16_bigcell"):
        graph = read_tflite(fused(name, "int8").folder / "step.tflite")
        lstm = next(op for op in graph.operators if op.op == "UNIDIRECTIONAL_SEQUENCE_LSTM")
        found[name] = int(np.log2(graph.tensors[lstm.inputs[19]].scale[0]))
    assert found == {"stream_u16": -15, "stream_u64": -16, "seq16_bigcell": -11}


@pytest.mark.slow
@pytest.mark.toolchain
def test_state_is_the_variable_tensors_in_manifest_order(fused):
    b = fused("stream_u16", "int8")
    header = (b.folder / "firmware" / "model.h").read_text()
    assert '#define EDGERNN_STATE0_NAME "lstm.h"' in header and '#define EDGERNN_STATE1_NAME "lstm.c"' in header
    # int8 h (16 bytes) then int16 c (32 bytes)
    assert "#define EDGERNN_STATE0_BYTES 16" in header and "#define EDGERNN_STATE1_BYTES 32" in header
    assert "#define EDGERNN_STATE_BYTES 48 " in header


@pytest.mark.slow
@pytest.mark.toolchain
def test_reset_and_set_state_of_a_streamed_lstm(fused):
    """edgernn_reset() restarts like reset_all_variables(); a run resumed from a saved state
    continues exactly like the unbroken run."""
    b = fused("stream_u16", "int8")
    xq = H.quantize_x(b.folder, _inputs(1, 60, seed=3)["trajectory"])
    ref, _ = H.reference_bytes(b.folder, xq)

    from edgernn.tflite.interpreter import load_interpreter

    interp = load_interpreter(b.folder / "step.tflite")
    runner = interp.get_signature_runner("serving_default")
    for t in range(10):
        runner(x=xq[t].reshape(1, 1, FEATURES))
    interp.reset_all_variables()
    again = runner(x=xq[0].reshape(1, 1, FEATURES))["y"].reshape(-1).view(np.uint8)
    assert np.array_equal(again, ref[0, : again.size])

    first, _ = H.run_driver(b.exe, xq[:1], ref.shape[1], b.folder)
    assert np.array_equal(first[0], ref[0])
    k = 23
    y_bytes = ref.shape[1] - 48
    saved = ref[k - 1, y_bytes:]
    inp, out = b.folder / "resume.in.bin", b.folder / "resume.out.bin"
    tail = xq[k:]
    inp.write_bytes(np.int32(len(tail)).tobytes() + tail.tobytes() + saved.tobytes())
    subprocess.run([str(b.exe), str(inp), str(out)], check=True, capture_output=True)
    got = np.frombuffer(out.read_bytes(), np.uint8).reshape(len(tail), -1)
    assert np.array_equal(got, ref[k:])


@pytest.mark.slow
@pytest.mark.toolchain
def test_validation_server_streams_the_variable_states(fused, tmp_path):
    """The host-board firmware behind its serial link: the handshake counts h and c in the state
    bytes, and every step's state read over the link equals the interpreter's variable tensors."""
    from edgernn.targets import device as devices
    from edgernn.link.client import LinkClient

    b = fused("stream_u16", "int8")
    elf = devices.build_elf(b.folder / "firmware", "host", build_dir=tmp_path / "build").elf
    xq = H.quantize_x(b.folder, _inputs(1, 40, seed=9)["noise"])
    ref, _ = H.reference_bytes(b.folder, xq)
    with devices.start(elf, "host") as device, LinkClient.open(device.url) as link:
        info = link.hello()
        assert info.state_bytes == 48
        run = link.run(xq, states="every")
        link.bye()
    y_bytes = ref.shape[1] - 48
    assert np.array_equal(run.outputs.reshape(len(xq), -1).view(np.uint8), ref[:, :y_bytes])
    assert np.array_equal(run.states, ref[:, y_bytes:])


@pytest.mark.slow
@pytest.mark.toolchain
def test_sanitizers_report_nothing_on_the_fused_lstm(fused, tmp_path):
    folder = fused("seq8_u16_all", "int8").folder
    b = H.build(folder, cflags=["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                                "-fno-omit-frame-pointer"], name="driver_asan")
    xq = H.quantize_x(folder, _inputs(8, 12, seed=5)["noise"])
    ref, _ = H.reference_bytes(folder, xq)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1")
    got, stderr = H.run_driver(b.exe, xq, ref.shape[1], tmp_path, env=env)
    assert "runtime error" not in stderr and "AddressSanitizer" not in stderr, stderr
    assert H.compare(got, ref, "int8")["mismatches"] == 0


@pytest.mark.slow
@pytest.mark.toolchain
def test_a_state_missing_from_the_manifest_is_refused(fused, tmp_path):
    from edgernn.backend import generate_firmware
    from edgernn.targets.board import load_board

    src = fused("stream_u16", "float32").folder
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "step.tflite").write_bytes((src / "step.tflite").read_bytes())
    manifest = json.loads((src / "manifest.json").read_text())
    manifest["states"] = manifest["states"][:1]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(EdgeRNNError, match=r"variable tensor \d+ .*does not list it among the states"):
        generate_firmware(folder, load_board("host"))
    assert not (folder / "firmware" / "model.c").exists()


@pytest.mark.slow
def test_lstm_without_bias_is_not_fused_by_tf(tmp_path):
    """use_bias=False: TF's converter emits a WHILE loop in float (and crashes in int8), so the
    backend gets no fused op and says why in one line."""
    from edgernn.backend import generate_firmware
    from edgernn.targets.board import load_board

    folder = zoo.write_fused_lstm(tmp_path / "out", zoo.fused_lstm(4, 8, True, False, True, use_bias=False), "float32", 4)
    with pytest.raises(EdgeRNNError, match="subgraphs"):
        generate_firmware(folder, load_board("host"))


@pytest.mark.toolchain
@pytest.mark.parametrize("variant", [
    ["-O2"],                            # the 4 KiB exp table, the reciprocal by division and bit table
    ["-O2", "-DEDGERNN_LSTM_NEWTON"],   # the 4 KiB exp table, the Newton steps
    ["-Os"],                            # EDGERNN_LSTM_SMALL_TABLES: the 2 KiB exp table, the Newton steps
], ids=["speed", "newton", "size"])
def test_fixed_point_logistic_and_tanh_equal_gemmlowp_on_every_input(variant, tmp_path):
    """The kernel's sigmoid and tanh against gemmlowp's fixedpoint.h as TensorFlow ships it
    (include/external/gemmlowp), compiled with g++: all 65,536 inputs, the gates' sigmoid and tanh
    (Q3.12) and tanh(c) with 0 to 6 integer bits, and the reciprocal after their exp on all 32,768 exp
    values; for each way the kernel can be built (its tables and reciprocal depend on it)."""
    import importlib.util
    from pathlib import Path

    from conftest import require_tools, tool_unavailable

    require_tools("gcc", "g++")
    spec = importlib.util.find_spec("tensorflow")
    gemmlowp = Path(spec.submodule_search_locations[0]) / "include" / "external" / "gemmlowp"
    if not (gemmlowp / "fixedpoint" / "fixedpoint.h").is_file():
        tool_unavailable(f"no gemmlowp headers under {gemmlowp}")
    from edgernn.backend.kernel_sources import write_sources

    kernels = Path(__file__).resolve().parents[2] / "templates" / "kernels"
    generated = tmp_path / "generated"          # the headers the kernel table generates
    generated.mkdir()
    write_sources(generated)
    c_dir = Path(__file__).resolve().parents[1] / "c"
    subprocess.run(["gcc", "-std=c99", *variant, "-I", str(generated), "-I", str(kernels), "-c", str(c_dir / "lstm_fx_shim.c"),
                    "-o", str(tmp_path / "shim.o")], check=True)
    subprocess.run(["g++", "-std=c++17", "-O2", "-I", str(gemmlowp), str(c_dir / "lstm_fx_check.cc"),
                    str(tmp_path / "shim.o"), "-o", str(tmp_path / "check"), "-lm"], check=True)
    proc = subprocess.run([str(tmp_path / "check")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.split() == ["reciprocal", "0", "logistic", "0", "tanh_q3", "0", "tanh"] + ["0"] * 7


@pytest.mark.toolchain
@pytest.mark.parametrize("compiler", ["gcc", "clang"])
@pytest.mark.parametrize("flags", [["-O2"], ["-O2", "-DEDGERNN_LSTM_NEWTON"], ["-Os", "-DEDGERNN_LSTM_SMALL_TABLES"]],
                         ids=["speed", "newton", "size"])
def test_the_lstm_kernel_compiles_warning_free_in_every_variant(compiler, flags, tmp_path):
    """Each way edgernn_lstm.c can be built leaves no helper unused: the host board's -Werror flags stop a
    build on the static function a variant does not call (clang warns where gcc does not)."""
    from pathlib import Path

    from conftest import require_tools
    from edgernn.backend.kernel_sources import write_sources

    require_tools(compiler)
    kernels = Path(__file__).resolve().parents[2] / "templates" / "kernels"
    write_sources(tmp_path)
    cmd = [compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", *flags, f"-I{kernels}", f"-I{tmp_path}",
           "-c", str(kernels / "edgernn_lstm.c"), "-o", str(tmp_path / "lstm.o")]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


@pytest.mark.toolchain
def test_32_bit_gate_rescale_equals_multiply_by_quantized_multiplier(tmp_path):
    """lstm_scaled as a 32-bit core builds it (-DEDGERNN_LSTM_SCALE32: the product's high word, no
    64-bit shift) against TFLite's MultiplyByQuantizedMultiplier written out, on the edges of int32 and
    40 million pseudo-random operands (tests/c/lstm_scale_check.c)."""
    from pathlib import Path

    from conftest import require_tools
    from edgernn.backend.kernel_sources import write_sources

    require_tools("gcc")
    kernels = Path(__file__).resolve().parents[2] / "templates" / "kernels"
    generated = tmp_path / "generated"
    generated.mkdir()
    write_sources(generated)
    src = Path(__file__).resolve().parents[1] / "c" / "lstm_scale_check.c"
    subprocess.run(["gcc", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic", "-DEDGERNN_LSTM_SCALE32",
                    "-I", str(generated), "-I", str(kernels), str(src), "-o", str(tmp_path / "check"), "-lm"],
                   check=True)
    proc = subprocess.run([str(tmp_path / "check")], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.split() == ["0"], proc.stdout


# ---- what the lowering refuses, on hand-made graphs (no TensorFlow, no compiler) ----

def _lstm_graph(quant: str = "int8", n_in: int = 3, n_cell: int = 4, time: int = 2, batch: int = 1):
    from edgernn.backend.ir import Graph, Operator, Tensor

    rng = np.random.default_rng(0)
    f = quant == "float32"
    tensors = []

    def add(dtype, shape, scale=None, zp=0, data=None, variable=False):
        q = (None, None) if f or scale is None else (np.float32([scale]), np.int64([zp]))
        tensors.append(Tensor(len(tensors), f"t{len(tensors)}", dtype, shape, q[0], q[1], 0, data, variable))
        return len(tensors) - 1

    x = add("float32" if f else "int8", (batch, time, n_in), 0.05, 3)
    weights = [add("float32" if f else "int8", shape, 0.01, 0,
                   rng.normal(0, 0.5, shape).astype(np.float32) if f else rng.integers(-127, 128, shape).astype(np.int8))
               for shape in [(n_cell, n_in)] * 4 + [(n_cell, n_cell)] * 4]
    biases = [add("float32" if f else "int32", (n_cell,), 0.0005, 0,
                  np.zeros(n_cell, np.float32 if f else np.int32)) for _ in range(4)]
    h = add("float32" if f else "int8", (batch, n_cell), 0.008, -2, variable=True)
    c = add("float32" if f else "int16", (batch, n_cell), 2.0 ** -15, 0, variable=True)
    out = add("float32" if f else "int8", (batch, time, n_cell), 0.008, -2)
    inter = [add("float32", (0,)) for _ in range(4)] + [add("int8", (0,), 0.008, -2)]
    inputs = [x] + weights + [-1, -1, -1] + biases + [-1, -1, h, c, -1, -1, -1, -1]
    op = Operator(0, "UNIDIRECTIONAL_SEQUENCE_LSTM", inputs, [out],
                  {"fusedActivationFunction": 4, "cellClip": 10.0, "timeMajor": False}, [] if f else inter)
    return Graph(tensors, [op], {"x": x}, {"y": out}, "0" * 64)


def _lower(graph):
    from edgernn.backend.lowering import Lowering

    return Lowering(graph, "edgernn_step").lower()


@pytest.mark.parametrize("quant", ["int8", "float32"])
def test_a_plain_lstm_lowers_to_one_kernel_call(quant):
    (call,) = _lower(_lstm_graph(quant))
    assert call.fn == ("edgernn_lstm_s8" if quant == "int8" else "edgernn_lstm_f32")
    # float32: the 4 * n_cell gates; int8: only the n_cell new hidden values (the gates stay in registers)
    assert call.scratch[1] == (4 * 2 if quant == "int8" else 4 * 4 * 4)
    assert call_args(call)["steps"] == 2      # the kernel runs the two time steps itself


@pytest.mark.parametrize("quant", ["int8", "float32"])
def test_the_team_shares_an_lstm_of_at_least_min_count_gate_rows(quant, tmp_path):
    """Its units are the split range, its size its gate rows (4 per unit); the team version lives in
    edgernn_lstm.c, which is then copied."""
    from edgernn.backend.codegen import copy_kernels
    from edgernn.backend.parallel import share_calls

    suffix = "s8" if quant == "int8" else "f32"
    (narrow,) = _lower(_lstm_graph(quant, n_cell=12))
    (wide,) = _lower(_lstm_graph(quant, n_cell=16))
    assert share_calls([narrow, wide], 64) == [wide.op_index]
    assert narrow.fn == f"edgernn_lstm_{suffix}" and wide.fn == f"edgernn_team_lstm_{suffix}"
    assert "edgernn_lstm.c" in copy_kernels(tmp_path, None, {wide.fn})
    assert (tmp_path / "edgernn_lstm.c").is_file()
    assert "edgernn_lstm.c" not in copy_kernels(tmp_path, None, {"edgernn_fully_connected_s8"})
    assert not (tmp_path / "edgernn_lstm.c").exists()


def test_int8_constants_follow_tflite_prepare():
    """Zero points folded into the biases, effective scales in float, cell clip 10 / 2^-15 saturated."""
    from edgernn.backend import quantparams as qp

    graph = _lstm_graph("int8")
    (call,) = _lower(graph)
    arrays = {a.name.rsplit("_op0_", 1)[1]: a for a in call.arrays}
    # the int8 kernel's rows are unit-major: unit u's gate g is row 4 * u + g
    w_f = graph.tensors[2].data.astype(np.int64)
    assert arrays["bias_in"].values[1::4] == [int(v) for v in -3 * w_f.sum(axis=1)]
    w_rec_i = graph.tensors[5].data.astype(np.int64)
    assert arrays["bias_rec"].values[0::4] == [int(v) for v in 2 * w_rec_i.sum(axis=1)]
    fields = call.structs[0].fields
    assert fields[2][0] == qp.quantize_multiplier(qp.f32(np.float32(np.float32(0.01) * np.float32(0.05)) / np.float32(2.0 ** -12)))[0]
    assert fields[-3:] == [15, 0, 32767]


@pytest.mark.parametrize("change,why", [
    (lambda g: g.operators[0].inputs.__setitem__(1, -1), "CIFG"),
    (lambda g: g.operators[0].inputs.__setitem__(10, 1), "peephole"),
    (lambda g: g.operators[0].inputs.__setitem__(16, 1), "projection"),
    (lambda g: g.operators[0].inputs.__setitem__(21, 13), "layer normalization"),
    (lambda g: g.operators[0].options.__setitem__("fusedActivationFunction", 1), "other than tanh"),
    (lambda g: setattr(g.tensors[13], "is_variable", False), "must be a variable tensor"),
    (lambda g: setattr(g.tensors[14], "scale", np.float32([0.0001])), "not a power of two"),
    (lambda g: g.operators[0].intermediates.clear(), "intermediates"),
])
def test_lstm_variants_outside_the_kernel_are_refused(change, why):
    from edgernn.backend.lowering import Unsupported

    graph = _lstm_graph("int8")
    change(graph)
    with pytest.raises(Unsupported, match=rf"op 0 \(UNIDIRECTIONAL_SEQUENCE_LSTM\) .*{why}"):
        _lower(graph)


def test_time_major_input_runs_its_first_dimension_as_time():
    graph = _lstm_graph("float32", time=5)
    x = graph.tensors[0]
    x.shape = (5, 1, x.shape[2])
    graph.operators[0].options["timeMajor"] = True
    (call,) = _lower(graph)
    assert call_args(call)["steps"] == 5


def test_a_batch_of_two_is_refused():
    from edgernn.backend.lowering import Unsupported

    with pytest.raises(Unsupported, match="only batch 1"):
        _lower(_lstm_graph("float32", batch=2))
