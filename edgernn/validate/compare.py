"""Running statistics for ``edgernn validate``: memory flat in the number of steps.

The device's answers arrive chunk by chunk; each chunk is compared with the interpreter's and the
float model's chunk and then dropped. What stays is sums, maxima, the first mismatch, a fixed-size
sample of cycle counts, per-window sums (the drift table) and per-bin values for the plots.
"""

from __future__ import annotations

import math
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from edgernn.metrics import ErrorSums  # noqa: F401  (validate's own measure, and its API's name)

FLOAT_RTOL = 1e-5
PLOT_POINTS = 2000
CYCLE_SAMPLE = 65536


def drift_windows(steps: int) -> list[tuple[int, int]]:
    """Windows of steps for the drift table: 0–200, 200–1,000, 1,000–2,000, 2,000–10,000, then each
    decade, all clipped to the run, and the last 1,000 steps when the run is longer than 2,000."""
    edges = [0, 200, 1000, 2000, 10_000]
    while edges[-1] < steps:
        edges.append(edges[-1] * 10)
    windows = [(a, min(b, steps)) for a, b in zip(edges, edges[1:]) if a < steps]
    if steps > 2000 and (steps - 1000, steps) not in windows:
        windows.append((steps - 1000, steps))
    return windows


def window_label(a: int, b: int) -> str:
    return f"{a:,}–{b:,}"


class ReferenceStats:
    """Device against the interpreter: exact for integer types, 1e-5 relative for float32."""

    def __init__(self, y_entry: dict, windows: list[tuple[int, int]]):
        self.entry = y_entry
        self.float = y_entry["dtype"] == "float32"
        self.mismatches = 0
        self.max_lsb = 0
        self.max_abs = 0.0
        self.compared = 0
        self.first = None
        self.state_mismatches = 0
        self.first_state_step = None
        self.states_compared = False
        self.windows = windows
        self.window_mismatches = [0] * len(windows)

    def update(self, seq: int, offset: int, device_y: np.ndarray, ref_y: np.ndarray,
               device_states: np.ndarray | None, ref_states: np.ndarray | None) -> None:
        from edgernn.tflite.oracle import dequantize

        d = device_y.astype(np.float64)
        r = ref_y.astype(np.float64)
        diff = np.abs(d - r)
        bad = diff > FLOAT_RTOL * np.maximum(np.abs(r), 1.0) if self.float else diff != 0
        if diff.size:
            if not self.float:
                self.max_lsb = max(self.max_lsb, int(diff.max()))
            self.max_abs = max(self.max_abs, float(np.max(np.abs(dequantize(device_y, self.entry)
                                                                 - dequantize(ref_y, self.entry)))))
        self.compared += int(diff.size)
        count = int(bad.sum())
        if count:
            self.mismatches += count
            for i, (a, b) in enumerate(self.windows):
                self.window_mismatches[i] += int(bad[max(a - offset, 0):max(b - offset, 0)].sum())
            if self.first is None:
                t, o = (int(v) for v in np.argwhere(bad)[0])
                self.first = {"sequence": seq, "step": offset + t, "output": o,
                              "device": float(device_y[t, o]), "reference": float(ref_y[t, o])}
        if device_states is not None and ref_states is not None:
            self.states_compared = True
            if self.float:
                dv = device_states.view(np.float32).astype(np.float64)
                rv = ref_states.view(np.float32).astype(np.float64)
                state_bad = np.abs(dv - rv) > FLOAT_RTOL * np.maximum(np.abs(rv), 1.0)
            else:
                state_bad = device_states != ref_states
            n = int(state_bad.sum())
            if n:
                self.state_mismatches += n
                if self.first_state_step is None:
                    self.first_state_step = offset + int(np.argwhere(state_bad)[0][0])

    def result(self) -> dict:
        out = {"mismatches": self.mismatches, "max_abs_lsb": self.max_lsb, "max_abs": self.max_abs,
               "compared_values": self.compared, "first_mismatch": self.first}
        if self.states_compared:
            out["state_mismatches"] = self.state_mismatches
            out["first_state_mismatch_step"] = self.first_state_step
        return out


class DriftTable:
    """Device output against the float model per window of steps (over all sequences)."""

    def __init__(self, windows: list[tuple[int, int]]):
        self.windows = windows
        self.sums = [ErrorSums() for _ in windows]

    def update(self, offset: int, device: np.ndarray, want: np.ndarray) -> None:
        n = len(device)
        for (a, b), sums in zip(self.windows, self.sums):
            lo, hi = max(a - offset, 0), min(b - offset, n)
            if lo < hi:
                sums.update(device[lo:hi], want[lo:hi])

    def rows(self, mismatches: list[int] | None = None) -> list[dict]:
        rows = []
        for i, ((a, b), sums) in enumerate(zip(self.windows, self.sums)):
            got = sums.result()
            rows.append({"steps": [a, b], "label": window_label(a, b) + (" (last 1,000)" if i == len(self.windows) - 1
                                                                       and b - a == 1000 and a > 1000 else ""),
                         "rmse": got["rmse"], "mae": got["mae"], "max_abs": got["max_abs"],
                         "reference_mismatches": mismatches[i] if mismatches else 0})
        return rows


class CycleStats:
    """Mean and maximum exactly; the median from a uniform sample of at most CYCLE_SAMPLE steps."""

    def __init__(self, seed: int = 0):
        self.n = 0
        self.total = 0.0
        self.max = 0.0
        self.sample = np.zeros(0, np.float64)
        self.rng = np.random.default_rng(seed)

    def update(self, cycles: np.ndarray) -> None:
        c = np.asarray(cycles, np.float64)
        if not c.size:
            return
        self.total += float(c.sum())
        self.max = max(self.max, float(c.max()))
        # Reservoir sampling, a chunk at a time: each step ends in the sample with equal chance.
        seen = self.n
        self.n += c.size
        room = CYCLE_SAMPLE - len(self.sample)
        if room > 0:
            self.sample = np.concatenate([self.sample, c[:room]])
            c = c[room:]
            seen += room
        if c.size:
            slots = self.rng.integers(0, seen + 1 + np.arange(c.size))
            keep = slots < CYCLE_SAMPLE
            self.sample[slots[keep]] = c[keep]

    def result(self) -> dict:
        if not self.n:
            return {"cycles_per_step": 0.0, "cycles_per_step_median": 0.0, "cycles_per_step_max": 0.0}
        return {"cycles_per_step": self.total / self.n, "cycles_per_step_median": float(np.median(self.sample)),
                "cycles_per_step_max": self.max,
                **({"cycles_median_from_sample": int(len(self.sample))} if self.n > len(self.sample) else {})}


class PlotBins:
    """At most PLOT_POINTS points per curve of sequence 0: the first value of each bin of steps for the
    outputs, and per bin the largest |device − interpreter| and the RMS error against the float model."""

    def __init__(self, steps: int, channels: int):
        self.bin = max(1, math.ceil(steps / PLOT_POINTS))
        n = math.ceil(steps / self.bin)
        self.x = np.arange(n) * self.bin
        self.device = np.full((n, channels), np.nan, np.float32)
        self.float = np.full((n, channels), np.nan, np.float32)
        self.reference = np.full((n, channels), np.nan, np.float32)
        self.ref_err = np.zeros(n, np.float64)
        self.float_sq = np.zeros(n, np.float64)
        self.float_n = np.zeros(n, np.int64)
        self.channels = channels

    def update(self, seq: int, offset: int, device: np.ndarray, reference: np.ndarray,
               want: np.ndarray | None) -> None:
        n = len(device)
        steps = offset + np.arange(n)
        bins = steps // self.bin
        err = np.abs(device - reference).max(axis=1) if device.size else np.zeros(n)
        np.maximum.at(self.ref_err, bins, err)
        if want is not None:
            np.add.at(self.float_sq, bins, ((device - want) ** 2).mean(axis=1))
            np.add.at(self.float_n, bins, 1)
        if seq == 0:
            first = steps % self.bin == 0
            c = self.channels
            self.device[bins[first]] = device[first, :c]
            self.reference[bins[first]] = reference[first, :c]
            if want is not None:
                self.float[bins[first]] = want[first, :c]


class DeviceSave:
    """``--save OUT.npz``: the device's outputs (raw and dequantized) and cycles, written as they arrive.

    Each array goes to its own temporary .npy beside the target, header first, rows appended; at the end
    they are stored (uncompressed) into the .npz, which replaces the target in one rename."""

    ARRAYS = ("y", "y_float", "cycles")

    def __init__(self, path: Path, sequences: int, steps: int, outputs: int, y_dtype):
        self.path = Path(path)
        self.folder = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.", dir=self.path.parent))
        shapes = {"y": ((sequences, steps, outputs), np.dtype(y_dtype)),
                  "y_float": ((sequences, steps, outputs), np.dtype(np.float32)),
                  "cycles": ((sequences, steps), np.dtype(np.uint32))}
        self.files = {}
        for name, (shape, dtype) in shapes.items():
            handle = open(self.folder / f"{name}.npy", "wb")
            np.lib.format.write_array_header_2_0(handle, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                          "fortran_order": False, "shape": shape})
            self.files[name] = (handle, dtype)

    def append(self, y: np.ndarray, y_float: np.ndarray, cycles: np.ndarray) -> None:
        for name, values in (("y", y), ("y_float", y_float), ("cycles", cycles)):
            handle, dtype = self.files[name]
            handle.write(np.ascontiguousarray(values, dtype).tobytes())

    def finish(self) -> Path:
        for handle, _ in self.files.values():
            handle.close()
        tmp = self.folder / "out.npz"
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            for name in self.ARRAYS:
                archive.write(self.folder / f"{name}.npy", f"{name}.npy")
        os.replace(tmp, self.path)
        self.discard()
        return self.path

    def discard(self) -> None:
        for handle, _ in self.files.values():
            handle.close()
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)


def is_edgernn_save(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as archive:
            return set(archive.namelist()) == {f"{n}.npy" for n in DeviceSave.ARRAYS}
    except (zipfile.BadZipFile, OSError):
        return False
