"""report.json and report.html of ``edgernn validate``.

report.html is one file that reads offline (its plots inline, no script, nothing fetched): a header that says
what ran (the model, the board, edgernn's version, the date), a summary that reads at a glance (the verdict,
exactness, the error against the float model and its drift, the speed, the memory), then a section for each
(docs/report.md). The numbers are computed and worded here; templates/report/report.html.j2 lays them out."""

from __future__ import annotations

import base64
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


# ---- report.html ----

OP_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
             "#bab0ac", "#86bcb6", "#d4a6c8")
WAIT_COLOR = "#c9ced4"
OUTPUT_POINTS = 400     # the output plot shows the first steps, where a line can be followed
PLACED_COLORS = {"weights": "#4e79a7", "weights_src": "#a0cbe8", "state": "#f28e2b", "arena": "#59a14f",
                 "dma_tiles": "#b07aa1", "stream_tiles": "#ff9da7", "input": "#e15759"}
STREAMED_COLOR = "#9c755f"
CODE_COLOR, LINK_COLOR, RESERVE_COLOR = "#76b7b2", "#edc948", "#d5d9de"
PLACED_NAMES = {"weights": "weights", "weights_src": "weights (the source of the fast copy)", "state": "state",
                "arena": "arena", "dma_tiles": "DMA tiles", "stream_tiles": "stream tiles",
                "input": "the step's input, copied"}


def _g(value, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}g}"


def _count(value) -> str:
    return "–" if value is None else f"{round(value):,}"


def bytes_text(n, none: str = "–") -> str:
    """A byte count as people read it: B, KiB or MiB; ``none`` for an unknown count."""
    if n is None:
        return none
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} KiB"
    return f"{n} B"


def _hz(hz: int) -> str:
    return f"{hz / 1e9:g} GHz" if hz >= 1e9 else f"{hz / 1e6:g} MHz"


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plots(report: dict, plot, every_step: bool) -> list[dict]:
    """The figures of the float-model and drift sections, each ``{section, title, caption, png}``:
    the first sequence's outputs (at most PLOT_POINTS points, whatever the run's length), the error per
    step, and the drift windows."""
    plt = _pyplot()
    figures = []
    steps = plot.x
    exact = report["reference"]["mismatches"] == 0
    have_float = bool(plot.float_n.any()) and every_step
    last = int(steps[min(len(steps), OUTPUT_POINTS) - 1]) if len(steps) else 0
    every = (f", steps 0–{last:,}" if len(steps) > OUTPUT_POINTS else "") + \
        (f" (the first step of every {plot.bin})" if plot.bin > 1 else "")
    shown = slice(0, min(len(steps), OUTPUT_POINTS))
    fig, ax = plt.subplots(figsize=(9, 3.2))
    for c in range(plot.channels):
        color = OP_COLORS[c % len(OP_COLORS)]
        if have_float:
            ax.plot(steps[shown], plot.float[shown, c], color=color, alpha=0.35, lw=4, label=f"float model y[{c}]")
        ax.plot(steps[shown], plot.device[shown, c], color=color, lw=1.1, label=f"device y[{c}]")
        if not exact:
            ax.plot(steps[shown], plot.reference[shown, c], ":", color="black", label=f"interpreter y[{c}]", lw=1)
    ax.set_xlabel("step")
    ax.set_ylabel("output")
    ax.legend(loc="upper right", fontsize=7, ncol=2)
    same = ("The TFLite interpreter's output equals the device's at every step, byte for byte, so it is not drawn "
            "again." if exact else f"The interpreter's output is drawn dotted: {report['reference']['mismatches']:,} "
            "output values differ from the device's.")
    if have_float:
        title, why = f"Device output against the float model, sequence 0{every}", \
            "Thin: the device; broad and light: the float model it was quantized from."
    elif every_step:
        title, why = f"Device output, sequence 0{every}", \
            f"No float model to compare with ({report['float'].get('skipped') or 'none'})."
    else:
        title, why = f"Device output at each step, sequence 0{every}", \
            "The float model is compared once per sequence, on the head's output after the last step (numbers above)."
    figures.append({"section": "float", "title": title, "caption": f"{why} {same}", "png": _png(fig)})
    plt.close(fig)

    have_any_float = bool(plot.float_n.any())
    if have_any_float or not exact:
        fig, ax = plt.subplots(figsize=(9, 3.2))
        if have_any_float:
            rms = np.sqrt(plot.float_sq / np.maximum(plot.float_n, 1))
            ax.plot(steps, rms, label="RMS(device − float model), over sequences and outputs")
        if not exact:
            ax.plot(steps, plot.ref_err, label="|device − interpreter|, the largest over sequences and outputs")
        ax.set_xlabel("step")
        ax.set_ylabel("error")
        ax.legend(loc="upper left", fontsize=7)
        binned = f" Each point is a bin of {plot.bin} steps (the RMS over the bin, the largest difference in it)." \
            if plot.bin > 1 else ""
        caption = ("The device never differs from the interpreter: this is the quantization's error alone. "
                   if exact else "") + "A curve that rises with the steps is drift." + binned
        figures.append({"section": "float", "title": "Error per step", "caption": caption, "png": _png(fig)})
        plt.close(fig)

    rows = [r for r in report.get("drift") or [] if r.get("rmse") is not None]
    if rows:
        fig, ax = plt.subplots(figsize=(9, 2.8))
        labels = [r["label"] for r in rows]
        ax.bar(range(len(rows)), [r["rmse"] for r in rows], color="#4e79a7", label="rmse")
        ax.plot(range(len(rows)), [r["max_abs"] for r in rows], "o", color="#e15759", label="max abs")
        ax.set_xticks(range(len(rows)), labels, fontsize=8)
        ax.set_xlabel("window of steps")
        ax.set_ylabel("error against the float model")
        ax.legend(loc="upper left", fontsize=7)
        figures.append({"section": "drift", "title": "Error against the float model per window of steps",
                        "caption": "Over all sequences. Bars of one height: the error does not grow with the steps.",
                        "png": _png(fig)})
        plt.close(fig)
    return figures


def _head(report: dict) -> dict:
    from edgernn.targets.board import load_board
    from edgernn.errors import EdgeRNNError

    about = ""
    try:
        about = load_board(report["board"]).description if report.get("board") else ""
    except EdgeRNNError:
        pass
    date = report.get("date") or ""
    return {"model": report.get("model") or f"model {report['model_sha256'][:12]}",
            "board": str(report.get("board")), "board_about": about, "quant": report["quant"],
            "run": f"{report['steps']:,} steps × {report['sequences']:,} sequence{'s' if report['sequences'] > 1 else ''}",
            "version": report.get("edgernn_version") or "?", "date": date.replace("T", " "),
            "sha": report["model_sha256"]}


def _exact(report: dict) -> tuple[dict, dict]:
    ref = report["reference"]
    floaty = report["quant"] == "float32"
    states = ref.get("state_mismatches")
    first = ref.get("first_mismatch")
    if report["pass"]:
        say = ("Every output and state the device gave is within 1e-5 (relative) of the TFLite interpreter's."
               if floaty else "Every output and state byte the device gave equals the TFLite interpreter's, "
               "the reference its C was generated to match.")
    else:
        where = (f" The first differs at sequence {first['sequence']}, step {first['step']:,}, output "
                 f"{first['output']}: device {_g(first['device'])}, interpreter {_g(first['reference'])}."
                 if first else "")
        say = (f"{ref['mismatches']:,} of {ref['compared_values']:,} output values"
               + (f" and {states:,} state bytes" if states else "") + " differ from the TFLite interpreter's." + where)
    worst = _g(ref["max_abs"]) if floaty else f"{ref['max_abs_lsb']} LSB" + (f" ({_g(ref['max_abs'])})" if ref["max_abs"] else "")
    card = {"id": "verdict", "title": "verdict", "big": "PASS" if report["pass"] else "FAIL",
            "tone": "good" if report["pass"] else "bad", "lines": [say], "bars": []}
    exact = {"id": "exactness", "title": "exactness", "tone": "good" if report["pass"] else "bad",
             "big": f"{ref['mismatches']:,} of {ref['compared_values']:,} outputs differ", "bars": [],
             "lines": [f"worst: {worst}"] + ([f"state bytes differing: {states:,}"] if states is not None else [])}
    rows = [("output values compared", f"{ref['compared_values']:,}"),
            ("output values that differ", f"{ref['mismatches']:,}"),
            ("largest difference", worst)]
    if states is not None:
        rows.append(("state bytes that differ", f"{states:,}"))
        if ref.get("first_state_mismatch_step") is not None:
            rows.append(("first state difference", f"step {ref['first_state_mismatch_step']:,}"))
    if first:
        rows.append(("first output difference", f"sequence {first['sequence']}, step {first['step']:,}, output "
                     f"{first['output']}: device {_g(first['device'])}, interpreter {_g(first['reference'])}"))
    return {"say": say, "rows": rows}, {"verdict": card, "exactness": exact}


def _float_model(report: dict) -> tuple[dict, dict]:
    flt = report["float"]
    drift = [r for r in report.get("drift") or [] if r.get("rmse") is not None]
    if flt.get("rmse") is None:
        why = flt.get("skipped") or "no float model"
        card = {"id": "float", "title": "error vs the float model", "big": "not compared", "tone": "plain",
                "lines": [why], "bars": []}
        return {"say": f"Not compared: {why}.", "rows": []}, card
    lines = [f"rmse {_g(flt['rmse'])} · max {_g(flt['max_abs'])} · cos {_g(flt['cos'], 6)}"]
    if len(drift) > 1:
        first, last = drift[0], drift[-1]
        lines.append(f"drift: rmse {_g(first['rmse'], 3)} in steps {first['label']} → {_g(last['rmse'], 3)} in "
                     f"{last['label']}")
    elif drift:
        lines.append(f"drift: one window ({drift[0]['label']}), rmse {_g(drift[0]['rmse'], 3)}")
    card = {"id": "float", "title": "error vs the float model", "big": f"l2r {100 * flt['l2r']:.3g} %",
            "tone": "plain", "lines": lines, "bars": []}
    rows = [("compared with", flt.get("against") or "–"),
            ("l2r (‖device − float‖ / ‖float‖)", _g(flt["l2r"])), ("rmse", _g(flt["rmse"])),
            ("mae", _g(flt["mae"])), ("max abs", _g(flt["max_abs"])), ("cosine", _g(flt["cos"], 6))]
    say = ("What quantization costs: the device's dequantized outputs against the float model's on the same "
           "inputs, over every step and sequence (for a model with a head, its output after each sequence).")
    return {"say": say, "rows": rows}, card


def _drift(report: dict) -> dict:
    rows = report.get("drift") or []
    table = [(r["label"], _g(r.get("rmse")), _g(r.get("mae")), _g(r.get("max_abs")),
              f"{r.get('reference_mismatches', 0):,}") for r in rows]
    if not any(r.get("rmse") is not None for r in rows):
        return {"say": "No drift windows: the float model was not compared step by step.", "table": table}
    return {"say": "The error against the float model in windows of steps, over all sequences: a recurrent model "
                   "whose state drifts away from the float model's shows a growing error in the later windows.",
            "table": table}


def count_words(device: dict) -> tuple[str, str]:
    """The unit of the board's counts as the reports write it: (plural, singular), ("cycles", "cycle") unless the
    board says otherwise (``cpu.count_unit``: "instructions (QEMU)" -> ("instructions (QEMU)", "instruction"))."""
    plural = device.get("count_unit") or "cycles"
    noun = plural.split(" (")[0]
    return plural, noun[:-1] if noun.endswith("s") else noun


def _speed(report: dict) -> tuple[dict, dict]:
    dev = report["device"]
    cycles = dev.get("cycles_per_step") or 0
    unit, one = count_words(dev)
    clock = dev.get("clock_hz")
    lines = []
    if clock and dev.get("us_per_step") is not None:
        lines.append(f"{_g(dev['us_per_step'], 4)} µs/step at {_hz(clock)} · {_count(dev['steps_per_second'])} steps/s")
    else:
        lines.append(f"no clock: counted as {dev.get('cycle_counter') or 'the board counts'}")
    if dev.get("macs_per_cycle"):
        lines.append(f"{_g(dev['macs_per_cycle'], 3)} MAC/{one} ({_count(dev.get('macs_per_step'))} MACs/step)")
    if dev.get("cluster_cycles_per_step"):
        lines.append(f"the cluster's work alone: {_count(dev['cluster_cycles_per_step'])} cycles")
    card = {"id": "speed", "title": "speed", "big": f"{_count(cycles)} {unit}/step", "tone": "plain",
            "lines": lines, "bars": []}
    say = [f"cycles_per_step counts {dev.get('cycle_counter') or 'what the board counts'}."]
    if dev.get("cluster_cycle_counter"):
        say.append(f"cluster_cycles_per_step counts {dev['cluster_cycle_counter']}.")
    if report.get("board") in ("gvsoc_gap8",):
        say.append("These are GVSOC's timing model, not cycles measured on a GAP8.")
    rows = [(f"{unit} per step (mean)", _count(cycles)), ("median", _count(dev.get("cycles_per_step_median"))),
            ("largest", _count(dev.get("cycles_per_step_max")))]
    if dev.get("cluster_cycles_per_step"):
        rows += [("the cluster's work alone (mean)", _count(dev["cluster_cycles_per_step"])),
                 ("the cluster's work alone (median)", _count(dev.get("cluster_cycles_per_step_median")))]
    if clock:
        rows += [("clock", _hz(clock)), ("µs per step", _g(dev.get("us_per_step"))),
                 ("steps per second", _count(dev.get("steps_per_second")))]
    rows += [("MACs per step", _count(dev.get("macs_per_step"))), (f"MAC per {one}", _g(dev.get("macs_per_cycle"), 3)),
             (f"{unit} per MAC", _g(dev.get("cycles_per_mac"), 3))]
    if dev.get("workers"):
        rows.append(("what ran the step", f"{dev['workers']} core{'s' if dev['workers'] > 1 else ''}"
                     + (", SIMD dot products" if dev.get("simd_dot") else "")
                     + (", offloaded from the main core" if dev.get("offloaded") else "")))
    if dev.get("l3_bytes_per_step"):
        rows.append(("weights read from the stream memory per step", bytes_text(dev["l3_bytes_per_step"])))
    rows.append(("code", bytes_text(dev.get("code_bytes"))))
    return {"say": say, "rows": rows}, card


def _profile(report: dict) -> dict | None:
    prof = report.get("profile")
    if not prof:
        return None
    total = prof["cycles"] or 1
    unit, one = count_words(report["device"])
    colors = {}
    ops = []
    for i, r in enumerate(prof["ops"]):
        colors[r["label"]] = OP_COLORS[i % len(OP_COLORS)]
        mpc = f" · {_g(r['macs_per_cycle'], 3)} MAC/{one}" if r.get("macs_per_cycle") else ""
        ops.append({"label": r["label"], "color": colors[r["label"]], "pct": round(100 * r["cycles"] / total, 2),
                    "value": f"{r['cycles']:,} · {100 * r['share']:.1f} %{mpc}"})
    cores = []
    for k, core in enumerate(prof["cores"]):
        segments = [{"name": r["label"], "color": colors[r["label"]], "pct": round(100 * r["work"][k] / total, 2),
                     "cycles": f"{r['work'][k]:,}"} for r in prof["ops"] if r["work"][k]]
        waited = prof["wait"][k]
        segments.append({"name": "waiting", "color": WAIT_COLOR, "pct": round(100 * waited / total, 2),
                         "cycles": f"{waited:,}"})
        cores.append({"label": f"core {core}" + (" (master)" if k == 0 else ""), "segments": segments,
                      "value": f"{prof['work'][k]:,} at work, {waited:,} waiting"})
    table = [(r["label"], f"{r['cycles']:,}", f"{100 * r['share']:.1f} %", _count(r.get("macs")) if r.get("macs") else "–",
              _g(r.get("macs_per_cycle"), 3), f"{sum(1 for w in r['work'] if w):d} of {len(prof['cores'])}")
             for r in prof["ops"]]
    counted = prof.get("counted_cycles")
    traced = prof.get("traced_cycles", prof["cycles"])
    check = f"The rows add up to {prof['cycles']:,} {unit}"
    whole = prof.get("whole_step_cycles")
    if whole == prof["cycles"]:
        check += ", the whole step as the application sees it"
    check += f". The traced step's body on the master core is {traced:,} of them"
    if counted:
        check += (f"; the firmware's own counter gave {counted:,} {unit} for the body "
                  f"({100 * (traced - counted) / counted:+.2f} %)")
    if any(r.get("outside") for r in prof["ops"]):
        check += (". The rows after the body's are the step's cycles outside the trace (the team's call and "
                  "counter, the hand-over to the cluster and back), from the firmware's counts; every core waits "
                  "in them but the master in the team's.")
    elif whole and counted and whole != counted:    # a report from before those rows
        check += (f". The whole step as the application sees it took {whole:,} cycles: the other "
                  f"{whole - counted:,} are the hand-over to the cluster and back.")
    else:
        check += "."
    say = (f"Step {prof['step'] + 1} of the first sequence, from {prof['source']}. An op lasts from the master "
           "core's first instruction of it to its first of the next; every core's cycles in that time are the "
           "op's, at work or waiting (asleep at a barrier, or idle while the op runs on fewer cores).")
    legend = [(r["label"], colors[r["label"]]) for r in prof["ops"]] + [("waiting", WAIT_COLOR)]
    return {"say": say, "ops": ops, "cores": cores, "table": table, "check": check, "legend": legend, "unit": unit,
            "one": one}


def _memory(report: dict) -> tuple[dict, dict]:
    memories, table, bars = [], [], []
    for m in report.get("memory") or []:
        size = m["size"] or 1
        parts = []
        for name, n in m["items"].items():
            streamed = name.startswith("l3:")
            label = f"streamed weights {name[3:]}" if streamed else PLACED_NAMES.get(name, name)
            parts.append((label, n, STREAMED_COLOR if streamed else PLACED_COLORS.get(name, "#8cd17d")))
        code, link = m.get("code_bytes"), m.get("link_bytes")
        if code:
            parts.append(("code", code, CODE_COLOR))
        if link:
            parts.append(("link frames", link, LINK_COLOR))
        inside = (code or 0) + (link or 0)
        rest = m["reserved"] - inside if m["reserved"] else 0
        if rest > 0:
            parts.append(("the rest of the reserve (runtime, stacks, heap)", rest, RESERVE_COLOR))
        segments = [{"name": label, "size": bytes_text(n), "color": color, "pct": round(100 * n / size, 3)}
                    for label, n, color in parts]
        if m["reserved"]:
            # the reserve is the end of the memory, beyond the budget: the free part of the budget before it
            free = max(m["budget"] - m["placed_bytes"], 0)
            segments.insert(len(m["items"]), {"name": "free", "size": bytes_text(free), "color": "transparent",
                                              "pct": round(100 * free / size, 3)})
        budget_pct = round(100 * m["budget"] / size, 3) if m["budget"] < size else None
        placed, budget = m["placed_bytes"], m["budget"]
        headline = (f"{bytes_text(placed)} placed of its {bytes_text(budget)} budget ({100 * placed / budget:.1f} %)"
                    if budget else f"{bytes_text(placed)} placed") + f"; {bytes_text(m['size'])} in all"
        if m["reserved"]:
            headline += f", {bytes_text(m['reserved'])} kept out of the budget"
        memories.append({"name": m["memory"], "headline": headline, "segments": segments, "budget_pct": budget_pct,
                         "legend": [(f"{label} {bytes_text(n)}", color) for label, n, color in parts]})
        table += [(m["memory"], label, f"{n:,}") for label, n, _ in parts]
        if not placed:
            continue
        bars.append({"label": f"{m['memory']}: {bytes_text(placed)} of {bytes_text(budget)}"
                              + (f" ({100 * placed / budget:.0f} %)" if budget else ""),
                     "segments": [{"name": label, "color": color, "pct": round(min(100.0, 100 * n / (budget or 1)), 2)}
                                  for label, n, color in parts[:len(m["items"])]],
                     "budget_pct": None})
    say = ("Each memory of the board, at its scale: what the build placed there (the manifest's placement), "
           "the code and the link's frame buffers where they live, and the reserve the budget keeps free for what "
           "edgernn does not size (runtime, stacks). The dashed line is the budget placement must fit.")
    used = [f"{m['memory']} {100 * m['placed_bytes'] / m['budget']:.2g} %" for m in report.get("memory") or []
            if m["placed_bytes"] and m["budget"]]
    card = {"id": "memory", "title": "memory placed, of its budget", "tone": "plain",
            "big": " · ".join(used) or "–", "lines": [], "bars": bars}
    if not bars:
        card["lines"] = ["the board's memories are not known"]
    return {"say": say, "memories": memories, "table": table}, card


def _precision(report: dict) -> dict | None:
    plan = report.get("precision")
    if not plan:
        return None
    layers = ", ".join(f"{n} in {layer}" for layer, n in (plan.get("int16_ops_by_layer") or {}).items()) or "none"
    rows = [("budget (l2r)", _g(plan.get("max_error"))), ("reached on the calibration data", _g(plan.get("calibration_l2r"))),
            ("reached in this run", _g(plan.get("l2r_reached"))), ("all int8", _g(plan.get("int8_l2r"))),
            ("all int16", _g(plan.get("int16_l2r"))), ("met", str(plan.get("met"))),
            ("ops in int16", f"{plan.get('int16_ops')} of {(plan.get('int16_ops') or 0) + (plan.get('int8_ops') or 0)} "
                             f"({layers})"),
            ("QUANTIZE ops where the types meet", str(plan.get("quantize_ops"))),
            ("x, y", f"{plan.get('x')}, {plan.get('y')}"),
            ("states", ", ".join(f"{k} {v}" for k, v in (plan.get("states") or {}).items()) or "none"),
            ("weights", plan.get("weights") or "TF's rounding")]
    return {"say": "A --quant auto model: int8 where the error allows, int16 where it does not, to meet the budget.",
            "rows": rows}


def _plain_rows(section: dict) -> list[tuple[str, str]]:
    return [(key.replace("_", " "), f"{value:.6g}" if isinstance(value, float) else str(value))
            for key, value in (section or {}).items()]


def page(report: dict, plot, every_step: bool) -> dict:
    """What report.html says, computed and worded: the template only lays it out."""
    exact, cards = _exact(report)
    float_model, float_card = _float_model(report)
    speed, speed_card = _speed(report)
    memory, memory_card = _memory(report)
    figures = plots(report, plot, every_step)
    float_model["figures"] = [f for f in figures if f["section"] == "float"]
    drift = _drift(report)
    drift["figures"] = [f for f in figures if f["section"] == "drift"]
    link = report.get("link") or {}
    return {"verdict": "PASS" if report["pass"] else "FAIL", "head": _head(report),
            "cards": [cards["verdict"], cards["exactness"], float_card, speed_card, memory_card],
            "notes": report.get("notes") or [], "exact": exact, "float_model": float_model, "drift": drift,
            "speed": speed, "profile": _profile(report), "memory": memory, "precision": _precision(report),
            "no_profile": "Not profiled: `edgernn validate OUT --profile` traces one step on a board that can "
                          "(gvsoc_gap8) and shows here the cycles of each op and core.",
            "inputs": _plain_rows(report.get("inputs")),
            "link": _plain_rows({k: v for k, v in link.items() if k != "device_frames"})
                    + [("device frames", f"receives {(link.get('device_frames') or {}).get('receives')} B, sends "
                                         f"{(link.get('device_frames') or {}).get('sends')} B")]}


def render_html(report: dict, plot, every_step: bool) -> str:
    import jinja2

    from edgernn.resources import templates_dir

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir() / "report")),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return env.get_template("report.html.j2").render(**page(report, plot, every_step))


def write_html(report: dict, path: str | Path, *, plot, every_step: bool) -> Path:
    path = Path(path)
    _write_whole(path, render_html(report, plot, every_step))
    return path


def render_app_html(report: dict) -> str:
    """The report of a camera application's validation (edgernn.validate.app): the verdict, the exactness, the
    error against the float model, and each frame's split between capture, preprocessing and model."""
    import html

    app, ref, flt, dev = report["app"], report["reference"], report["float"], report["device"]
    cyc = app["cycles_per_frame"]

    def row(name, value):
        return f"<tr><th>{html.escape(str(name))}</th><td>{html.escape(str(value))}</td></tr>"

    fps = app.get("frames_per_second")
    rows = [
        row("verdict", "PASS" if report["pass"] else "FAIL"),
        row("board", report["board"]), row("quant", report["quant"]), row("model SHA-256", report["model_sha256"]),
        row("frames x sequences", f"{report['steps']} x {report['sequences']}"),
        row("output values that differ from the interpreter", f"{ref['mismatches']:,} of {ref['compared_values']:,}"),
        row("largest difference", f"{ref['max_abs_lsb']} LSB ({_g(ref['max_abs'])})"),
        row("vs the float model", f"l2r {_g(flt.get('l2r'))}, rmse {_g(flt.get('rmse'))}, max {_g(flt.get('max_abs'))}"
            if flt.get("rmse") is not None else f"not compared: {flt.get('skipped')}"),
        row("frames per second", f"{fps:,.1f} at {_hz(app['clock_hz'])}" if fps else "-"),
        row("frames per second, the GAP8's work alone", _g(app.get("compute_frames_per_second"), 4)),
        row("capture (rest of the period), per frame", _count(cyc["capture"])),
        row("preprocessing, per frame", _count(cyc["preprocess"])),
        row("model, per frame", _count(cyc["model"])),
        row("frame period", _count(cyc["period"])),
        row("capture overlapped compute", "yes" if app["capture_overlapped_compute"] else "no"),
        row("bound by", "the camera" if app["camera_bound"] else "compute"),
        row("cycles", app["cycle_counter"]), row("timing", app["timing"]),
        row("MAC per cycle (model)", _g(dev.get("macs_per_cycle"), 3)),
    ]
    frames = "".join(f"<tr><td>{f['sequence']}</td><td>{f['frame']}</td><td>{f['capture']:,}</td>"
                     f"<td>{f['preprocess']:,}</td><td>{f['model']:,}</td></tr>" for f in app["per_frame"])
    return ("<!doctype html><html><head><meta charset='utf-8'><title>edgernn validate: camera application</title>"
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}th,td{border:1px solid "
            "#ccc;padding:3px 8px;text-align:left}</style></head><body>"
            f"<h1>Camera application: {'PASS' if report['pass'] else 'FAIL'}</h1><table>{''.join(rows)}</table>"
            "<h2>Frames</h2><table><tr><th>sequence</th><th>frame</th><th>capture</th><th>preprocessing</th>"
            f"<th>model</th></tr>{frames}</table></body></html>\n")


def write_app_html(report: dict, path: str | Path) -> Path:
    path = Path(path)
    _write_whole(path, render_app_html(report))
    return path
