"""--quant auto on the shapes of model it meets beyond the tests' own: NCP cells of other sizes and modes, front ends
(a Dense with a fixed-scale activation, a LayerNormalization, a causal Conv1D, a per-frame CNN), last-step outputs,
stacked and legacy cells. Random (seeded) weights, not trained.

Each model is built for the board with each --quant given (int8 and auto by default), calibrated on 32 smooth
trajectories of 200 steps (zoo.trajectories; frames: 16 sequences of 60 moving-blob frames), and validated on 2
other sequences: the table gives the device's l2r against the float model on those, its mismatching output and state
bytes against LiteRT, the plan (int16 and int8 ops, seams, two-part FULLY_CONNECTEDs) and its error on the
calibration data, the build's weight + arena bytes and the cycles per step (on gvsoc_gap8 GVSOC's timing model, not
a chip). A build that fails prints its one-line error.

    PYTHONPATH=$PWD python bench/bench_auto_zoo.py [--board host] [--quant int8 auto] [--model cfc]

--model keeps the models whose name starts with it. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
from pathlib import Path

from edgernn.testing.bench import plan_text


def models():
    """name -> builder of (Keras model, input features, or "frames")."""
    from edgernn.testing import frames_zoo
    from edgernn.testing import zoo

    def seq(n_in, *layers):
        keras = zoo._keras(0)
        return keras.Sequential([keras.Input((None, n_in)), *layers])

    def ncps():
        import ncps.keras
        from ncps.wirings import AutoNCP, FullyConnected

        return ncps.keras, AutoNCP, FullyConnected

    def L():
        return zoo._keras(0).layers

    def cfc(wiring, **kw):
        nk, _, _ = ncps()
        return nk.CfC(wiring, return_sequences=kw.pop("return_sequences", True), **kw)

    return {
        "cfc_ncp32": lambda: (seq(6, cfc(ncps()[1](32, 4, seed=1))), 6),
        "cfc_pure": lambda: (seq(4, cfc(ncps()[1](16, 2, seed=2), mode="pure")), 4),
        "cfc_units": lambda: (seq(5, cfc(24), L().Dense(2)), 5),
        "cfc_last": lambda: (seq(4, cfc(ncps()[1](16, 2, seed=6), return_sequences=False)), 4),
        "cfc_after_tanh": lambda: (seq(4, L().Dense(8, activation="tanh"), cfc(ncps()[1](14, 2, seed=7))), 4),
        "cfc_after_layernorm": lambda: (seq(4, L().Dense(8), L().LayerNormalization(), cfc(ncps()[1](14, 2, seed=8))), 4),
        "cfc_after_conv1d": lambda: (seq(3, L().Conv1D(8, 3, padding="causal", activation="relu"),
                                         cfc(ncps()[1](16, 2, seed=5))), 3),
        "cfc_frames": lambda: (frames_zoo.frame_cfc(), "frames"),
        "ltc_ncp24": lambda: (seq(5, ncps()[0].LTC(ncps()[1](24, 3, seed=4), return_sequences=True)), 5),
        "ltc_fully_connected": lambda: (seq(3, ncps()[0].LTC(ncps()[2](12, 2), return_sequences=True)), 3),
        "lstm_sigmoid32": lambda: (seq(6, L().LSTM(32, activation="sigmoid", return_sequences=True), L().Dense(4)), 6),
        "lstm_last": lambda: (seq(4, L().LSTM(16, activation="sigmoid"), L().Dense(2)), 4),
        "lstm_gru_stacked": lambda: (seq(4, L().LSTM(16, return_sequences=True), L().GRU(12, return_sequences=True),
                                         L().Dense(2)), 4),
        "simplernn_relu32": lambda: (seq(4, L().Dense(16), L().SimpleRNN(32, activation="relu", return_sequences=True),
                                         L().Dense(2)), 4),
        "gru_reset_before": lambda: (seq(4, L().GRU(20, reset_after=False, return_sequences=True), L().Dense(2)), 4),
        "gru_after_tcn": lambda: (frames_zoo.tcn_gru(), 3),
    }


def main() -> int:
    import numpy as np

    from edgernn.errors import EdgeRNNError
    from edgernn.pipeline.build import build_model
    from edgernn.testing import frames_zoo, zoo
    from edgernn.validate.run import validate

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="host")
    ap.add_argument("--quant", nargs="+", default=["int8", "auto"])
    ap.add_argument("--model", default="")
    args = ap.parse_args()
    print(f"board {args.board}; l2r: the device against the float model on 2 test sequences; plan: int16/int8 ops, "
          "seams, two-part FCs, l2r on calibration")
    print(f"{'model':22} {'quant':6} {'l2r':>7} {'mismatches':>10} {'plan':>26} {'bytes':>7} {'cycles/step':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in models().items():
            if not name.startswith(args.model):
                continue
            model, n_in = make()
            path = Path(tmp) / f"{name}.keras"
            model.save(path)
            if n_in == "frames":
                calib, test = frames_zoo.moving_blobs(16, 60, 12, 12, 1, 1), frames_zoo.moving_blobs(2, 100, 12, 12, 1, 99)
            else:
                calib, test = zoo.trajectories(32, 200, n_in, 1), zoo.trajectories(2, 200, n_in, 99)
            for quant in args.quant:
                out = Path(tmp) / f"{name}-{quant}"
                try:
                    with contextlib.redirect_stdout(io.StringIO()):
                        build_model(str(path), out, board=args.board, quant=quant, calib=calib)
                        report = validate(out, data=test)
                except EdgeRNNError as err:
                    print(f"{name:22} {quant:6} error: {err}")
                    continue
                plan = plan_text(out)
                ref, dev = report["reference"], report["device"]
                print(f"{name:22} {quant:6} {report['float']['l2r']:7.4f} "
                      f"{ref['mismatches']:>5}/{ref['state_mismatches']:<4} {plan:>26} "
                      f"{dev['weight_bytes'] + dev['arena_bytes']:>7} {np.round(dev['cycles_per_step'] or 0):>12,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
