"""``check_same_answers``: the NNTool layout of a step model must give LiteRT's answers of the step model itself,
within SAME_ANSWER_REL of each output's largest magnitude over the calibration steps. Two float graphs stand for
the pair: y = x0 - x1, and the same with x0 scaled by 1 + 1e-6 (the size of an ulp-level rewrite that an LTC's
ODE unfolds carry into its output), or a wrong graph, y = x0 + x1."""

from __future__ import annotations

import numpy as np
import pytest

from edgernn.errors import EdgeRNNError
from edgernn.targets.gap8.nntool_graph import check_same_answers


def _graph(fn) -> bytes:
    import tensorflow as tf

    class Step(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 2], tf.float32, name="x")])
        def serve(self, x):
            return {"y": fn(x)}

    step = Step()
    return tf.lite.TFLiteConverter.from_concrete_functions([step.serve.get_concrete_function()], step).convert()


# (case, the second graph, the steps' x, whether the answers agree)
CASES = [
    # the rewrite's error is 1e-4 of y at the first step, where y is small, and 1e-6 of y's largest
    ("ulp-level, small y at one step", lambda x: x[:, :1] * 1.000001 - x[:, 1:], [[1.0, 0.99], [1.0, -0.5]], True),
    ("ulp-level, y small at every step", lambda x: x[:, :1] * 1.000001 - x[:, 1:], [[1.0, 0.99], [1.0, 0.98]], False),
    ("a wrong graph", lambda x: x[:, :1] + x[:, 1:], [[1.0, 0.99], [1.0, -0.5]], False),
]


@pytest.mark.parametrize("case, other, xs, agree", CASES, ids=[c[0] for c in CASES])
def test_answers_are_compared_against_each_outputs_largest_magnitude(case, other, xs, agree):
    step, nntool = _graph(lambda x: x[:, :1] - x[:, 1:]), _graph(other)
    steps = [{"x": np.array([x], np.float32)} for x in xs]
    if agree:
        check_same_answers(step, nntool, steps)
    else:
        with pytest.raises(EdgeRNNError, match=r"step_nntool.tflite's y differs from step.tflite's at calibration"):
            check_same_answers(step, nntool, steps)
