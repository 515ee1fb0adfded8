"""OUT/nntool/ through GreenWaves' real NNTool (../shared/nntool, NNTool 4.1), in the venv scripts/setup_nntool.sh
makes (.venv-nntool, or $EDGERNN_NNTOOL_VENV). For every model kind of the test zoo, built for ai_deck:

(a) ``nntool -s nntool_script`` runs every command without an exception up to ``gen``, which stops at its first
    need of the AutoTiler's headers (CNN_Infos_SQ8.h; the AutoTiler is closed and not here). NNTool's exit code
    is always 0: the test reads its output;
(b) NNTool's float execution of one step equals LiteRT's float step (FLOAT_REL);
(c) NNTool's quantized execution (its SQ8, calibrated by aquant on the files edgernn writes) over STEPS steps,
    the states fed back as host_loop.c does (rescaled from the output's scale to the input's), stays within
    QUANT_L2R of the float model (LiteRT);
(d) the generated function's arguments (CodeGenerator.generate_inputs/outputs, what gen writes into CreateGraph)
    and the GraphInfo header's scale macros are the ones host_loop.c uses.

A fused LSTM's states are its LSTM node's state inputs (nntool_script's RNN_STATES_AS_INPUTS, set before aquant,
which calibrates them on the h and c files edgernn writes), updated in place: (c) feeds the integers the kernel
wrote back unchanged, as host_loop.c leaves them, with the Reset argument NNTool adds in host_loop.c's call.
Without the NNTool venv these tests skip, and fail under EDGERNN_REQUIRE_TOOLCHAINS=1.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from edgernn.testing import frames_zoo
from edgernn.testing import zoo
from conftest import tool_unavailable

TESTS = Path(__file__).resolve().parents[2]
REPO = TESTS.parent
HELPER = TESTS / "support" / "nntool_run.py"
NNTOOL_HOME = Path(os.environ.get("EDGERNN_NNTOOL_HOME", REPO.parent / "shared" / "nntool"))
VENV = Path(os.environ.get("EDGERNN_NNTOOL_VENV", REPO / ".venv-nntool"))
STEPS = 12
FLOAT_REL = 1e-4
# NNTool's own int8 against the float model over STEPS steps, l2r of all outputs (measured: see QUANT_MEASURED)
QUANT_L2R = 0.35

KINDS = {
    "lstm_step": (lambda: zoo.lstm_dense(24, 4, 3, "nnt_lstm"), "step"),
    "lstm_fused": (lambda: zoo.lstm_dense(24, 4, 3, "nnt_lstm"), "fused"),
    "gru": (zoo.gru_stack_final, "auto"),
    "simplernn": (zoo.simplernn_relu, "auto"),
    "cfc": (zoo.cfc_default, "auto"),
    "cfc_ncp": (zoo.cfc_wired_pure, "auto"),
    "ltc": (zoo.ltc_dense, "auto"),
    "frame_cfc": (frames_zoo.frame_cfc, "auto"),
}

pytestmark = pytest.mark.slow


def _nntool_python() -> Path:
    python = VENV / "bin" / "python"
    if not (NNTOOL_HOME / "scripts" / "nntool").is_file():
        tool_unavailable(f"needs GreenWaves' NNTool at {NNTOOL_HOME}")
    if not python.is_file():
        tool_unavailable(f"needs the NNTool venv {VENV} (bash scripts/setup_nntool.sh)")
    return python


def _env(tmp: Path) -> dict:
    empty = tmp / "no_autotiler"
    empty.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TILER_", "PYTHON"))}
    # the AutoTiler's header folders, empty: gen then names the first header it needs
    env.update(PYTHONPATH=str(NNTOOL_HOME), TILER_CNN_KERNEL_PATH_SQ8=str(empty), TILER_CNN_KERNEL_PATH=str(empty))
    return env


def _data(manifest: dict, sequences: int, steps: int, seed: int) -> np.ndarray:
    shape = manifest["inputs"][0]["shape"]
    if len(shape) == 4:
        return frames_zoo.moving_blobs(sequences, steps, shape[1], shape[2], shape[3], seed)
    return zoo.trajectories(sequences, steps, shape[1], seed)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """kind, quant -> OUT of an ai_deck build (built once per module)."""
    from edgernn.pipeline.build import build_model

    folders = {}

    def build(kind: str, quant: str) -> Path:
        if (kind, quant) not in folders:
            make, mode = KINDS[kind]
            out = tmp_path_factory.mktemp(f"nnt_{kind}_{quant}") / "out"
            with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(io.StringIO()):
                mp.delenv("GAP_SDK_HOME", raising=False)
                model = make()
                probe = {"inputs": [{"shape": [1, *model.input_shape[2:]]}]}
                build_model(model, out, board="ai_deck", quant=quant, mode=mode,
                               calib=_data(probe, 8, 24, seed=1), warn=lambda _: None)
            folders[kind, quant] = out
        return folders[kind, quant]

    return build


def _io(out: Path):
    from edgernn.outdir import Manifest
    from edgernn.targets.gap8.nntool_graph import nntool_step_graph

    manifest = json.loads((out / "manifest.json").read_text())
    source = manifest["files"].get("float_step", manifest["files"]["step"])
    graph = nntool_step_graph((out / source).read_bytes(), Manifest.from_dict(manifest))
    offset = 0 if graph.y_is else 1
    feedback = {offset + k: 1 + k for k in range(len(graph.inputs) - 1)}
    return manifest, graph, feedback, out / source


def _litert(model: Path, x: np.ndarray, graph, feedback, fresh_each: bool) -> np.ndarray:
    """The float step model over x, states fed back: every output (graph order) per step."""
    from edgernn.tflite.interpreter import load_interpreter

    runner = load_interpreter(model).get_signature_runner()
    details = runner.get_input_details()
    states = {n: np.zeros(details[n]["shape"], np.float32) for n in graph.inputs[1:]}
    rows = []
    for x_t in x:
        if fresh_each:
            runner = load_interpreter(model).get_signature_runner()
        out = runner(x=x_t.reshape(details["x"]["shape"]).astype(np.float32), **states)
        for o, i in feedback.items():
            states[graph.inputs[i]] = out[graph.outputs[o]]
        rows.append(np.concatenate([out[n].ravel() for n in graph.outputs]))
    return np.array(rows)


def _run_helper(tmp: Path, graph_file: Path, x: np.ndarray, graph, feedback, quantized: bool,
                calibration=None, expressions_first=True, states_as_inputs=None) -> tuple[dict, dict | None]:
    python = _nntool_python()
    tmp.mkdir(parents=True, exist_ok=True)
    np.save(tmp / "x.npy", x)
    job = {"graph": str(graph_file), "quantized": quantized, "x": str(tmp / "x.npy"), "inputs": graph.inputs,
           "outputs": graph.outputs, "feedback": {str(k): v for k, v in feedback.items()},
           "result": str(tmp / "result.npz"), "report": str(tmp / "report.json"), "calibration": calibration,
           "expressions_first": expressions_first, "states_as_inputs": states_as_inputs}
    (tmp / "job.json").write_text(json.dumps(job))
    proc = subprocess.run([str(python), str(HELPER), str(tmp / "job.json")], env=_env(tmp), capture_output=True,
                          text=True, timeout=600)
    assert (tmp / "report.json").is_file(), proc.stderr[-3000:]
    report = json.loads((tmp / "report.json").read_text())
    assert report["ok"], f"NNTool failed at {report['stage']}: {report.get('error')}\n{report.get('traceback')}"
    return report, dict(np.load(tmp / "result.npz"))


def _expressions_first(out: Path) -> bool:
    script = (out / "nntool" / "nntool_script").read_text()
    return script.index("fusions -a expression_matcher") < script.index("fusions --scale8")


def _l2r(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-12))


@pytest.mark.parametrize("quant", ["float32", "int8"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_nntool_script_runs_to_gen(built, kind, quant, tmp_path):
    """(a) and (d): every command of nntool_script without an exception, and gen stops at the AutoTiler's header."""
    python = _nntool_python()
    out = built(kind, quant)
    work = tmp_path / "nntool"
    import shutil

    shutil.copytree(out / "nntool", work)
    script = (work / "nntool_script").read_text()
    assert "-q" not in re.findall(r"^open .*$", script, re.M)[0].split()
    assert "set graph_name edgernn" in script and re.search(r"^gen .* -t ", script, re.M)
    proc = subprocess.run([str(python), str(NNTOOL_HOME / "scripts" / "nntool"), "-s", "nntool_script"], cwd=work,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    exceptions = re.findall(r"EXCEPTION of type '(\w+)' occurred with message: '([^']*)'", log)
    # the only one: gen's first AutoTiler header (the graph was quantized, adjusted and handed to the generator)
    assert exceptions == [("OSError", "CNN_Infos_SQ8.h not found")], log[-4000:]
    assert "Quantization set" in log or "aquant" in script
    assert (work / "step_nntool.json").is_file()   # save_state: the quantized graph, inside nntool/


def test_nntool_graph_is_the_float_step_model(built):
    """step_nntool.tflite gives LiteRT's bytes of the float step model, and leaves step.tflite as it was."""
    from edgernn.tflite.interpreter import load_interpreter

    out = built("lstm_step", "int8")
    manifest, graph, feedback, source = _io(out)
    x = _data(manifest, 1, 6, seed=5)[0]
    a = _litert(source, x, graph, feedback, False)
    nn = load_interpreter(out / "nntool" / "step_nntool.tflite").get_signature_runner()
    assert set(nn.get_input_details()) == set(graph.inputs)
    assert (out / "nntool" / "step_nntool.tflite").read_bytes() == graph.data
    assert a.shape == (6, 3 + 24 + 24)


QUANT_MEASURED: dict[str, dict] = {}


@pytest.mark.parametrize("kind", list(KINDS))
def test_nntool_float_step_matches_litert(built, kind, tmp_path):
    """(b) one step of NNTool's float execution against LiteRT's float step.tflite."""
    out = built(kind, "float32")
    manifest, graph, feedback, source = _io(out)
    x = _data(manifest, 1, 1, seed=3)[0]
    report, result = _run_helper(tmp_path, out / "nntool" / "step_nntool.tflite", x, graph, feedback, False,
                                 expressions_first=_expressions_first(out))
    ref = _litert(source, x, graph, feedback, manifest["mode"] == "fused")
    rel = float(np.abs(result["outputs"] - ref).max() / max(np.abs(ref).max(), 1e-9))
    print(f"{kind}: NNTool float vs LiteRT float, one step: max relative {rel:.2e}")
    assert rel <= FLOAT_REL


@pytest.mark.parametrize("kind", list(KINDS))
def test_nntool_quantized_sequence_stays_near_float(built, kind, tmp_path):
    """(c) and (d): NNTool's SQ8 over STEPS steps as host_loop.c runs it, against the float model."""
    out = built(kind, "int8")
    manifest, graph, feedback, source = _io(out)
    fused = manifest["mode"] == "fused"
    nntool_dir = out / "nntool"
    script = (nntool_dir / "nntool_script").read_text()
    # a fused LSTM's NNTool graph has x and the LSTM node's state inputs h and c: one column of files each
    n_inputs = len(graph.inputs) + (2 if fused else 0)
    calibration = [sorted(str(p) for p in (nntool_dir / "calibration").glob(f"in{i + 1}_*.npy"))
                   for i in range(n_inputs)]
    assert all(len(c) == len(calibration[0]) > 0 for c in calibration)
    assert not list((nntool_dir / "calibration").glob(f"in{n_inputs + 1}_*.npy"))
    assert len(re.findall(r"calibration/in\d+_\d+\.npy", re.search(r"^aquant .*$", script, re.M).group(0))) \
        == n_inputs * len(calibration[0])
    lstm = None
    if fused:   # the option comes before aquant, so that aquant calibrates the state inputs it adds
        node = re.search(r"^nodeoption (\S+) RNN_STATES_AS_INPUTS 1$", script, re.M)
        assert node and script.index(node.group(0)) < script.index("\naquant ")
        lstm = node.group(1)
    expressions_first = _expressions_first(out)
    x = _data(manifest, 1, STEPS, seed=3)[0]
    report, result = _run_helper(tmp_path, nntool_dir / "step_nntool.tflite", x, graph,
                                 {} if fused else feedback, False, calibration, expressions_first, lstm)
    # the float model over the same steps, its states carried (a fused model's in its variable tensors)
    ref = _litert(source, x, graph, {} if fused else feedback, False)
    l2r = _l2r(result["outputs"], ref)
    max_abs = float(np.abs(result["outputs"] - ref).max())
    QUANT_MEASURED[kind] = {"l2r": l2r, "max_abs": max_abs}
    print(f"{kind}: NNTool SQ8 vs float over {STEPS} steps: l2r {l2r:.4f}, max abs {max_abs:.4f}")
    assert l2r <= QUANT_L2R

    # (d) the arguments NNTool generates are host_loop.c's, in its order, and so are the scale macros
    loop = (nntool_dir / "host_loop.c").read_text()
    names = [a["name"] for a in report["arguments"]]
    call = [n.strip() for n in re.search(r"edgernnCNN\(([^)]*)\);", loop).group(1).split(",")]
    assert call == names
    if fused:
        # the script's nodeoption names the LSTM node NNTool made, which adds <node>_Reset (NNTool's own call
        # passes it 1); host_loop.c passes 1 on a sequence's first step, then 0
        assert lstm in report["node_names"], report["node_names"]
        reset = f"{lstm}_Reset"
        assert report["nntool_call"].split(", ") == [("1" if n == reset else n) for n in names]
        assert re.search(rf"^\s*{reset} = 1;$", loop, re.M) and re.search(rf"^\s*{reset} = 0;", loop, re.M)
        # the states are the kernel's, in place: nothing rescales them; c is int8 like h
        assert "feed_back_state" not in loop and report["lstm_q"]["c_dtype"] == "int8"
    for macro in set(re.findall(r"edgernn_(\w+)_OUT_(?:SCALE|ZERO_POINT)", loop)):
        assert f"#define edgernn_{macro}_OUT_SCALE" in report["graphinfo_header"]
    assert all(a["ctype"].startswith("signed char") for a in report["arguments"] if not a["name"].endswith("_Reset"))
