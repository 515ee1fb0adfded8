"""Run a step graph in GreenWaves' NNTool (its Python API, in numpy): the venv side of tests/targets/gap8/test_nntool.py.

This file runs under the NNTool venv's Python (numpy < 1.24), never under edgernn's, and imports nothing of
edgernn. ``python nntool_run.py JOB.json`` reads the job and writes ``JOB.json``'s ``result`` (.npz) and
``report`` (.json):

- ``graph``: the .tflite file; ``quantized``: open it with its own quantization (``open -q``), else as float;
  ``calibration``: for a float graph, .npy files, one list per graph input, to quantize it as ``aquant``
  does (then the run is quantized too);
- ``x``: (steps, ...) float inputs; the states start at 0; each step's state outputs are fed back as
  host_loop.c does: quantized, the output's integers rescaled to the input's scale and zero point
  (``rescale``, the same arithmetic as host_loop.c), float, as they are;
- ``inputs``, ``outputs``: the graph's input and output names in edgernn's order (x, states / y, states),
  ``feedback``: output index -> input index;
- ``states_as_inputs``: a fused LSTM's node name: ``nodeoption <node> RNN_STATES_AS_INPUTS 1`` before the
  quantization, as nntool_script does (its state inputs, i_state_<node> and c_state_<node>, are then calibrated
  from the files after x's, in NNTool's input order). Such a node updates its state buffers in place (GNA_INOUT
  in NNTool's bindings): each step's new h (the node's output) and c are fed back as the integers the kernel wrote,
  unchanged, as host_loop.c leaves them. NNTool's numpy kernel copies its states instead; its own
  ``output_c_state`` flag, set for the execution only, makes it return the new c it computed.

The report holds NNTool's own view: its input and output nodes, the generated function's arguments
(``CodeGenerator.generate_inputs``/``generate_outputs``, as ``gen`` writes them into CreateGraph), each
argument's scale and zero point, and the GraphInfo header that ``gen --header_file`` writes.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import numpy as np


def rescale(q: np.ndarray, out_scale: float, out_zero: int, in_scale: float, in_zero: int, bits: int) -> np.ndarray:
    """host_loop.c's rescale: zero_in + round_half_away((q - zero_out) * (out_scale / in_scale)) in float32, clamped."""
    ratio = np.float32(np.float32(out_scale) / np.float32(in_scale))
    v = (q.astype(np.float32) - np.float32(out_zero)) * ratio
    r = np.where(v >= 0, np.floor(v + np.float32(0.5)), -np.floor(np.float32(0.5) - v)).astype(np.int64)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return np.clip(r + in_zero, lo, hi)


def _qparams(qtype) -> tuple[float, int, int]:
    scale = float(np.asarray(qtype.scale).ravel()[0])
    zero = int(np.asarray(qtype.zero_point).ravel()[0]) if qtype.zero_point is not None else 0
    return scale, zero, int(qtype.bits)


def main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    report: dict = {"ok": False}
    try:
        _run(job, report)
        report["ok"] = True
    except Exception as exc:  # the test reads the report: NNTool's failure is what it checks
        report["error"] = f"{type(exc).__name__}: {exc}"
        report["traceback"] = traceback.format_exc()
    Path(job["report"]).write_text(json.dumps(report, indent=1, default=str))
    return 0


def _run(job: dict, report: dict) -> None:
    from nntool.api import NNGraph
    from nntool.generation.code_generator import CodeGenerator
    from nntool.generation.default_template import header_template
    from nntool.generation.naming_convension import DefaultNamingConvension
    from nntool.graph.types import RNNNodeBase
    from nntool.stats.activation_ranges_collector import ActivationRangesCollector

    report["stage"] = "open"
    G = NNGraph.load_graph(job["graph"], load_quantization=job["quantized"])
    G.name = job.get("graph_name", "edgernn")
    report["stage"] = "adjust"
    G.adjust_order()
    report["stage"] = "fusions"
    passes = ["expression_matcher", "scaled_match_group"]
    for name in passes if job.get("expressions_first", True) else passes[::-1]:   # nntool_script's order
        G.fusions(name)
    lstm = job.get("states_as_inputs")
    if lstm:
        report["stage"] = "nodeoption"
        G.set_node_option(lstm, "RNN_STATES_AS_INPUTS", 1)
    quantized = job["quantized"]
    if job.get("calibration"):
        report["stage"] = "aquant"
        collector = ActivationRangesCollector()
        files = job["calibration"]
        for sample in zip(*files):
            collector.collect_stats(G, [np.load(f) for f in sample])
        G.quantize(collector.stats, schemes=["scaled"])
        quantized = True
    report["stage"] = "execute"

    inputs = list(G.input_nodes())
    outputs = list(G.output_nodes())
    report["node_names"] = [n.name for n in G.nodes()]
    report["input_nodes"] = [n.name for n in inputs]
    report["output_nodes"] = [n.name for n in outputs]
    report["input_shapes"] = [[int(d) for d in n.out_dims[0].shape] for n in inputs]
    by_name_in = {n.name: n for n in inputs}
    by_name_out = {n.name: n for n in outputs}
    # edgernn's order: step_nntool.tflite lists x then the states; NNTool names them input_1, input_2, ...
    ins = [by_name_in[f"input_{i + 1}"] for i in range(len(job["inputs"]))]
    # a fused LSTM's state inputs, after them in NNTool's input order (the calibration files' order)
    ins += [n for n in inputs if n not in ins]
    outs = [by_name_out[f"output_{i + 1}"] for i in range(len(job["outputs"]))]
    qin = [_qparams(G.quantization[n.name].out_qs[0]) for n in ins] if quantized else None
    qout = [_qparams(G.quantization[n.name].in_qs[0]) for n in outs] if quantized else None
    report["in_q"], report["out_q"] = qin, qout
    node = G[lstm] if lstm else None
    if node is not None and quantized:
        names, rec = node.get_name_indexes(), G.quantization[lstm]
        # the scales the kernel reads and writes its states at (h: its output's; c: its c_state input's)
        report["lstm_q"] = {"out": _qparams(rec.out_qs[0]), "i_state": _qparams(rec.in_qs[names["i_state"]]),
                            "c_state": _qparams(rec.in_qs[names["c_state"]]),
                            "c_dtype": str(np.dtype(rec.in_qs[names["c_state"]].dtype))}

    x = np.load(job["x"])
    if node is not None:    # G.execute takes its inputs in G.input_nodes()'s order, and so do the feeds below
        assert [n.name for n in ins] == report["input_nodes"], report["input_nodes"]
    shapes = report["input_shapes"]
    state_values = [np.zeros(shapes[i], np.float32) for i in range(1, len(ins))]
    feedback = {int(k): int(v) for k, v in job["feedback"].items()}
    ys, states = [], []
    if node is not None:
        node.output_c_state = True      # the execution's view of the in-place c (see above); cleared before gen
    for t in range(x.shape[0]):
        feed = [x[t].reshape(shapes[0]).astype(np.float32), *state_values]
        run = G.execute(feed, quantize=quantized, dequantize=False)
        raw = [np.asarray(run[n.step_idx][0]) for n in outs]
        if node is not None:
            # in place: the kernel's new h and c, as it wrote them, are what the next step reads
            new = [np.asarray(run[node.step_idx][k]) for k in (0, 1)]
            if quantized:
                values = [(r.astype(np.float64) - q[1]) * q[0] for r, q in zip(raw, qout)]
                # integers unchanged: as floats at the state input's own scale, which quantizes back to them
                next_states = [(v.astype(np.float32) * np.float32(qin[1 + k][0])).reshape(shapes[1 + k])
                               for k, v in enumerate(new)]
            else:
                values = [r.astype(np.float64) for r in raw]
                next_states = [v.astype(np.float32).reshape(shapes[1 + k]) for k, v in enumerate(new)]
        elif quantized:
            # what host_loop.c hands the caller: y in NNTool's output scale, dequantized here for comparison
            values = [(r.astype(np.float64) - q[1]) * q[0] for r, q in zip(raw, qout)]
            next_states = list(state_values)
            for o, i in feedback.items():
                s, z, bits = qin[i]
                q = rescale(raw[o], *qout[o][:2], s, z, bits)
                next_states[i - 1] = ((q - z) * s).astype(np.float32).reshape(shapes[i])
        else:
            values = [r.astype(np.float64) for r in raw]
            next_states = list(state_values)
            for o, i in feedback.items():
                next_states[i - 1] = raw[o].astype(np.float32).reshape(shapes[i])
        state_values = next_states
        ys.append(np.concatenate([v.ravel() for v in values]))
        states.append(np.concatenate([s.ravel() for s in state_values]) if state_values else np.zeros(0))
    if node is not None:
        node.output_c_state = False
    np.savez(job["result"], outputs=np.array(ys), states=np.array(states))

    if not quantized:       # gen needs a quantized graph: nothing more to read from a float one
        report["stage"] = "done"
        return
    report["stage"] = "gen"
    gen = CodeGenerator(G, DefaultNamingConvension(), {})
    # the generated function's arguments, as CreateGraph declares them (CodeGenerator.initialize_globals: the
    # inputs, the constants phase's globals, the outputs), and NNTool's own call of it (gen_inout_list). The
    # constants phase needs the AutoTiler's headers for most nodes; of its globals only an RNN node's are
    # arguments (a state-input RNN's <node>_Reset), so it is run for the RNN nodes alone
    gen.generate_inputs()
    for pnode, fnode in gen.sorted_nodes_and_fusions():
        anode = fnode or pnode
        if isinstance(anode, RNNNodeBase):
            gen.new_execute_phase("globals", anode, G.quantization.get((pnode.name, fnode.name) if fnode else pnode.name),
                                  pnode, fnode, break_on_true=True)
    gen.generate_outputs()
    gen._globals_run = True     # initialize_globals' work, done above
    report["arguments"] = [{"name": g.arg_name, "ctype": str(g).split('"')[1],
                            "dir": "in" if "ARG_DIR_IN" in str(g) else "out"}
                           for g in gen.globals_decl if g.arg_scope == "ARG_SCOPE_ARG" and not g.extern_pointer]
    report["nntool_call"] = gen.gen_inout_list()
    header_gen = CodeGenerator(G, DefaultNamingConvension(), {})
    for node in header_gen.sorted_nodes:
        header_gen.get_node_cname(node)
    report["graphinfo_header"] = header_template(G, code_generator=header_gen)
    report["stage"] = "done"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
