"""report.json and report.html of ``edgernn validate``: the numbers, and plots that show drift."""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

import numpy as np


def write_json(report: dict, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=_plain) + "\n")
    return path


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(type(value).__name__)


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def plots(device_float: np.ndarray, reference_float: np.ndarray, keras: np.ndarray | None,
          every_step: bool) -> list[tuple[str, str]]:
    """(title, base64 PNG) pairs: the first sequence's outputs over time, and error per step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = []
    seq = 0
    steps = np.arange(device_float.shape[1])
    channels = min(device_float.shape[2], 3)
    fig, ax = plt.subplots(figsize=(9, 3.2))
    for c in range(channels):
        ax.plot(steps, device_float[seq, :, c], label=f"device y[{c}]", lw=1.2)
        if keras is not None and every_step:
            ax.plot(steps, keras.reshape(device_float.shape)[seq, :, c], "--", label=f"float Keras y[{c}]", lw=1)
        else:
            ax.plot(steps, reference_float[seq, :, c], ":", label=f"interpreter y[{c}]", lw=1)
    ax.set_xlabel("step")
    ax.set_ylabel("output")
    ax.legend(loc="upper right", fontsize=7, ncol=2)
    figures.append(("Device output vs the float model over time (sequence 0)", _png(fig)))
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(9, 3.2))
    ref_err = np.abs(device_float - reference_float).reshape(device_float.shape[0], len(steps), -1)
    ax.plot(steps, ref_err.max(axis=(0, 2)), label="|device − interpreter| (max over sequences, outputs)")
    if keras is not None and every_step:
        k = keras.reshape(device_float.shape)
        rms = np.sqrt(np.mean((device_float - k) ** 2, axis=(0, 2)))
        ax.plot(steps, rms, label="RMS(device − float Keras)")
    ax.set_xlabel("step")
    ax.set_ylabel("error")
    ax.legend(loc="upper left", fontsize=7)
    figures.append(("Error per step (a rising curve is drift)", _png(fig)))
    plt.close(fig)
    return figures


def write_html(report: dict, path: str | Path, *, device_float: np.ndarray, reference_float: np.ndarray,
               keras: np.ndarray | None, every_step: bool) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    verdict = "PASS" if report["pass"] else "FAIL"
    rows = []
    for section in ("reference", "float", "device", "link"):
        for key, value in (report.get(section) or {}).items():
            shown = f"{value:.6g}" if isinstance(value, float) else str(value)
            rows.append(f"<tr><td>{section}</td><td>{html.escape(key)}</td><td>{html.escape(shown)}</td></tr>")
    images = "".join(f"<h2>{html.escape(title)}</h2><img alt='{html.escape(title)}' src='data:image/png;base64,{data}'>"
                     for title, data in plots(device_float, reference_float, keras, every_step))
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in report.get("notes", []))
    path.write_text(f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>edgernn validate: {verdict}</title>
<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto}}td{{padding:2px 8px}}
.pass{{color:#070}}.fail{{color:#b00}}</style></head><body>
<h1 class="{verdict.lower()}">{verdict}: {html.escape(str(report['board']))}, {html.escape(report['quant'])},
{report['steps']} steps × {report['sequences']} sequences</h1>
<p>model SHA-256 {html.escape(report['model_sha256'])}</p>
<ul>{notes}</ul>
<table>{''.join(rows)}</table>
{images}
</body></html>
""")
    return path
