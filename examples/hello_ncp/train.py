"""A CfC with an AutoNCP wiring that learns a two-channel time series (sine and cosine to a mixed target).

In the spirit of the `hello_ncp` example NCP users bring to the AI-deck: trains in seconds on two cores on
data it generates, then saves OUT/hello_ncp.keras, OUT/calib.npy and OUT/test.npy.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np


def series(n: int, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 3 * np.pi, steps)[None, :]
    phase = rng.uniform(0, 2 * np.pi, (n, 1))
    x = np.stack([np.sin(t + phase), np.cos(t + phase)], axis=-1)
    y = np.sin(2 * (t + phase))[..., None]
    return x.astype(np.float32), y.astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="_work/hello_ncp")
    parser.add_argument("--epochs", type=int, default=30)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import keras
    import ncps.keras
    from ncps.wirings import AutoNCP

    keras.utils.set_random_seed(0)
    x, y = series(64, 48, seed=0)
    model = keras.Sequential([
        keras.Input((None, 2)),
        ncps.keras.CfC(AutoNCP(16, 1, seed=0), return_sequences=True),
    ], name="hello_ncp")
    model.compile(optimizer=keras.optimizers.Adam(0.02), loss="mse")
    history = model.fit(x, y, epochs=args.epochs, batch_size=16, verbose=0)
    model.save(out / "hello_ncp.keras")
    np.save(out / "calib.npy", x[:16])
    np.save(out / "test.npy", series(2, 240, seed=1)[0])
    print(f"hello_ncp: trained {args.epochs} epochs, final mse {history.history['loss'][-1]:.4f}; saved in {out}")


if __name__ == "__main__":
    main()
