"""report.html from a report, without a device: what the summary says, the sections a report's contents call
for, the plots' captions, and the pictures of cycles and bytes drawn to scale."""

from __future__ import annotations

import re

import numpy as np
import pytest

from edgernn.validate import compare
from edgernn.validate.report import render_html


def a_report(*, mismatches: int = 0, profile: bool = False, precision: bool = False) -> dict:
    first = {"sequence": 0, "step": 7, "output": 0, "device": 3.0, "reference": 2.0} if mismatches else None
    report = {
        "pass": not mismatches, "board": "gvsoc_gap8", "quant": "int8", "model_sha256": "ab" * 32, "steps": 40,
        "sequences": 1, "model": "m.keras", "edgernn_version": "0.1.0", "date": "2025-01-02T03:04:05+00:00",
        "reference": {"mismatches": mismatches, "max_abs_lsb": 1 if mismatches else 0, "max_abs": 0.01 * mismatches,
                      "compared_values": 40, "first_mismatch": first, "state_mismatches": 0,
                      "first_state_mismatch_step": None},
        "float": {"rmse": 0.01, "mae": 0.008, "max_abs": 0.03, "l2r": 0.025, "cos": 0.999, "against": "the twin"},
        "drift": [{"steps": [0, 40], "label": "0–40", "rmse": 0.01, "mae": 0.008, "max_abs": 0.03,
                   "reference_mismatches": mismatches}],
        "inputs": {"min": -1.0, "max": 1.0}, "notes": ["a note the reader must see"],
        "device": {"cycles_per_step": 9000.0, "cycles_per_step_median": 9000.0, "cycles_per_step_max": 9100.0,
                   "cycle_counter": "the whole step", "macs_per_step": 18000, "macs_per_cycle": 2.0,
                   "cycles_per_mac": 0.5, "code_bytes": 40000, "clock_hz": 175_000_000,
                   "us_per_step": 9000 / 175, "steps_per_second": 175e6 / 9000},
        "link": {"port": "socket://x", "frames": 3, "retries": 0, "device_frames": {"receives": 4096, "sends": 4096}},
        "memory": [{"memory": "l2", "size": 1000, "reserved": 400, "budget": 600, "items": {"weights": 150},
                    "placed_bytes": 150, "code_bytes": 200, "link_bytes": 100},
                   {"memory": "l1", "size": 100, "reserved": 0, "budget": 100, "items": {"arena": 25, "state": 5},
                    "placed_bytes": 30}],
        "files": {"json": "r.json", "html": "r.html"},
    }
    if profile:
        report["profile"] = {
            "source": "a trace", "step": 2, "cycles": 1000, "counted_cycles": 1010, "whole_step_cycles": 1300,
            "cores": [0, 1],
            "ops": [{"label": "0: FULLY_CONNECTED", "ops": [0], "cycles": 750, "share": 0.75, "macs": 1500,
                     "macs_per_cycle": 2.0, "work": [750, 600], "wait": [0, 150]},
                    {"label": "3: TANH", "ops": [3], "cycles": 250, "share": 0.25, "macs": 0,
                     "macs_per_cycle": None, "work": [250, 0], "wait": [0, 250]}],
            "work": [1000, 600], "wait": [0, 400]}
    if precision:
        report["precision"] = {"max_error": 0.05, "calibration_l2r": 0.04, "int8_l2r": 0.09, "int16_l2r": 0.01,
                               "met": True, "int16_ops": 2, "int8_ops": 8, "quantize_ops": 1, "x": "int8", "y": "int8",
                               "states": {"h": "int16"}, "int16_ops_by_layer": {"gru": 2}, "l2r_reached": 0.041}
    return report


def page_of(report: dict) -> str:
    plot = compare.PlotBins(report["steps"], 1)
    y = np.linspace(-1, 1, report["steps"], dtype=np.float32)[:, None]
    reference = y.copy()
    if report["reference"]["mismatches"]:
        reference[7] += 0.5
    plot.update(0, 0, y, reference, y + 0.01)
    return render_html(report, plot, every_step=True)


def widths(html: str) -> list[float]:
    return [float(w) for w in re.findall(r'class="seg" style="width:([0-9.]+)%', html)]


def section_ids(html: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)"', html)


@pytest.mark.parametrize("kind, mismatches, profile, precision", [
    ("pass", 0, False, False),
    ("fail", 3, False, False),
    ("profiled, --quant auto", 0, True, True),
])
def test_the_page_says_what_the_report_holds(kind, mismatches, profile, precision):
    html = page_of(a_report(mismatches=mismatches, profile=profile, precision=precision))
    verdict = "FAIL" if mismatches else "PASS"
    assert html.startswith("<!DOCTYPE html>") and f"<title>edgernn validate: {verdict} — m.keras on gvsoc_gap8" in html
    assert f'<span class="badge">{verdict}</span>m.keras on gvsoc_gap8' in html
    assert "edgernn <b>0.1.0</b>" in html and "2025-01-02 03:04:05+00:00" in html
    assert section_ids(html) == ["summary", "exactness", "float-model", "drift", "speed", "profile", "memory",
                                 *(["precision"] if precision else []), "inputs", "link"]
    assert re.findall(r'id="card-(\w+)"', html) == ["verdict", "exactness", "float", "speed", "memory"]
    assert "51.43 µs/step at 175 MHz · 19,444 steps/s" in html and "l2r 2.5 %" in html
    assert "a note the reader must see" in html and "http" not in html.replace("http-equiv", "")
    if mismatches:
        assert "3 of 40 output values differ from the TFLite interpreter&#39;s. The first differs at sequence 0, " \
               "step 7, output 0: device 3, interpreter 2." in html
        assert "drawn dotted: 3 output values differ" in html
    else:
        assert "so it is not drawn again" in html
    assert ('id="cycles-by-op"' in html) == profile
    assert ("Not profiled" in html) == (not profile)


def test_the_pictures_of_cycles_and_bytes_are_to_scale():
    html = page_of(a_report(profile=True))
    cycles = html[html.index('id="cycles-by-op"'):html.index('id="cycles-by-core"')]
    assert widths(cycles) == [75.0, 25.0]
    cores = html[html.index('id="cycles-by-core"'):html.index('<section id="memory"')]
    # core 0 at work in both ops; core 1 at work 600 cycles of the FC and waiting 400
    assert widths(cores) == [75.0, 25.0, 0.0, 60.0, 40.0]
    assert "the firmware&#39;s own counter gave 1,010 cycles for the body (-0.99 %)" in html
    assert "the other 290 are the hand-over to the cluster and back" in html
    l2 = html[html.index('id="memory-l2"'):html.index('id="memory-l1"')]
    # weights, then the budget's free part, then the reserve: code, link frames, the rest of it
    assert widths(l2) == [15.0, 45.0, 20.0, 10.0, 10.0]
    assert 'class="budget" style="left:60.0%"' in l2
    assert "150 B placed of its 600 B budget (25.0 %); 1000 B in all, 400 B kept out of the budget" in l2
    l1 = html[html.index('id="memory-l1"'):html.index("</section>", html.index('id="memory-l1"'))]
    assert widths(l1) == [25.0, 5.0] and 'class="budget"' not in l1


# (the board's count unit, words the page must hold, words it must not)
UNITS = [
    (None, ["9,000 cycles/step", "cycles per step (mean)", "MAC per cycle", "<h2>Where the cycles go</h2>",
            '<th class="n">MAC/cycle</th>'], ["instructions (QEMU)", "MAC/instruction"]),
    ("instructions (QEMU)", ["9,000 instructions (QEMU)/step", "instructions (QEMU) per step (mean)",
                             "MAC per instruction", "<h2>Where the instructions (QEMU) go</h2>",
                             '<th class="n">MAC/instruction</th>',
                             "the firmware&#39;s own counter gave 1,010 instructions (QEMU) for the body"],
     ["cycles/step", "cycles per step", "MAC per cycle", "MAC/cycle", "1,010 cycles"]),
]


@pytest.mark.parametrize("unit, present, absent", UNITS, ids=["cycles", "instructions (QEMU)"])
def test_the_page_and_the_table_count_in_the_boards_unit(unit, present, absent):
    """A board whose counts are instructions (qemu_stm32f405: cpu.count_unit) is never labelled in cycles:
    report.html and validate's table say its unit (report.json keeps the key names)."""
    import io

    from rich.console import Console

    from edgernn.cli.render import print_profile

    report = a_report(profile=True)
    if unit:
        report["device"]["count_unit"] = unit
    html = page_of(report)
    for words in present:
        assert words in html, words
    for words in absent:
        assert words not in html, words
    console = Console(file=io.StringIO(), width=200)
    print_profile(console, report["profile"], report["device"])
    said = console.file.getvalue()
    assert f"where step 3's {unit or 'cycles'} go" in said
    assert ("MAC/instruction" in said) == bool(unit) and ("MAC/cycle" in said) == (not unit)
