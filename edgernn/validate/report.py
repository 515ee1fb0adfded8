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
    _write_whole(path, json.dumps(report, indent=2, default=_plain) + "\n")
    return path


def _write_whole(path: Path, text: str) -> None:
    """Write beside, then rename: a full disk leaves the earlier file, never half of a new one."""
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    from edgernn.outdir import umask

    return umask()


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


def plots(plot, every_step: bool) -> list[tuple[str, str]]:
    """(title, base64 PNG) pairs from ``compare.PlotBins``: the first sequence's outputs over time,
    and the error per bin of steps (at most PLOT_POINTS points, whatever the run's length)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = []
    steps = plot.x
    have_float = bool(plot.float_n.any())
    every = f" (every {plot.bin} steps)" if plot.bin > 1 else ""
    fig, ax = plt.subplots(figsize=(9, 3.2))
    for c in range(plot.channels):
        ax.plot(steps, plot.device[:, c], label=f"device y[{c}]", lw=1.2)
        if have_float and every_step:
            ax.plot(steps, plot.float[:, c], "--", label=f"float model y[{c}]", lw=1)
        else:
            ax.plot(steps, plot.reference[:, c], ":", label=f"interpreter y[{c}]", lw=1)
    ax.set_xlabel("step")
    ax.set_ylabel("output")
    ax.legend(loc="upper right", fontsize=7, ncol=2)
    figures.append((f"Device output vs the float model over time (sequence 0{every})", _png(fig)))
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(9, 3.2))
    ax.plot(steps, plot.ref_err, label="|device − interpreter| (max over sequences, outputs"
                                       + (", steps of the bin)" if plot.bin > 1 else ")"))
    if have_float:
        rms = np.sqrt(plot.float_sq / np.maximum(plot.float_n, 1))
        ax.plot(steps, rms, label="RMS(device − float model)")
    ax.set_xlabel("step")
    ax.set_ylabel("error")
    ax.legend(loc="upper left", fontsize=7)
    figures.append(("Error per step (a rising curve is drift)", _png(fig)))
    plt.close(fig)
    return figures


def _drift_table(report: dict) -> str:
    rows = report.get("drift") or []
    if not rows:
        return ""
    cells = []
    for row in rows:
        values = [row["label"]] + [f"{row[k]:.4g}" if row.get(k) is not None else "–"
                                   for k in ("rmse", "mae", "max_abs")] + [str(row.get("reference_mismatches", 0))]
        cells.append("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in values) + "</tr>")
    return ("<h2>Drift: error against the float model per window of steps</h2><table><tr><th>steps</th><th>rmse</th>"
            "<th>mae</th><th>max abs</th><th>mismatches vs interpreter</th></tr>" + "".join(cells) + "</table>")


def write_html(report: dict, path: str | Path, *, plot, every_step: bool) -> Path:
    path = Path(path)
    verdict = "PASS" if report["pass"] else "FAIL"
    rows = []
    for section in ("reference", "float", "inputs", "device", "link"):
        for key, value in (report.get(section) or {}).items():
            shown = f"{value:.6g}" if isinstance(value, float) else str(value)
            rows.append(f"<tr><td>{section}</td><td>{html.escape(key)}</td><td>{html.escape(shown)}</td></tr>")
    images = "".join(f"<h2>{html.escape(title)}</h2><img alt='{html.escape(title)}' src='data:image/png;base64,{data}'>"
                     for title, data in plots(plot, every_step))
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in report.get("notes", []))
    _write_whole(path, f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>edgernn validate: {verdict}</title>
<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto}}td,th{{padding:2px 8px}}
.pass{{color:#070}}.fail{{color:#b00}}</style></head><body>
<h1 class="{verdict.lower()}">{verdict}: {html.escape(str(report['board']))}, {html.escape(report['quant'])},
{report['steps']} steps × {report['sequences']} sequences</h1>
<p>model SHA-256 {html.escape(report['model_sha256'])}</p>
<ul>{notes}</ul>
{_drift_table(report)}
<table>{''.join(rows)}</table>
{images}
</body></html>
""")
    return path
