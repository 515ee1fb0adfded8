"""Run a step graph in GreenWaves' NNTool (its Python API, in numpy): the venv side of tests/targets/test_nntool.py.

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
  ``feedback``: output index -> input index.

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
    outs = [by_name_out[f"output_{i + 1}"] for i in range(len(job["outputs"]))]
    qin = [_qparams(G.quantization[n.name].out_qs[0]) for n in ins] if quantized else None
    qout = [_qparams(G.quantization[n.name].in_qs[0]) for n in outs] if quantized else None
    report["in_q"], report["out_q"] = qin, qout

    x = np.load(job["x"])
    shapes = report["input_shapes"]
    state_values = [np.zeros(shapes[i], np.float32) for i in range(1, len(ins))]
    feedback = {int(k): int(v) for k, v in job["feedback"].items()}
    ys, states = [], []
    for t in range(x.shape[0]):
        feed = [x[t].reshape(shapes[0]).astype(np.float32), *state_values]
        run = G.execute(feed, quantize=quantized, dequantize=False)
        raw = [np.asarray(run[n.step_idx][0]) for n in outs]
        if quantized:
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
    np.savez(job["result"], outputs=np.array(ys), states=np.array(states))

    if not quantized:       # gen needs a quantized graph: nothing more to read from a float one
        report["stage"] = "done"
        return
    report["stage"] = "gen"
    gen = CodeGenerator(G, DefaultNamingConvension(), {})
    gen.generate_inputs()
    gen.generate_outputs()
    report["arguments"] = [{"name": g.arg_name if hasattr(g, "arg_name") else str(g).split('"')[3],
                            "ctype": str(g).split('"')[1], "dir": "in" if "ARG_DIR_IN" in str(g) else "out"}
                           for g in gen.globals]
    header_gen = CodeGenerator(G, DefaultNamingConvension(), {})
    for node in header_gen.sorted_nodes:
        header_gen.get_node_cname(node)
    report["graphinfo_header"] = header_template(G, code_generator=header_gen)
    report["stage"] = "done"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
