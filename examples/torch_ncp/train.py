"""Train an ncps.torch CfC with an AutoNCP wiring to predict the next sample of noisy sines, then build it
for a board with edgernn's Python API and leave the data to validate it with.

Runs in well under a minute on two cores and makes its own data (fixed seeds: a run gives the same model and
files). Writes OUT/torch_ncp.pt (the module's state_dict), OUT/calib.npy (training sequences, for
calibration), OUT/test.npy (longer held-out sequences) and, with --board, the build folder OUT/<board>.
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


def make_model():
    """The module: input 1 feature, a CfC over an AutoNCP(16 neurons, 1 motor) wiring, batch-first."""
    import torch
    from ncps.torch import CfC
    from ncps.wirings import AutoNCP

    torch.manual_seed(0)
    return CfC(1, AutoNCP(16, 1, seed=0), batch_first=True, return_sequences=True)


def train(model, x: np.ndarray, y: np.ndarray, epochs: int) -> float:
    import torch

    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(0)
    loss = torch.tensor(0.0)
    model.train()
    for _ in range(epochs):
        for batch in torch.randperm(len(xs), generator=generator).split(32):
            optimizer.zero_grad()
            out, _ = model(xs[batch])
            loss = torch.nn.functional.mse_loss(out, ys[batch])
            loss.backward()
            optimizer.step()
    model.eval()
    return float(loss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="_work/torch_ncp")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--board", help="also build for this board (qemu_riscv32, gvsoc_gap8, host, ai_deck)")
    parser.add_argument("--quant", default="int8")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import torch

    data = sines(512, 40, seed=0)
    x, y = data[:, :-1], data[:, 1:]
    model = make_model()
    loss = train(model, x, y, args.epochs)
    torch.save(model.state_dict(), out / "torch_ncp.pt")
    np.save(out / "calib.npy", x[:32])
    test = sines(4, 200, seed=1)
    np.save(out / "test.npy", test[:, :-1])
    with torch.no_grad():
        held = float(torch.nn.functional.mse_loss(model(torch.from_numpy(test[:, :-1]))[0],
                                                  torch.from_numpy(test[:, 1:])))
    print(f"torch_ncp: trained {args.epochs} epochs, final batch mse {loss:.5f}, held-out mse {held:.5f}; "
          f"saved in {out}")

    if args.board:
        import edgernn

        edgernn.build(model, out / args.board, board=args.board, quant=args.quant, calib=x[:32])
        print(f"built for {args.board} -> {out / args.board}; validate with: "
              f"edgernn validate {out / args.board} --data {out / 'test.npy'}")


if __name__ == "__main__":
    main()
