"""OUT/nntool/: the files for users of GreenWaves' NNTool + AutoTiler flow.

- ``step_nntool.tflite``: the float step model laid out the way NNTool imports it (``nntool_graph``), held
  equal to it by LiteRT on calibration steps;
- ``calibration/``: steps of the float model's own trajectories over the calibration sequences (``x``, and each
  state as it was fed in), one .npy per graph input and step, for NNTool's ``aquant``;
- ``nntool_script``: ``nntool -s nntool_script`` imports, fuses, quantizes (NNTool's own SQ8 8-bit scheme,
  calibrated on those steps) and generates the AutoTiler model;
- ``host_loop.c``: the step loop around the generated ``edgernnCNN()``, in NNTool's argument order, rescaling
  each state from NNTool's output scale to its input scale (read from the ``edgernnInfo.h`` that ``gen`` writes).

edgernn's own firmware does not use them. tests/targets/gap8/test_nntool.py runs them through the real NNTool.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgernn.errors import EdgeRNNError
from edgernn.outdir import Manifest
from edgernn.targets.gap8.nntool_graph import check_same_answers, nntool_step_graph

CNN_NAME = "edgernn"
GRAPH_FILE = "step_nntool.tflite"
CALIBRATION_DIR = "calibration"
# calibration steps for aquant: enough for stable ranges, few enough to keep the script readable
CALIBRATION_SEQUENCES, CALIBRATION_STEPS = 4, 16
LSTM_OP = "UNIDIRECTIONAL_SEQUENCE_LSTM"


class NntoolUnsupported(EdgeRNNError):
    """A model the NNTool script cannot describe (it names one fused LSTM node): no NNTool flow is written."""


def nntool_node_name(graph: bytes, op: str) -> str:
    """The name NNTool 4.1's TFLite importer gives the (only) ``op`` of ``graph``: <OP>_<subgraph>_<op index>."""
    from edgernn.tflite import model as tfl

    model = tfl.read(graph)
    found = [i for i, o in enumerate(model.subgraphs[0].operators) if tfl.op_name(model, o.opcodeIndex) == op]
    if len(found) != 1:
        raise NntoolUnsupported(f"step_nntool.tflite has {len(found)} {op} ops; the NNTool script needs exactly one")
    return f"{op}_0_{found[0]}"


def nntool_arguments(n_inputs: int, n_outputs: int) -> list[tuple[str, int]]:
    """The generated function's arguments as NNTool orders them: its input nodes input_1.. and output nodes
    output_1.. (one per graph input and output, in order), each sorted by name (so input_10 before input_2).
    Returns (argument name, 0-based position in the graph's inputs or outputs), inputs first."""
    ins = sorted((f"input_{i + 1}" for i in range(n_inputs)))
    outs = sorted((f"output_{i + 1}" for i in range(n_outputs)))
    return ([(n.capitalize(), int(n.split("_")[1]) - 1) for n in ins]
            + [(n.capitalize(), int(n.split("_")[1]) - 1) for n in outs])


def nntool_fused_arguments(lstm_node: str, n_outputs: int) -> list[tuple[str, str]]:
    """The generated function's arguments for a graph whose LSTM node has RNN_STATES_AS_INPUTS (NNTool 4.1):
    its input nodes input_1, i_state_<node> and c_state_<node> sorted by name and capitalized, then the
    <node>_Reset its RNN generator adds, then the output nodes. Returns (argument name, role): x, state0 (h),
    state1 (c), reset, y."""
    ins = sorted([("input_1", "x"), (f"i_state_{lstm_node}", "state0"), (f"c_state_{lstm_node}", "state1")])
    outs = sorted((f"output_{i + 1}", "y") for i in range(n_outputs))
    return ([(n.capitalize(), r) for n, r in ins] + [(f"{lstm_node}_Reset", "reset")]
            + [(n.capitalize(), r) for n, r in outs])


def expressions_first(ops: list[str]) -> bool:
    """The order of NNTool's two fusion passes that it gets through (NNTool 4.1, measured on the test zoo):
    the expressions first, except for a graph with a SUM (an LTC), whose reduction --scale8 must see first."""
    return "SUM" not in ops


def fused_state_tensors(graph: bytes) -> list[int]:
    """The tensors of the (only) UNIDIRECTIONAL_SEQUENCE_LSTM's states, h then c (its TFLite inputs 18 and 19):
    NNTool 4.1's RNN_STATES_AS_INPUTS makes them the graph inputs i_state_<node> and c_state_<node>, in that order
    after x (its set_states_as_inputs walks the node's INPUT_NAMES, i_state before c_state)."""
    from edgernn.tflite import model as tfl

    model = tfl.read(graph)
    lstm = [o for o in model.subgraphs[0].operators if tfl.op_name(model, o.opcodeIndex) == LSTM_OP]
    if len(lstm) != 1:
        raise NntoolUnsupported(f"step_nntool.tflite has {len(lstm)} {LSTM_OP} ops; the NNTool script needs exactly one")
    return [int(lstm[0].inputs[18]), int(lstm[0].inputs[19])]


def _record_steps(float_model: bytes, inputs: list[str], outputs: list[str], sequences: np.ndarray,
                  fused: bool) -> tuple[list[dict[str, np.ndarray]], list[list[np.ndarray]]]:
    """The float model's own trajectories: per step, the inputs it was fed (x and the states before the step),
    and for a fused LSTM its states h and c before the step, read from its variable tensors (else [])."""
    from edgernn.tflite.oracle import State, Stepper

    picks = np.linspace(0, len(sequences) - 1, min(CALIBRATION_SEQUENCES, len(sequences))).astype(int)
    chosen = np.stack([np.asarray(sequences[s])[:CALIBRATION_STEPS] for s in np.unique(picks)]).astype(np.float32)
    if not fused:
        return Stepper(float_model, inputs[1:]).run(chosen, keep_feeds=True).feeds, []
    # the variable states before each step: as reset before the first, then as the step before left them
    variables = [State(f"tensor {v}", tensor=v) for v in fused_state_tensors(float_model)]
    stepper = Stepper(float_model, variables)
    start = [stepper.interp.get_tensor(v.tensor).astype(np.float32) for v in variables]
    trace = stepper.run(chosen, keep_feeds=True)
    after = [trace.states[v.name].reshape(*chosen.shape[:2], *first.shape).astype(np.float32)
             for v, first in zip(variables, start)]
    fused_states = [[first if t == 0 else states[s, t - 1] for first, states in zip(start, after)]
                    for s in range(chosen.shape[0]) for t in range(chosen.shape[1])]
    return trace.feeds, fused_states


def write_nntool(out_dir: Path, manifest: Manifest | dict, sequences: np.ndarray) -> list[str]:
    if isinstance(manifest, dict):          # a manifest as read from JSON
        manifest = Manifest.from_dict(manifest)
    try:
        import jinja2
    except ImportError:
        raise EdgeRNNError("generating the nntool files needs jinja2: pip install jinja2") from None
    from edgernn._version import __version__
    from edgernn.resources import templates_dir

    out_dir = Path(out_dir)
    # NNTool quantizes the float model itself: its SQ8 scheme is not TFLite's int8 (see docs/boards/ai_deck.md)
    source = manifest.files.get("float_step", manifest.files["step"]) if manifest.quant != "float32" else manifest.files["step"]
    float_model = (out_dir / source).read_bytes()
    graph = nntool_step_graph(float_model, manifest)
    fused = manifest.mode == "fused"
    steps, fused_states = _record_steps(float_model, graph.inputs, graph.outputs, sequences, fused)
    check_same_answers(float_model, graph.data, steps, fresh_each=fused)

    dest = out_dir / "nntool"
    (dest / CALIBRATION_DIR).mkdir(parents=True, exist_ok=True)
    (dest / GRAPH_FILE).write_bytes(graph.data)
    # one column of files per NNTool graph input, in its order: x and the step graph's states, or for a fused
    # LSTM x then its state inputs h and c
    columns = [[feed[name] for feed in steps] for name in graph.inputs]
    if fused:
        columns += [[pair[k] for pair in fused_states] for k in range(2)]
    files = []
    for i, column in enumerate(columns):
        paths = []
        for k, value in enumerate(column):
            path = f"{CALIBRATION_DIR}/in{i + 1}_{k:03d}.npy"
            np.save(dest / path, value.reshape(value.shape[1:]).astype(np.float32))
            paths.append(path)
        files.append(paths)

    states = manifest.states if not fused else []
    state_index = {s["name"]: k for k, s in enumerate(states)}

    def size(entry):
        n = 1
        for d in entry["shape"]:
            n *= int(d)
        return n

    def role(kind, position):
        name = (graph.inputs if kind == "in" else graph.outputs)[position]
        if name in ("x", "y"):
            return name
        return f"state{state_index[name]}"

    lstm_node = nntool_node_name(graph.data, LSTM_OP) if fused else None
    if fused:   # the states are the LSTM node's state inputs, updated in place: no state outputs
        states = manifest.states        # a fused LSTM's: h, then c
        if len(states) != 2:
            raise EdgeRNNError(f"a fused build for NNTool needs one LSTM's states (h, c), not {len(states)}")
        arguments = [{"name": name, "dir": "out" if r == "y" else "in", "role": r}
                     for name, r in nntool_fused_arguments(lstm_node, len(graph.outputs))]
    else:
        arguments = [{"name": name, "dir": "in" if name.startswith("Input") else "out",
                      "role": role("in" if name.startswith("Input") else "out", pos)}
                     for name, pos in nntool_arguments(len(graph.inputs), len(graph.outputs))]
    x, y = manifest.inputs[0], manifest.outputs[0]
    context = {
        "version": __version__, "sha256": manifest.model_sha256, "quant": manifest.quant, "mode": manifest.mode,
        "cnn": f"{CNN_NAME}CNN", "graph_name": CNN_NAME, "model_c": f"{CNN_NAME}Model.c",
        "header": f"{CNN_NAME}Kernels.h", "info": f"{CNN_NAME}Info.h", "graph_file": GRAPH_FILE,
        "calibration": [f for column in files for f in column], "n_steps": len(steps),
        "states": [{"name": s["name"], "size": size(s)} for s in states],
        "x_size": size(x), "y_size": size(y), "y_is": state_index.get(graph.y_is) if graph.y_is else None,
        "arguments": arguments, "inputs": graph.inputs, "outputs": graph.outputs,
        "lstm_node": lstm_node, "fused": fused,
        "expressions_first": expressions_first(manifest.ops),
    }
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir() / "targets" / "gap8" / "nntool")),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    written = [GRAPH_FILE, CALIBRATION_DIR]
    for template, name in (("nntool_script.j2", "nntool_script"), ("host_loop.c.j2", "host_loop.c")):
        (dest / name).write_text(env.get_template(template).render(**context))
        written.append(name)
    return written
