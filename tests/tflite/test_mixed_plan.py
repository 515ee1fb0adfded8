"""--quant auto: mixed int8/16x8 step models that LiteRT runs, and the plan that meets the error budget."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from edgernn.cli.main import cli
from edgernn.pipeline.convert import convert as convert_folder
from edgernn.testing import zoo
from edgernn.tflite import mixed
from edgernn.tflite import model as tfl
from edgernn.tflite.interpreter import load_interpreter

pytestmark = pytest.mark.slow

MODELS = {"simplernn_relu": zoo.simplernn_relu, "ltc_dense": zoo.ltc_dense, "cfc_wired_pure": zoo.cfc_wired_pure,
          "rnn_lstmcell_bn": zoo.rnn_lstmcell_bn,   # a sigmoid LSTMCell, whose SPLIT MLIR renames
          "ltc_dense_div": zoo.ltc_dense,           # the LTC with its divisions kept: DIVs TF has no 16x8 form of
          "tanh_cfc": zoo.tanh_cfc}                 # a requantizing QUANTIZE in both models (a TANH before a concat)


def budget_error(manifest) -> float:
    """The error --max-error bounds, as convert's own check of step.tflite measures it."""
    error = manifest.quantization_error
    return max(error["l2r"], error["sequence_l2r"])


def _convert(name, folder, max_error):
    """Convert with --quant auto, keeping the int8/16x8 pair the plan was made from."""
    pairs = []
    real = mixed.quantize_pair

    def keep(*args, **kwargs):
        pairs.append(real(*args, **kwargs))
        return pairs[-1]

    from edgernn.keras.stepmodel import ltc_without_division
    from edgernn.pipeline import convert

    model = MODELS[name]()
    calib = zoo.trajectories(8, 200, zoo.features_of(model), 0)
    mixed.quantize_pair = keep
    rewrite = convert.StepStrategy.without_division
    if name.endswith("_div"):
        convert.StepStrategy.without_division = lambda self: ltc_without_division(self.plan, active=False)
    try:
        manifest = convert_folder(model, folder, quant="auto", calib=calib, mode="step", max_error=max_error)
    finally:
        mixed.quantize_pair = real
        convert.StepStrategy.without_division = rewrite
    return manifest, pairs[-1], calib, folder   # the pair of the plan (after two-part weights, if tried)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    cache = {}

    def get(name, max_error=0.02):
        if (name, max_error) not in cache:
            cache[(name, max_error)] = _convert(name, tmp_path_factory.mktemp(name), max_error)
        return cache[(name, max_error)]
    return get


def raw_run(data, sequences, ties):
    """Every step's raw y and state bytes, from zero states, x quantized by the model's own x entry."""
    from edgernn.tflite.oracle import quantize

    model = tfl.read(data)
    inputs, _ = tfl.signature(model)
    entries = {k: tfl.tensor_quant(model, i) for k, i in inputs.items()}
    runner = load_interpreter(data).get_signature_runner()
    shapes = {k: v["shape"] for k, v in runner.get_input_details().items()}
    trace = []
    for seq in sequences:
        state = {k: quantize(np.zeros(shapes[k], np.float32), entries[k]) for k, _ in ties}
        for x in seq:
            out = runner(x=quantize(x.reshape(shapes["x"]), entries["x"]), **state)
            state = {k: np.asarray(out[o]) for k, o in ties}
            trace.append((np.asarray(out["y"]).copy(), {k: v.copy() for k, v in state.items()}))
    return trace


def same_trace(a, b):
    return len(a) == len(b) and all(
        ya.dtype == yb.dtype and np.array_equal(ya, yb) and all(np.array_equal(sa[k], sb[k]) for k in sa)
        for (ya, sa), (yb, sb) in zip(a, b))


@pytest.mark.parametrize("name, plan, reference", [
    ("simplernn_relu", "int8", "int8"),
    ("simplernn_relu", "int16", "int16"),
    ("cfc_wired_pure", "int8", "int8"),
    ("cfc_wired_pure", "int16", "int16"),
    ("ltc_dense", "int8", "int8"),
    ("rnn_lstmcell_bn", "int8", "int8"),
    ("rnn_lstmcell_bn", "int16", "int16"),
    ("tanh_cfc", "int8", "int8"),
    ("tanh_cfc", "int16", "int16"),
])
def test_uniform_plan_is_the_uniform_model(converted, name, plan, reference):
    """A plan of all int8 gives the int8 model's bytes at every step; all int16 the 16x8 model's. No seam: a
    QUANTIZE there is the uniform model's own requantization."""
    _, pair, calib, _ = converted(name)
    ops = [] if plan == "int8" else pair.can_int16()
    data = mixed.splice(pair, ops)
    want = raw_run(pair.int8 if reference == "int8" else pair.int16, calib[:2, :50], pair.ties)
    got = raw_run(data, calib[:2, :50], pair.ties)
    assert same_trace(got, want)
    uniform = pair.m8 if plan == "int8" else pair.m16
    assert mixed._seams(tfl.read(data)) == 0
    assert tfl.op_names(tfl.read(data)).count("QUANTIZE") == tfl.op_names(uniform).count("QUANTIZE")
    if name == "tanh_cfc":
        assert "QUANTIZE" in pair.ops


def _tensor(model, index):
    return model.subgraphs[0].tensors[index]


def _seam(model, op) -> bool:
    """A QUANTIZE between int8 and int16: where a mixed model's types meet."""
    a, b = (_tensor(model, op.inputs[0]).type, _tensor(model, op.outputs[0]).type)
    return tfl.op_name(model, op.opcodeIndex) == "QUANTIZE" and a != b and mixed.FLOAT32 not in (a, b)


@pytest.mark.parametrize("name, pick", [("simplernn_relu", "even"), ("cfc_wired_pure", "even"),
                                        ("cfc_wired_pure", "odd"), ("ltc_dense", "all"), ("ltc_dense_div", "all"),
                                        ("rnn_lstmcell_bn", "odd"), ("tanh_cfc", "even"), ("tanh_cfc", "odd")])
def test_mixed_model_takes_each_op_from_its_precision(converted, name, pick):
    """Each op of a mixed model is its precision's op: the same op, constants and output quantization as in
    that model; every QUANTIZE gives its output the quantization the reading op's model has; LiteRT runs it."""
    _, pair, calib, _ = converted(name)
    can = pair.can_int16()
    chosen = {"even": can[::2], "odd": can[1::2], "all": can}[pick]
    data = mixed.splice(pair, chosen)
    m = tfl.read(data)
    g = m.subgraphs[0]
    made = [op for op in g.operators if not mixed._converts(m, op) and not _seam(m, op)]
    assert [tfl.op_name(m, op.opcodeIndex) for op in made] == pair.ops
    for i, op in enumerate(made):
        source_model = pair.m16 if i in chosen else pair.m8
        twin = (pair.float_op[i] if pair.in_float(i) else pair.int16_op[i]) if i in chosen else i
        source = source_model.subgraphs[0].operators[twin]
        for k_got, k_want in zip([*op.inputs, *op.outputs], [*source.inputs, *source.outputs]):
            if k_want < 0:
                assert k_got == k_want
                continue
            got_q, want_q = tfl.tensor_quant(m, k_got), tfl.tensor_quant(source_model, k_want)
            assert got_q == want_q, (i, pair.ops[i])
            if mixed._is_constant(source_model, k_want):
                assert bytes(m.buffers[_tensor(m, k_got).buffer].data) == bytes(
                    source_model.buffers[_tensor(source_model, k_want).buffer].data)
    quantizes = [op for op in g.operators if _seam(m, op)]     # not a float island's, not a requantization
    for op in quantizes:
        a, b = tfl.tensor_quant(m, op.inputs[0]), tfl.tensor_quant(m, op.outputs[0])
        assert {a["dtype"], b["dtype"]} == {"int8", "int16"}
        name_of = _tensor(m, op.outputs[0]).name.decode().removesuffix(f"_{b['dtype']}")
        t8 = next(t for t, tensor in enumerate(pair.m8.subgraphs[0].tensors) if tensor.name.decode() == name_of)
        want = tfl.tensor_quant(pair.m16, pair.map16[t8]) if b["dtype"] == "int16" else tfl.tensor_quant(pair.m8, t8)
        assert (b["scale"], b["zero_point"]) == (want["scale"], want["zero_point"])
    inputs, outputs = tfl.signature(m)
    for key, out_key in pair.ties:
        assert tfl.tensor_quant(m, inputs[key]) == tfl.tensor_quant(m, outputs[out_key])
    trace = raw_run(data, calib[:1, :20], pair.ties)
    assert len(trace) == 20 and all(np.all(np.isfinite(y)) for y, _ in trace)


def test_plan_meets_the_budget_between_int8_and_int16(converted):
    """A budget between int8's and int16's error: int16 ops where the plan's estimated cost says so, the error
    within the budget, both as the plan measured it and as convert's own check of step.tflite measures it,
    and an estimated cost no dearer than all-int16's."""
    manifest, pair, _, _ = converted("simplernn_relu", 0.01)
    p = manifest.precision
    assert manifest.quant == "auto"
    assert p["int16_error"] < 0.01 < p["int8_error"]
    assert p["met"] and p["error"] <= 0.01
    assert abs(budget_error(manifest) - p["error"]) < 1e-6
    # within the budget over the sequences together and on 3 in 4 of them alone
    assert manifest.quantization_error["l2r"] <= 0.01 and manifest.quantization_error["sequence_l2r"] <= 0.01
    assert 0 < p["int16_ops"] <= len(pair.can_int16())
    assert [r["dtype"] for r in p["plan"]].count("int16") == p["int16_ops"]
    e = p["estimate"]
    assert e["auto"]["cycles_per_step"] <= e["int16"]["cycles_per_step"] and e["auto"]["bytes"] <= e["int16"]["bytes"]
    for state in manifest.states:
        assert state["dtype"] == p["states"][state["name"]]


@pytest.mark.parametrize("budget, int16_ops", [(0.5, "none"), (0.001, "two parts"), (1e-5, "all")])
def test_plan_at_the_ends(converted, budget, int16_ops):
    """A budget int8 meets: the int8 model. One int16 misses: the weights in two parts (tests/tflite/
    test_two_part.py), which meets it. One even that misses: all int16 (of the two-part model), met False."""
    manifest, pair, _, _ = converted("simplernn_relu", budget)
    p = manifest.precision
    if int16_ops == "none":
        assert p["int16_ops"] == 0 and p["met"] and p["error"] == p["int8_error"] and p["two_part_weights"] == []
        return
    assert p["two_part_weights"] and p["note"].startswith("even int16 missed the budget (l2r "), p["note"]
    before = float(p["note"].split("(l2r ")[1].split(")")[0])
    assert p["int16_error"] < before
    if int16_ops == "two parts":
        assert before > budget and p["met"] and p["error"] <= budget
    else:
        assert p["int16_ops"] == len(pair.can_int16()) and not p["met"] and p["error"] == p["int16_error"]


def test_ltc_mixed_model_divides_in_float_between_int16(converted):
    """LTC: TF has no 16x8 DIV; in its 16x8 precision each DIV runs in float32 between int16 tensors (DEQUANTIZE,
    DIV, QUANTIZE, as TF's float fallback made them), in int8 between QUANTIZE seams; the error is below int8's."""
    manifest, pair, _, folder = converted("ltc_dense_div", 0.001)
    p = manifest.precision
    assert pair.float_fallback and p["float_fallback_ops"] == ["DIV"]
    assert p["error"] < p["int8_error"]
    assert list(p["states"].values()) == ["int16"]  # its one state, v, keeps 16 bits
    m = tfl.read((folder / "step.tflite").read_bytes())
    g = m.subgraphs[0]
    divs = [op for op in g.operators if tfl.op_name(m, op.opcodeIndex) == "DIV"]
    assert divs
    floats = 0
    for op in divs:
        dtypes = {tfl.tensor_quant(m, k)["dtype"] for k in [*op.inputs, *op.outputs]}
        assert dtypes in ({"int8"}, {"float32"})
        floats += dtypes == {"float32"}
    assert floats == len(p["float32_ops"]) and sorted(p["float32_ops"]) == \
        sorted(r["op"] for r in p["plan"] if r.get("float32"))
    # the only float tensors are the islands' own: a DIV's operands and quotient
    float_tensors = {k for op in divs for k in [*op.inputs, *op.outputs] if g.tensors[k].type == mixed.FLOAT32}
    assert {k for k, t in enumerate(g.tensors) if t.type == mixed.FLOAT32} == float_tensors


def test_ltc_under_auto_has_no_division(converted):
    """At int16 and auto an LTC's step model divides as numerator * rsqrt(d)^2: no DIV, every op has a 16x8
    form (no float fallback), and the all-int16 plan is the 16x8 model, RSQRT in int16 included."""
    manifest, pair, _, folder = converted("ltc_dense", 0.001)
    p = manifest.precision
    assert not pair.float_fallback and p["float_fallback_ops"] == [] and "DIV" not in pair.ops
    assert pair.can_int16() == list(range(len(pair.ops))) and "RSQRT" in pair.ops
    assert p["error"] < p["int8_error"]
    m = tfl.read((folder / "step.tflite").read_bytes())
    rsqrts = [op for op in m.subgraphs[0].operators if tfl.op_name(m, op.opcodeIndex) == "RSQRT"]
    assert rsqrts and any(tfl.tensor_quant(m, op.outputs[0])["dtype"] == "int16" for op in rsqrts)


@pytest.mark.parametrize("value, says", [
    ("abc", "must be a number"), ("0", "out of range"), ("-0.1", "out of range"), ("nan", "out of range"),
    ("1.5", "out of range"),
])
def test_bad_max_error_is_one_line(tmp_path, value, says):
    result = CliRunner().invoke(cli, ["convert", str(tmp_path / "m.keras"), "-o", str(tmp_path / "out"),
                                      "--quant", "auto", "--max-error", value])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "--max-error" in lines[0] and says in lines[0]
    assert not (tmp_path / "out").exists()


def test_fused_lstm_auto_is_int8_with_a_note(tmp_path):
    """TFLite's fused LSTM has no 16x8 form: --quant auto in fused mode is the int8 model, and says so."""
    from conftest import require_module

    require_module("tf_keras")
    model = zoo.lstm_dense(8, 3, 1, "fused_auto")
    calib = zoo.trajectories(4, 50, 3, 0)
    manifest = convert_folder(model, tmp_path / "auto", quant="auto", calib=calib, mode="fused")
    int8 = convert_folder(model, tmp_path / "int8", quant="int8", calib=calib, mode="fused")
    assert manifest.mode == "fused" and manifest.quant == "auto"
    p = manifest.precision
    assert p["plan"] == "int8" and "fused" in p["note"]
    assert p["error"] == budget_error(manifest) == budget_error(int8)
    for key in ("ops", "inputs", "outputs", "states", "weight_bytes"):
        assert getattr(manifest, key) == getattr(int8, key)


@pytest.mark.parametrize("max_error, path", [(1.0, "fused"), (1e-4, "step")])
def test_auto_mode_leaves_the_fused_lstm_when_its_int8_misses_the_budget(tmp_path, max_error, path):
    """--quant auto with --mode auto: the fused LSTM (int8 only) where its int8 model meets the budget, else step
    cells with a per-op plan, each RNN path saying why."""
    from conftest import require_module

    require_module("tf_keras")
    model = zoo.lstm_dense(8, 3, 1, "auto_path")
    calib = zoo.trajectories(4, 50, 3, 0)
    manifest = convert_folder(model, tmp_path / "auto", quant="auto", calib=calib, mode="auto", max_error=max_error)
    assert manifest.mode == path and manifest.mode_requested == "auto"
    assert [p["path"] for p in manifest.rnn_paths] == [path]
    p = manifest.precision
    if path == "fused":
        assert p["plan"] == "int8" and p["met"]
    else:
        assert "budget" in manifest.rnn_paths[0]["why"] and "16x8" in manifest.rnn_paths[0]["why"]
        assert p["int8_error"] > max_error and p["error"] < p["int8_error"]
        assert budget_error(manifest) == pytest.approx(p["error"], rel=1e-6)
    written = sorted(f.name for f in (tmp_path / "auto").iterdir())
    assert sorted(manifest.written) == written


@pytest.mark.parametrize("name", ["ltc_dense", "cfc_wired_pure", "simplernn_relu"])
def test_groups_hold_each_constant_once(converted, name):
    """The plan's groups partition the ops that can be int16, and a plan made of whole groups holds each
    constant in one dtype only: its constant bytes are at most the larger of the int8 and 16x8 models'."""
    _, pair, _, _ = converted(name)
    groups = mixed.op_groups(pair)
    members = sorted(i for g in groups for i in g)
    assert members == pair.can_int16()
    chosen = [i for g in groups[::2] for i in g]
    data = mixed.splice(pair, chosen)
    ceiling = max(tfl.constant_bytes(pair.m8), tfl.constant_bytes(pair.m16))
    assert tfl.constant_bytes(tfl.read(data)) <= ceiling
    shared = [g for g in groups if len(g) > 1]
    if name == "ltc_dense":  # its six ODE unfolds read one set of parameters
        assert shared and max(len(g) for g in shared) >= 6


def _same_bytes_as_the_interpreter(out, b) -> None:
    """The host build ``b`` of folder ``out`` writes the interpreter's every output and state byte, over a trajectory
    and over inputs wider than calibration."""
    from edgernn.testing import backend_harness as H

    n = int(H.load_interpreter(out / "step.tflite").get_signature_runner().get_input_details()["x"]["shape"][-1])
    for xs in (zoo.trajectories(1, 100, n, seed=4)[0],
               np.random.default_rng(9).normal(0.0, 2.0, size=(60, n)).astype(np.float32)):
        xq = H.quantize_x(out, xs)
        ref, _ = H.reference_bytes(out, xq)
        got, _ = H.run_driver(b.exe, xq, ref.shape[1], out)
        assert all(bad == 0 for bad, _ in H.compare_tensors(got, ref, out).values())


@pytest.mark.toolchain
def test_ltc_mixed_model_c_matches_interpreter(converted, tmp_path):
    """The LTC's mixed model through the C backend: int16 loops around its divisions, in float32 between int16
    tensors at this budget (DEQUANTIZE, DIV, and LiteRT's builtin QUANTIZE to int16, halves to even), every
    output and state byte the interpreter's over a trajectory and inputs wider than calibration."""
    import shutil

    from edgernn.testing import backend_harness as H

    _, _, _, folder = converted("ltc_dense_div", 0.001)
    out = tmp_path / "ltc"
    shutil.copytree(folder, out)
    b = H.build(out)
    model_c = (out / "firmware" / "model.c").read_text()
    assert "edgernn_dequantize_s16_f32(" in model_c and "edgernn_quantize_f32_s16_even(" in model_c
    _same_bytes_as_the_interpreter(out, b)


def _made_up_cost(weigh: str, n_ops: int):
    """A cost of a mixed model counted from its ops: (cycles, bytes)."""
    def cost(data):
        m = tfl.read(data)
        names = tfl.op_names(m)
        seams = names.count("QUANTIZE")
        int16 = sum(1 for op in m.subgraphs[0].operators if tfl.op_name(m, op.opcodeIndex) != "QUANTIZE"
                    and tfl.tensor_quant(m, op.outputs[0])["dtype"] == "int16")
        if weigh == "ops":      # every int16 op costs far more than a seam
            return 1000 + 100 * int16 + seams, 500
        if weigh == "seams":    # a seam costs more than any op saves in int8
            return 1000 + 10 * int16 + 100 * seams, 500
        return 1000 + 10 * int16, 500 + 40 * (n_ops - int16)     # bytes: int8 saves cycles, adds bytes
    return cost


@pytest.mark.parametrize("weigh, chosen", [("ops", "a mix"), ("seams", "all int16"), ("bytes", "all int16")])
def test_plan_is_the_least_cost_that_meets_the_budget(converted, weigh, chosen):
    """With a cost, the plan is the cheapest of all-int16, the fewest int16 ops and the cost descent, meets
    the budget and weighs no more than all-int16. The costs are made up, to hold the search to what it
    must see: ``ops``, where int16 ops are dear and seams cheap: a mix at least as cheap as the fewest int16
    ops; ``seams``, where a QUANTIZE costs more than an op saves in int8: no seam is worth it; ``bytes``,
    where each int8 op saves cycles but adds bytes: nothing may weigh more than all-int16."""
    _, pair, calib, folder = converted("simplernn_relu", 0.015)
    probe = calib[:8]
    want = mixed.run_quantized((folder / "float_step.tflite").read_bytes(), probe, pair.ties)
    cost = _made_up_cost(weigh, len(pair.ops))
    plan, data = mixed.plan_precision(pair, probe, want, 0.015, cost=cost)
    fewest, fewest_data = mixed.plan_precision(pair, probe, want, 0.015)
    everything = pair.can_int16()
    assert plan.met and plan.error <= 0.015 and fewest.met
    e = plan.estimates
    assert e["auto"] == cost(data) and e["int16"] == cost(mixed.splice(pair, everything))
    assert e["auto"][1] <= e["int16"][1]
    assert e["auto"][0] <= e["int16"][0]
    if cost(fewest_data)[1] <= e["int16"][1]:   # the fewest int16 ops, when within all-int16's bytes
        assert e["auto"][0] <= cost(fewest_data)[0]
    if chosen == "a mix":
        assert 0 < len(plan.int16_ops) < len(everything)
    else:
        assert plan.int16_ops == everything and "QUANTIZE" not in tfl.op_names(tfl.read(data))
    assert mixed.precision_entry(pair, plan, data, 0.015, probe)["estimate"]["auto"] == \
        {"cycles_per_step": e["auto"][0], "bytes": e["auto"][1]}


@pytest.mark.toolchain
@pytest.mark.parametrize("pick", ["even", "odd"])
def test_requantize_in_a_mixed_model_c_matches_interpreter(converted, tmp_path, pick):
    """A CfC after a Dense(tanh): the requantizing QUANTIZE before its CONCATENATION is an op of the plan, int8 or
    int16 beside a producer of the other type (a seam, then the requantization); through the C backend every
    output and state byte is the interpreter's."""
    from edgernn.testing import backend_harness as H

    import shutil

    _, pair, _, folder = converted("tanh_cfc")
    can = pair.can_int16()
    requantize = pair.ops.index("QUANTIZE")
    chosen = {"even": can[::2], "odd": can[1::2]}[pick]
    data = mixed.splice(pair, chosen)
    m = tfl.read(data)
    assert mixed._seams(m) > 0 and requantize in can
    out = tmp_path / "mix"
    shutil.copytree(folder, out)   # its manifest names the states; the step model is the mix, with its dtypes
    (out / "step.tflite").write_bytes(data)
    manifest = json.loads((out / "manifest.json").read_text())
    inputs, outputs = tfl.signature(m)
    manifest["outputs"][0]["dtype"] = tfl.tensor_quant(m, outputs["y"])["dtype"]
    for state in manifest["states"]:
        state["dtype"] = tfl.tensor_quant(m, inputs[state["name"]])["dtype"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    b = H.build(out)
    _same_bytes_as_the_interpreter(out, b)


@pytest.mark.parametrize("budget, chosen, met", [(0.5, "int8", True), (0.01, "int16", True), (1e-6, "int16", False)])
def test_auto_without_a_mixed_model_takes_a_uniform_one(tmp_path, monkeypatch, budget, chosen, met):
    """Where the int8 and 16x8 models cannot be paired op for op (a quantizer's pattern the alignment does not
    know), auto takes the uniform model that meets the budget, int8 first, else the one of least error (met
    false), and the note says why: a build, not a refusal."""
    def unaligned(m8, m16):
        raise mixed.MixedUnavailable("the int8 and 16x8 step models do not align: op 3 is A in int8 and B in 16x8")

    monkeypatch.setattr(mixed, "_align", unaligned)
    model = MODELS["simplernn_relu"]()
    calib = zoo.trajectories(8, 200, zoo.features_of(model), 0)
    manifest = convert_folder(model, tmp_path / "out", quant="auto", calib=calib, mode="step", max_error=budget)
    p = manifest.precision
    assert p["note"].startswith("the int8 and 16x8 step models do not align: op 3") and \
        f"the uniform {chosen} model" in p["note"], p["note"]
    assert p["met"] is met and p["quantize_ops"] == 0 and p["error"] <= p["int8_error"]
    assert p[f"{chosen}_ops"] == len(p["plan"]) > 0 and {r["dtype"] for r in p["plan"]} == {chosen}
    assert (p["error"] <= budget) is met and abs(budget_error(manifest) - p["error"]) < 1e-6
    m = tfl.read((tmp_path / "out" / "step.tflite").read_bytes())
    inputs, outputs = tfl.signature(m)
    assert {tfl.tensor_quant(m, k)["dtype"] for k in [*inputs.values(), *outputs.values()]} == {chosen}
