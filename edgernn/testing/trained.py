"""Small TRAINED models of the kinds --quant auto is for, on a real trajectory task, cached on disk.

Random weights (edgernn/testing/zoo.py) exercise the conversion; trained weights are what users bring, and
they differ where quantization is concerned: larger, skewed weights, saturating gates, states that drift
far from zero, sums that grow. Each model here is trained briefly (seeded, a few epochs on CPU) to track a
forced, damped oscillator from its forcing and a noisy measurement of its position: a small
state-estimation task of the kind a controller's recurrent model does.

    inputs  (3): forcing u_t, noisy position p_t + noise, the sequence's stiffness k (constant)
    targets (2): position and velocity of the next step, p_{t+1} and v_{t+1}

The velocity is never measured, so the model must integrate: its state carries it.

Models (``TRAINED``): ``cfc_ncp`` (CfC on an AutoNCP(16, 2) wiring), ``ltc_ncp`` (LTC on an AutoNCP(16, 2)
wiring), ``lstm_sigmoid`` (LSTM(16, activation="sigmoid") then Dense(2)), ``dense_simplernn_relu``
(Dense(12) then SimpleRNN(16, relu) then Dense(2)).

The weights training gives depend on the machine (its CPU, its threads), and one machine's weights reach
rounding corners another's never do: an LTC trained on a newcomer's machine left a state byte 1 LSB off at step
143, on weights no developer's machine had made. So the tests read the seed-0 models as test data,
``tests/fixtures/trained/<name>.keras`` (the LTC's is that machine's), the same on every machine; their
calibration and test trajectories are made again here, which numpy's seeded generator does identically
everywhere. ``python -m edgernn.testing.trained --write-fixtures`` trains the other three again and writes them.

``train(name, folder, seed)`` trains (the benches' other seeds, bench/bench_trained_seeds.py); ``trained(name)``
reads the fixture, or for a model without one trains once and caches the saved model with its trajectories under
``$TMPDIR/edgernn-trained/<hash>/``, the hash of this file and of the Keras version.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgernn.testing import TESTS

FEATURES, OUTPUTS = 3, 2
DT = 0.1
TRAIN_SEQUENCES, TRAIN_STEPS = 96, 120
CALIB_SEQUENCES, STEPS = 32, 200


def oscillator(n_seq: int, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets) of ``n_seq`` sequences of a forced damped oscillator, p'' = u - c p' - k p,
    integrated semi-implicitly with step DT: inputs (n_seq, steps, 3), targets (n_seq, steps, 2)."""
    rng = np.random.default_rng(seed)
    k = rng.uniform(0.5, 3.0, n_seq)
    c = rng.uniform(0.3, 0.8, n_seq)
    t = np.arange(steps) * DT
    # forcing: a sum of two sines and a step that switches at a random time
    u = np.zeros((n_seq, steps))
    for _ in range(2):
        u += rng.uniform(0.2, 1.0, (n_seq, 1)) * np.sin(rng.uniform(0.2, 2.0, (n_seq, 1)) * t
                                                        + rng.uniform(0, 2 * np.pi, (n_seq, 1)))
    switch = rng.integers(0, steps, n_seq)
    u += rng.uniform(-1.0, 1.0, (n_seq, 1)) * (np.arange(steps)[None, :] >= switch[:, None])
    p = rng.uniform(-1.0, 1.0, n_seq)
    v = rng.uniform(-1.0, 1.0, n_seq)
    xs, ys = np.zeros((n_seq, steps, FEATURES)), np.zeros((n_seq, steps, OUTPUTS))
    for s in range(steps):
        xs[:, s] = np.stack([u[:, s], p + 0.05 * rng.standard_normal(n_seq), k], axis=-1)
        v = v + DT * (u[:, s] - c * v - k * p)
        p = p + DT * v
        ys[:, s] = np.stack([p, v], axis=-1)
    return xs.astype(np.float32), ys.astype(np.float32)


def _keras(seed: int):
    import keras

    keras.utils.set_random_seed(seed)
    return keras


def cfc_ncp(seed: int = 0):
    keras = _keras(seed)
    import ncps.keras
    from ncps.wirings import AutoNCP

    return keras.Sequential([keras.Input((None, FEATURES)),
                             ncps.keras.CfC(AutoNCP(16, OUTPUTS, seed=seed), return_sequences=True)], name="cfc_ncp")


def ltc_ncp(seed: int = 0):
    keras = _keras(seed)
    import ncps.keras
    from ncps.wirings import AutoNCP

    return keras.Sequential([keras.Input((None, FEATURES)),
                             ncps.keras.LTC(AutoNCP(16, OUTPUTS, seed=seed), return_sequences=True)], name="ltc_ncp")


def lstm_sigmoid(seed: int = 0):
    keras = _keras(seed)
    L = keras.layers
    return keras.Sequential([keras.Input((None, FEATURES)), L.LSTM(16, activation="sigmoid", return_sequences=True),
                             L.Dense(OUTPUTS)], name="lstm_sigmoid")


def dense_simplernn_relu(seed: int = 0):
    keras = _keras(seed)
    L = keras.layers
    return keras.Sequential([keras.Input((None, FEATURES)), L.Dense(12),
                             L.SimpleRNN(16, activation="relu", return_sequences=True), L.Dense(OUTPUTS)],
                            name="dense_simplernn_relu")


# name -> (builder, epochs, learning rate)
TRAINED = {
    "cfc_ncp": (cfc_ncp, 20, 0.01),
    "ltc_ncp": (ltc_ncp, 30, 0.02),
    "lstm_sigmoid": (lstm_sigmoid, 60, 0.01),
    "dense_simplernn_relu": (dense_simplernn_relu, 60, 0.003),
}


@dataclass
class Trained:
    name: str
    path: Path             # the saved .keras model
    calib: np.ndarray      # (32, 200, 3) trajectories of the task: what a user calibrates on
    test: np.ndarray       # (8, 200, 3) other trajectories of the task, within the calibration's ranges
    loss: float            # the training set's mse (after the last epoch, or of the fixture's weights)


def cache_dir() -> Path:
    import keras

    key = hashlib.sha256(Path(__file__).read_bytes() + keras.__version__.encode()).hexdigest()[:16]
    return Path(os.environ.get("EDGERNN_TRAINED_CACHE", Path(tempfile.gettempdir()) / "edgernn-trained")) / key


def train(name: str, folder: Path, seed: int = 0) -> None:
    """Train ``name`` (its weights and wiring drawn with ``seed``) and write ``<name>.keras``, its calibration and
    test trajectories and its loss."""
    build, epochs, rate = TRAINED[name]
    model = build(seed)
    x, y = oscillator(TRAIN_SEQUENCES, TRAIN_STEPS, seed=1)
    keras = _keras(0)
    model.compile(optimizer=keras.optimizers.Adam(rate, clipnorm=1.0), loss="mse")
    history = model.fit(x, y, epochs=epochs, batch_size=16, verbose=0, shuffle=True)
    calib, test = trajectories()
    folder.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    # written under temporary names, then renamed: a concurrent session never reads half a file
    for suffix, write in ((".calib.npy", lambda p: np.save(p, calib)), (".test.npy", lambda p: np.save(p, test)),
                          (".loss", lambda p: p.write_text(repr(float(history.history["loss"][-1])))),
                          (".keras", lambda p: model.save(p))):
        tmp = folder / f"{name}.{pid}.tmp{suffix}"
        write(tmp)
        os.replace(tmp, folder / f"{name}{suffix}")


FIXTURES = TESTS / "fixtures" / "trained"


# ---- a model whose state matters over hundreds of steps, read once at the end (issue 51's kind) ----

def leaky_integral(n_seq: int, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(inputs (n_seq, steps, 2), targets (n_seq, steps, 2)): a noisy input with a per-sequence bias and rare
    pulses, and its leaky integral (time constant 100 steps) with that integral's tanh. At 40 steps the integral
    has built up to a third of where it goes; at 200, to most of it."""
    rng = np.random.default_rng(seed)
    u = rng.normal(0, 1, (n_seq, steps)) * 0.5 + rng.uniform(-0.3, 0.3, (n_seq, 1))
    u = u + (rng.random((n_seq, steps)) < 0.02) * rng.normal(0, 3, (n_seq, steps))
    integral, acc = np.zeros((n_seq, steps)), np.zeros(n_seq)
    for t in range(steps):
        acc = 0.99 * acc + 0.05 * u[:, t]
        integral[:, t] = acc
    x = np.stack([u, rng.normal(0, 0.1, (n_seq, steps))], -1).astype(np.float32)
    return x, np.stack([integral, np.tanh(integral)], -1).astype(np.float32)


def lstm_final_head():
    """LSTM(16, activation="sigmoid", dropout=0.1) and a Dense(2) head on its last output, trained on sequences
    of 60 to 300 steps of ``leaky_integral`` (target: the last step's): tests/fixtures/trained/lstm_final_head.keras.
    Users calibrate it on 40-step windows (``leaky_integral(64, 40, 2)``) and run it over hundreds of steps
    (``leaky_integral(8, 200, 3)``)."""
    return FIXTURES / "lstm_final_head.keras"


def train_lstm_final_head(path: Path, epochs: int = 12) -> None:
    """Train ``lstm_final_head``'s model again and save it at ``path``."""
    keras = _keras(0)
    L = keras.layers
    model = keras.Sequential([keras.Input((None, 2)), L.LSTM(16, activation="sigmoid", dropout=0.1), L.Dense(2)],
                             name="lstm_final")
    model.compile(optimizer=keras.optimizers.Adam(0.01, clipnorm=1.0), loss="mse")
    for epoch in range(epochs):
        for steps in (60, 120, 200, 300):
            x, y = leaky_integral(256, steps, 100 + epoch * 10 + steps)
            model.fit(x, y[:, -1], epochs=1, batch_size=32, verbose=0)
    model.save(path)


def trajectories() -> tuple[np.ndarray, np.ndarray]:
    """The calibration and test trajectories every trained model is built and validated on."""
    calib, _ = oscillator(CALIB_SEQUENCES, STEPS, seed=2)
    test, _ = oscillator(8, STEPS, seed=3)
    return calib, test


def trained(name: str) -> Trained:
    """The trained model ``name`` (see TRAINED): its fixture, else from the cache or trained now."""
    fixture = FIXTURES / f"{name}.keras"
    if fixture.is_file():
        calib, test = trajectories()
        return Trained(name, fixture, calib, test, float((FIXTURES / f"{name}.loss").read_text()))
    folder = cache_dir()
    if not (folder / f"{name}.keras").exists():
        train(name, folder)
    return Trained(name, folder / f"{name}.keras", np.load(folder / f"{name}.calib.npy"),
                   np.load(folder / f"{name}.test.npy"), float((folder / f"{name}.loss").read_text()))


if __name__ == "__main__":
    import argparse
    import shutil

    parser = argparse.ArgumentParser(description="Train the seed-0 models again and write them as test data "
                                                 "(tests/fixtures/trained/); the LTC's fixture is kept unless named.")
    parser.add_argument("--write-fixtures", action="store_true", required=True)
    parser.add_argument("names", nargs="*", default=["cfc_ncp", "lstm_sigmoid", "dense_simplernn_relu"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.names:
            train(name, Path(tmp))
            FIXTURES.mkdir(parents=True, exist_ok=True)
            for suffix in (".keras", ".loss"):
                shutil.copy(Path(tmp) / f"{name}{suffix}", FIXTURES / f"{name}{suffix}")
            print(f"{name}: loss {(FIXTURES / f'{name}.loss').read_text()}")
