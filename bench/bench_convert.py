"""Wall time of `edgernn convert` for a 64-unit LSTM at int8, beside TensorFlow's bare converter on the
same step model (the same calibration samples, without trajectories, state ties or checks).

    python bench/bench_convert.py
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    from edgernn import tfenv
    from edgernn.pipeline.convert import convert
    from edgernn.keras.decompose import decompose
    from edgernn.tflite.quantize import run_step_sequences
    from edgernn.keras.stepmodel import build_step_model

    from edgernn.testing import zoo

    tf = tfenv.tensorflow()
    keras = tfenv.keras3()
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((None, 8)), keras.layers.LSTM(64, return_sequences=True),
                              keras.layers.Dense(4)], name="lstm64")
    calib = zoo.trajectories(8, 50, 8, seed=0)

    with tempfile.TemporaryDirectory() as tmp:
        model.save(Path(tmp) / "lstm64.keras")
        convert(Path(tmp) / "lstm64.keras", Path(tmp) / "warm", quant="int8", calib=calib)  # warm caches
        start = time.perf_counter()
        convert(Path(tmp) / "lstm64.keras", Path(tmp) / "out", quant="int8", calib=calib, mode="step")
        edgernn_s = time.perf_counter() - start

    plan = decompose(model, "keras")
    step = build_step_model(plan, keras)
    float_model = tf.lite.TFLiteConverter.from_keras_model(step.keras_model).convert()
    names = [k for k, _ in step.input_names]
    renamed = {k: p for k, p in step.input_names}
    samples = []
    for seq in calib:
        state = {k: np.zeros((1, 64), np.float32) for k in names[1:]}
        for x in seq:
            samples.append({"x": x[None], **state})
    start = time.perf_counter()
    with warnings.catch_warnings(), tfenv.native_stderr_captured():
        warnings.simplefilter("ignore")
        conv = tf.lite.TFLiteConverter.from_keras_model(step.keras_model)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = lambda: iter(samples)
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.convert()
    bare_s = time.perf_counter() - start
    del float_model, renamed

    print(f"64-unit LSTM, int8, {calib.shape[0]}x{calib.shape[1]} calibration steps")
    print(f"  edgernn convert (load, step model, float check, trajectories, tied int8, error check): {edgernn_s:6.2f} s")
    print(f"  bare TFLiteConverter on the same step model (int8, zero-state samples):               {bare_s:6.2f} s")


if __name__ == "__main__":
    main()
