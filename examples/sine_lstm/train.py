"""Train a small LSTM to predict the next sample of noisy sines, and save calibration sequences.

Runs in a few seconds on two cores and makes its own data. Writes OUT/sine_lstm.keras, OUT/calib.npy
(sequences the model will see, for calibration) and OUT/test.npy (longer held-out sequences).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np


def sines(n: int, steps: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(steps + 1)[None, :]
    freq = rng.uniform(0.05, 0.25, (n, 1))
    phase = rng.uniform(0, 2 * np.pi, (n, 1))
    wave = np.sin(freq * t + phase) + 0.3 * np.sin(2.7 * freq * t) + 0.02 * rng.standard_normal((n, steps + 1))
    return wave[..., None].astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="_work/sine_lstm")
    parser.add_argument("--epochs", type=int, default=8)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import keras

    keras.utils.set_random_seed(0)
    data = sines(512, 40, seed=0)
    x, y = data[:, :-1], data[:, 1:]
    model = keras.Sequential([
        keras.Input((None, 1)),
        keras.layers.LSTM(32, return_sequences=True),
        keras.layers.Dense(1),
    ], name="sine_lstm")
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    history = model.fit(x, y, epochs=args.epochs, batch_size=32, verbose=0)
    model.save(out / "sine_lstm.keras")
    np.save(out / "calib.npy", x[:32])
    np.save(out / "test.npy", sines(4, 200, seed=1)[:, :-1])
    print(f"sine_lstm: trained {args.epochs} epochs, final mse {history.history['loss'][-1]:.5f}; saved in {out}")


if __name__ == "__main__":
    main()
