"""``--quant auto``: the step model with each op in int8 or 16x8, the plan of least estimated cost whose error against
the float model stays within the budget (``--max-error``), and the head's precision behind it.

edgernn/tflite/mixed.py makes the int8/16x8 pair of a calibrated step model and plans over it; this module runs the
search around it: the plan is made on the first calibration sequences and checked where the model will run (the
horizon's streams, else the other windows), made again to a tighter budget where it misses there, and, where even
int16 misses, the FULLY_CONNECTED weights are tried in error-compensated rounding or in two int8 parts
(edgernn/tflite/rounding.py, edgernn/tflite/two_part.py). The result is the step model and its manifest
``precision`` entry (docs/quantization.md).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from edgernn import tfenv
from edgernn.tflite import mixed, rounding, two_part
from edgernn.tflite import model as tfl
from edgernn.tflite.model import schema as S
from edgernn.tflite.oracle import Head, dequantize, quantize

Log = Callable[[str], None]
# what a plan is weighed by: a step model's estimated (cycles per step, bytes), None where it cannot be estimated
Cost = Callable[[bytes], "tuple[int, int] | None"]

# the plan is made on the first PLAN_SEQUENCES calibration sequences, and checked on up to HELD_OUT_SEQUENCES more;
# a plan that misses the budget there is made again, at most HELD_OUT_RETRIES times
PLAN_SEQUENCES = 8
HELD_OUT_SEQUENCES = 24
HELD_OUT_RETRIES = 2
# where even int16 misses: the FULLY_CONNECTEDs whose weights' int8 rounding alone gives at least this share of
# the budget are put in two parts first (edgernn/tflite/two_part.py), then, if that misses, all of them
TWO_PART_SHARE = 0.25


@dataclass
class StepKeys:
    """The step model's signature keys as TF's converter names them, and the public names they get."""

    inputs: list[tuple[str, str]]    # (converter key, public name): x first, then each state
    outputs: list[str]               # converter keys: y first, then each state
    state_names: list[str]           # the public names of the states
    public: Callable[[bytes], bytes]  # a converted model with the public names (x, y, <layer>.<state>)

    @property
    def ties(self) -> list[tuple[str, str]]:
        """Each state's (input key, output key) in the converter's names."""
        return list(zip([k for k, _ in self.inputs[1:]], self.outputs[1:]))

    def feed(self, samples: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
        """Recorded steps (public names) as the converter's calibration takes them."""
        return [{k: s[p] for k, p in self.inputs} for s in samples]


@dataclass
class AutoStep:
    """What the search chose: the step model, the dtype of its output (the head's quantization), the range of that
    output the head is quantized on, and the manifest ``precision`` entry."""

    model: bytes
    y_dtype: str
    y_range: tuple[float, float] | None
    precision: dict


def plan_met(plan: mixed.Plan, checks: list[dict], max_error: float) -> bool:
    """Whether a plan meets the budget on its own sequences and, where it was checked, on the held-out ones."""
    return plan.error <= max_error and (not checks or checks[-1]["held_out_l2r"] <= max_error)


def plan_error(plan: mixed.Plan, checks: list[dict]) -> float:
    """The larger of a plan's errors on its own sequences and on the held-out ones."""
    return max(plan.error, checks[-1]["held_out_l2r"] if checks else 0.0)


class AutoSearch:
    """The search for one calibrated step model: its settings and sequences given when it is made, ``run`` once."""

    def __init__(self, step_float: bytes, calibrated: bytes, keys: StepKeys, sequences: np.ndarray,
                 samples: list[dict[str, np.ndarray]], streams: np.ndarray | None, *, max_error: float,
                 cost: Cost, log: Log, warn: Log):
        """``sequences``: the calibration windows; ``samples``: the float step model's recorded steps over them (in
        order, then the streams'); ``streams``: the windows chained to the horizon, or None."""
        self.step_float, self.calibrated, self.keys = step_float, calibrated, keys
        self.sequences, self.samples, self.streams = sequences, samples, streams
        self.max_error, self.cost, self.log, self.warn = max_error, cost, log, warn
        self.probe = sequences[:PLAN_SEQUENCES]
        # the plan is checked where the model will run: on the horizon's streams, else the other windows
        self.held = (streams[:HELD_OUT_SEQUENCES] if streams is not None else
                     sequences[PLAN_SEQUENCES:PLAN_SEQUENCES + HELD_OUT_SEQUENCES])
        self.held_what = (f"streams of {self.held.shape[1]} steps" if streams is not None else
                          "other calibration sequences")
        self.public_ties = [(s, s) for s in keys.state_names]

    def run(self, keyed: list[dict[str, np.ndarray]]) -> AutoStep:
        """The mixed int8/16x8 step model that meets ``max_error`` at the least estimated cost. Where even the
        16x8 model misses it, its FULLY_CONNECTED weights are tried in two int8 parts (``keyed``: the calibration
        steps TF's calibration took, in the converter's names)."""
        probe, held = self.probe, self.held
        ties = self.keys.ties
        want = mixed.run_quantized(self.step_float, probe, self.public_ties)
        want_held = mixed.run_quantized(self.step_float, held, self.public_ties) if len(held) else None
        try:
            pair = self._pair(self.calibrated)
        except mixed.MixedUnavailable as why:
            return self._uniform(why, want, want_held)
        # the rounding is fitted on the planning sequences' steps alone: the held-out ones check it
        steps = self.sequences.shape[1]
        fit = self.keys.feed(self.samples[:len(probe) * steps])
        pair, rounded = self._weight_rounding(pair, fit, (probe, want), (held, want_held))
        self.log(f"auto: choosing int8 or 16x8 per op for an error <= {self.max_error:g} on {len(probe)} sequences")
        plan, mixed_model, checks, budget = self._plan(pair, want, want_held)
        split: list[str] = []
        # where all int16 missed: on the planning sequences, or (when held-out ones exist) on those
        whole_int16 = (f"l2r {plan.int16_error:.4f}, {checks[-1]['held_out_l2r']:.4f} on {len(held)} "
                       f"{self.held_what}" if checks else f"l2r {plan.int16_error:.4f}")
        if not plan_met(plan, checks, self.max_error) and plan.int16_ops == pair.can_int16():
            # the ops whose weights' rounding alone costs the most (a share of the budget) first, then all
            x_key, y_key = self.keys.inputs[0][0], self.keys.outputs[0]
            base = mixed.run_quantized(self.calibrated, probe, ties, x_key, y_key)
            errors = two_part.weight_errors(
                self.calibrated, lambda m: mixed.l2r(mixed.run_quantized(m, probe, ties, x_key, y_key), base))
            first = {n for n, e in errors.items() if e >= TWO_PART_SHARE * self.max_error} or set(list(errors)[:1])
            for only in [first] + ([set(errors)] if first != set(errors) else []):
                with warnings.catch_warnings(), tfenv.native_stderr_captured():
                    warnings.simplefilter("ignore")
                    parted, names = two_part.split(self.calibrated, keyed, only)
                if not names:
                    break
                self.log(f"auto: even int16 misses the budget; trying the weights of {len(names)} of "
                         f"{len(errors)} FULLY_CONNECTED op(s) in two int8 parts")
                try:
                    pair2 = self._pair(parted)
                except mixed.MixedUnavailable:
                    break
                again = self._plan(pair2, want, want_held)
                if plan_error(again[0], again[2]) < plan_error(plan, checks):
                    pair, (plan, mixed_model, checks, budget), split = pair2, again, names
                    rounded = None  # two parts start from TF's rounding
                if plan_met(plan, checks, self.max_error):
                    break
        precision = mixed.precision_entry(pair, plan, mixed_model, self.max_error, probe)
        if checks:
            held_error = checks[-1]["held_out_l2r"]
            precision["held_out"] = {"sequences": len(held), "steps": int(held.shape[1]),
                                     "horizon": self.streams is not None, "l2r": held_error, "plans": checks}
            precision["met"] = plan_met(plan, checks, self.max_error)
            if len(checks) > 1:
                precision["note"] = (f"planned again for l2r <= {budget:.4g}: the first plan reached "
                                     f"{checks[0]['held_out_l2r']:.4f} on {len(held)} {self.held_what}")
            if not precision["met"] and plan.int16_ops == pair.can_int16():
                precision["note"] = (f"even int16 misses the budget {self.max_error:g} on {len(held)} "
                                     f"{self.held_what} (l2r {held_error:.4f})")
        precision["two_part_weights"] = split
        precision["weight_rounding"] = rounded or {"rounding": "nearest", "ops": []}
        if split:
            precision["note"] = "; ".join(filter(None, [
                f"even int16 missed the budget ({whole_int16}), so the weights of {len(split)} "
                f"FULLY_CONNECTED op(s) are in two int8 parts (int16 then {plan.int16_error:.4f})",
                precision.get("note")]))
        if not precision["met"]:
            reached = f"; l2r {checks[-1]['held_out_l2r']:.4f} on the {self.held_what}" if checks else ""
            self.warn(f"WARNING: --quant auto: {plan.note or 'the budget is missed'}{reached}; the step model "
                      "keeps the plan of least error found")
        for line in mixed.plan_lines(pair, plan):
            self.log(f"auto: {line}")
        model = tfl.read(mixed_model)
        y_dtype = tfl.tensor_quant(model, tfl.signature(model)[1]["y"])["dtype"]
        return AutoStep(mixed_model, y_dtype, self._y_range(pair.tied[y_dtype]), precision)

    def _y_range(self, tied: bytes) -> tuple[float, float] | None:
        tied_model = tfl.read(tied)
        return tfl.get_min_max(tied_model, tfl.signature(tied_model)[1][self.keys.outputs[0]])

    def _weight_rounding(self, pair, fit: list[dict[str, np.ndarray]], planning: tuple, held_out: tuple):
        """(pair, rounding): the pair of the calibrated model with its FULLY_CONNECTED weights in error-compensated
        rounding and their biases corrected (edgernn/tflite/rounding.py, fitted on the steps ``fit``), where
        all-int16 meets the budget with TF's rounding (on the planning sequences and the held-out ones, each a
        pair of sequences and the float model's outputs) and the compensated rounding lowers the error that
        matters there: all-int8's where either rounding lets int8 meet the budget (the plan is then int8), else
        all-int16's (the floor a mixed plan builds on). Else ``pair`` (TF's rounding) and None."""

        def errors(p, sequences, want) -> tuple[float, float]:
            return tuple(mixed.budget_error(mixed.run_quantized(mixed.splice(p, ops), sequences, p.ties, p.x_key,
                                                                p.y_key), want) for ops in ([], p.can_int16()))

        (e8, e16), held = errors(pair, *planning), (errors(pair, *held_out) if len(held_out[0]) else None)
        if max(e16, held[1] if held else 0.0) > self.max_error:
            # a fitted correction is no remedy where the weights' rounding holds the error above the budget:
            # it holds less well on other sequences (docs/quantization.md); the two-part weights are
            return pair, None
        with warnings.catch_warnings(), tfenv.native_stderr_captured():
            warnings.simplefilter("ignore")
            compensated, names = rounding.compensate(self.calibrated, fit)
            if not names:
                return pair, None
            try:
                other = self._pair(compensated)
            except mixed.MixedUnavailable:
                return pair, None

        c8, c16 = errors(other, *planning)
        dtype = 0 if min(e8, c8) <= self.max_error else 1
        better = (c8, c16)[dtype] < (e8, e16)[dtype]
        checked = ""
        if better and held:
            before, after = held[dtype], errors(other, *held_out)[dtype]
            better = after < before
            checked = f" ({('int8', 'int16')[dtype]} {before:.4f} -> {after:.4f} on {len(held_out[0])} other sequences)"
        self.log(f"auto: weights of {len(names)} FULLY_CONNECTED op(s) in error-compensated rounding: int8 "
                 f"{e8:.4f} -> {c8:.4f}, int16 {e16:.4f} -> {c16:.4f}{checked}: " + ("kept" if better else "not kept"))
        if not better:
            return pair, None
        return other, {"rounding": "compensated", "ops": names,
                       "nearest": {"int8": e8, "int16": e16}, "compensated": {"int8": c8, "int16": c16}}

    def _uniform(self, why: mixed.MixedUnavailable, want: np.ndarray, want_held: np.ndarray | None) -> AutoStep:
        """--quant auto where no mixed model can be made (``why``): the uniform model, int8 where it meets the
        budget (on the planning and the held-out sequences), else int16 where that does, else the one of least
        error, with a warning."""
        probe, held, ties = self.probe, self.held, self.public_ties
        errors, worst = {}, {}
        for dtype, (data, _) in why.models.items():
            errors[dtype] = mixed.budget_error(mixed.run_quantized(data, probe, ties), want)
            worst[dtype] = errors[dtype]
            if want_held is not None:
                worst[dtype] = max(worst[dtype],
                                   mixed.budget_error(mixed.run_quantized(data, held, ties), want_held))
        meets = [d for d in ("int8", "int16") if d in worst and worst[d] <= self.max_error]
        chosen = meets[0] if meets else min(worst, key=worst.get)
        reach = f"error {errors[chosen]:.4f}" + (f", {worst[chosen]:.4f} with {len(held)} {self.held_what}"
                                                if want_held is not None else "")
        note = (f"{why}; the uniform {chosen} model ({reach}) " +
                ("meets the budget" if meets else f"misses the budget {self.max_error:g}, the least error of the two"))
        self.log(f"auto: {note}")
        if not meets:
            self.warn(f"WARNING: --quant auto: {note}")
        precision = mixed.uniform_entry({d: m for d, (m, _) in why.models.items()}, chosen, errors,
                                        self.max_error, bool(meets), probe, ties, note)
        precision["two_part_weights"] = []
        precision["weight_rounding"] = {"rounding": "nearest", "ops": []}
        return AutoStep(why.models[chosen][0], chosen, self._y_range(why.models[chosen][1]), precision)

    def _pair(self, calibrated: bytes) -> mixed.Pair:
        return mixed.quantize_pair(calibrated, self.keys.ties, self.keys.inputs[0][0], self.keys.outputs[0],
                                   rename=self.keys.public, public=(self.public_ties, "x", "y"))

    def _plan(self, pair: mixed.Pair, want: np.ndarray, want_held: np.ndarray | None):
        """(plan, mixed model, held-out checks, last budget): the plan of least estimated cost for ``max_error``
        on the planning sequences, checked on the held-out ones and made again where it misses there."""
        probe, held = self.probe, self.held
        budget, checks = self.max_error, []
        while True:
            plan, mixed_model = mixed.plan_precision(pair, probe, want, budget, self.log, cost=self.cost)
            if not len(held) or (not plan.met and not checks):
                break
            # the plan meets the budget on the sequences it was made on; the calibration's other sequences
            # check that it holds beyond them, and a plan that misses there is made again to a tighter budget
            held_error = mixed.budget_error(mixed.run_quantized(mixed_model, held, pair.ties), want_held)
            checks.append({"budget": budget, "l2r": plan.error, "held_out_l2r": held_error})
            if held_error <= self.max_error or not plan.met or len(checks) > HELD_OUT_RETRIES:
                break
            # tighter than what the plan reached where it was made: a budget above that would give the
            # same plan again
            budget = min(budget, plan.error) * self.max_error / held_error * 0.95
            self.log(f"auto: the plan reaches {held_error:.4f} on {len(held)} {self.held_what}, "
                     f"above {self.max_error:g}: planning again for {budget:.4g} on the first {len(probe)}")
        return plan, mixed_model, checks, budget


# ---------------------------------------------------------------- the head

def choose_head(step_float: bytes, head_float: bytes, step_final: bytes, head8: bytes,
                head16: Callable[[], bytes], state_names: list[str], sequences: np.ndarray,
                streams: np.ndarray | None, log: Log) -> tuple[bytes, dict]:
    """--quant auto with a last-step head behind an int8 step output: (head, precision ``head`` entry). The head in
    16x8 (``head16`` makes it) behind a QUANTIZE from the step's int8 output, unless the int8 head ``head8`` gives
    the model's output (on the horizon's streams, else the calibration windows) less error. The head runs once a
    sequence, so its 16 bits cost next to nothing; an int8 output is one part in 256 of its range, which alone can
    be a budget's worth."""
    judged = (streams[:HELD_OUT_SEQUENCES] if streams is not None else
              sequences[:PLAN_SEQUENCES + HELD_OUT_SEQUENCES])
    # the model's output as validate compares it: the head on the last step's output, float against quantized
    ties = [(n, n) for n in state_names]
    want = np.asarray(Head(head_float).run(mixed.run_quantized(step_float, judged, ties)[:, -1]), np.float32)
    want = want[:, None, :]
    model = tfl.read(step_final)
    y_codes = quantize(mixed.run_quantized(step_final, judged, ties)[:, -1],
                       tfl.tensor_quant(model, tfl.signature(model)[1]["y"]))

    def error(head: bytes) -> float:
        head_model = tfl.read(head)
        out_entry = tfl.tensor_quant(head_model, tfl.signature(head_model)[1]["y"])
        return mixed.budget_error(dequantize(Head(head).run(y_codes), out_entry)[:, None, :], want)

    e8 = error(head8)
    behind = head_behind_seam(head16(), step_final)
    e16 = error(behind)
    log(f"auto: the model's output (the head on the last step) has an error of {e8:.4f} with an int8 head, "
        f"{e16:.4f} with a 16x8 one behind a seam")
    on = f"the last step of {len(judged)} {'streams' if streams is not None else 'calibration sequences'}"
    if e16 <= e8:
        return behind, {"dtype": "int16", "input": "int8", "error": e16, "int8_error": e8, "on": on}
    return head8, {"dtype": "int8", "error": e8, "int16_error": e16, "on": on}


def head_behind_seam(head16: bytes, step_final: bytes) -> bytes:
    """The 16x8 head taking the step's int8 output: a QUANTIZE int8 -> int16 before its first op, the int8 input
    tensor at the step output's quantization (the device hands the head the step's y bytes as they are)."""
    step = tfl.read(step_final)
    y = step.subgraphs[0].tensors[tfl.signature(step)[1]["y"]]
    model = tfl.read(head16)
    graph = model.subgraphs[0]
    inputs, _ = tfl.signature(model)
    old = inputs["h"]
    t = S.TensorT()
    t.name, t.type = b"h.int8", S.TensorType.INT8
    t.shape = np.array(graph.tensors[old].shape, dtype=np.int32)
    buf = S.BufferT()
    model.buffers.append(buf)
    t.buffer = len(model.buffers) - 1
    q = S.QuantizationParametersT()
    q.scale = np.array(y.quantization.scale, dtype=np.float32)
    q.zeroPoint = np.array(y.quantization.zeroPoint, dtype=np.int64)
    t.quantization = q
    graph.tensors.append(t)
    new = len(graph.tensors) - 1
    op = S.OperatorT()
    op.opcodeIndex = tfl.opcode(model, S.BuiltinOperator.QUANTIZE, 3)
    op.inputs = np.array([new], dtype=np.int32)
    op.outputs = np.array([old], dtype=np.int32)
    graph.operators.insert(0, op)
    graph.inputs = np.array([new if int(i) == old else int(i) for i in graph.inputs], dtype=np.int32)
    for item in model.signatureDefs[0].inputs:
        if int(item.tensorIndex) == old:
            item.tensorIndex = new
    return tfl.write(model)
