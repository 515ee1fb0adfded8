"""End to end: a Keras model converted to an int8 step model (and an LSTM to TFLite's fused
UNIDIRECTIONAL_SEQUENCE_LSTM), firmware generated, built for the host and qemu_riscv32 boards, and
validated over the link: the device must match the interpreter exactly over at least 1,000 steps."""

from __future__ import annotations

import pytest

from conftest import processes_mentioning, tool_unavailable
from edgernn.targets.board import load_board

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

KINDS = ["lstm64", "lstm64_fused", "gru", "cfc"]
STEPS = 1000


def build_model(kind: str):
    import keras

    keras.utils.set_random_seed(0)
    if kind.startswith("lstm64"):
        rnn = keras.layers.LSTM(64, return_sequences=True)
    elif kind == "gru":
        rnn = keras.layers.GRU(16, return_sequences=True)
    else:
        import ncps.keras

        rnn = ncps.keras.CfC(16, return_sequences=True)
    return keras.Sequential([keras.Input((None, 2)), rnn, keras.layers.Dense(1)], name=kind.split("_")[0])


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    from edgernn.testing.zoo import trajectories

    from edgernn.pipeline.convert import convert

    made = {}

    def get(kind: str, board: str):
        if (kind, board) not in made:
            folder = tmp_path_factory.mktemp(f"{kind}_{board}")
            model = build_model(kind)
            path = folder / f"{kind}.keras"
            model.save(path)
            out = folder / "out"
            mode = "fused" if kind.endswith("_fused") else "step"
            manifest = convert(str(path), out, quant="int8", calib=trajectories(8, 80, 2, 1),
                                     board=board, mode=mode)
            assert manifest.mode == mode
            if mode == "fused":
                assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in manifest.ops and "WHILE" not in manifest.ops
            from edgernn.backend import generate_firmware

            generate_firmware(out, load_board(board))
            made[(kind, board)] = out
        return made[(kind, board)]

    return get


def check_parity(out):
    from edgernn.testing.zoo import trajectories

    from edgernn.validate.run import validate

    report = validate(out, data=trajectories(1, STEPS, 2, 5))
    ref = report["reference"]
    assert report["steps"] >= STEPS
    assert ref["mismatches"] == 0 and ref["state_mismatches"] == 0, (
        f"{ref['mismatches']} output and {ref['state_mismatches']} state mismatches, "
        f"max {ref['max_abs_lsb']} LSB, first at {ref['first_mismatch']}")
    assert report["pass"]
    assert report["float"]["rmse"] is not None and report["float"]["cos"] > 0.9
    return report


def test_the_device_says_what_ran_the_step(converted):
    report = check_parity(converted("gru", "host"))
    assert (report["device"]["workers"], report["device"]["simd_dot"], report["device"]["offloaded"]) == (1, False, False)
    assert report["device"]["macs_per_cycle"] == pytest.approx(
        report["device"]["macs_per_step"] / report["device"]["cycles_per_step"])


@pytest.mark.parametrize("kind", KINDS)
def test_int8_model_on_the_host_board(converted, kind):
    check_parity(converted(kind, "host"))


@pytest.mark.qemu
@pytest.mark.parametrize("kind", KINDS)
def test_int8_model_on_qemu_riscv32(converted, kind):
    report = check_parity(converted(kind, "qemu_riscv32"))
    assert report["device"]["cycles_per_step_max"] - report["device"]["cycles_per_step"] < \
        0.01 * report["device"]["cycles_per_step"]


@pytest.mark.qemu
def test_validate_profile_on_qemu_riscv32_counts_each_ops_instructions(converted, tmp_path):
    """validate --profile on qemu_riscv32: QEMU logs every instruction of a build with -g (the same code,
    with its line table); each statement of model.c's step gets its instructions, which add up to the
    firmware's own minstret count of that step within 2 %, and each op its MACs from the step model."""
    import json

    from edgernn.testing.zoo import trajectories

    from edgernn.validate.run import CALL_ROW, validate

    out = converted("gru", "qemu_riscv32")
    manifest = json.loads((out / "manifest.json").read_text())
    report = validate(out, data=trajectories(1, 20, 2, 5), profile=True, json_path=tmp_path / "r.json")
    prof = report["profile"]
    assert report["pass"] and prof["cores"] == [0] and "QEMU" in prof["source"]
    assert abs(prof["traced_cycles"] - prof["counted_cycles"]) <= 0.02 * prof["counted_cycles"], prof
    # an accounting identity: the body's rows and the call around it add up to the step the firmware counted
    assert sum(op["cycles"] for op in prof["ops"]) == prof["cycles"] == prof["whole_step_cycles"]
    assert [op["label"] for op in prof["ops"] if op["outside"]] in ([], [CALL_ROW])
    labels = [op["label"] for op in prof["ops"] if not op["outside"]]
    assert labels[0] == "step entry" and labels[-1] == "output and new state"
    assert [label.split(": ")[1] for label in labels if ": " in label] == \
        ["FULLY_CONNECTED", "FULLY_CONNECTED", "ADD+LOGISTIC+MUL+SUB+ADD+LOGISTIC+MUL+ADD+TANH+MUL+ADD", "FULLY_CONNECTED"]
    assert sum(op["macs"] for op in prof["ops"]) == manifest["macs_per_step"]
    assert all(op["cycles"] > 0 and op["wait"] == [0] for op in prof["ops"] if not op["outside"])
    # the recurrent FC (16 -> 48) does more than the input's (2 -> 48)
    fcs = [op for op in prof["ops"] if op["label"].endswith("FULLY_CONNECTED")]
    assert fcs[0]["macs"] == 16 * 48 and fcs[0]["cycles"] > fcs[1]["cycles"]


@pytest.mark.qemu
@pytest.mark.parametrize("optimize", ["-O2", "-Os"])
def test_generated_firmware_builds_warning_free_for_rv32imc(converted, optimize, tmp_path):
    from edgernn.targets import device as devices

    out = converted("lstm64", "qemu_riscv32")
    result = devices.build_elf(out / "firmware", "qemu_riscv32", tmp_path, optimize=optimize)
    assert "-Werror" in result.command and optimize in result.command
    assert result.code_bytes and result.data_bytes


class OneOutputOff:
    """The interpreter as validate's reference, but one output byte off at one step: a FAIL to render."""

    def __init__(self, reference, step: int):
        self.reference, self.step, self.done = reference, step, 0

    def start(self):
        self.reference.start()
        self.done = 0

    def advance(self, xq):
        run = self.reference.advance(xq)
        if self.done <= self.step < self.done + len(xq):
            run.y[self.step - self.done, 0] += 1
        self.done += len(xq)
        return run


# What the page says, asked of the DOM Chromium built from it
PAGE_FACTS = """({
  title: document.title,
  verdict: document.querySelector('h1 .badge').textContent,
  cards: [...document.querySelectorAll('#summary .card')].map(c => [c.id, c.className]),
  sections: [...document.querySelectorAll('section')].map(s => [s.id, (s.querySelector('h2') || {}).textContent]),
  plots: [...document.querySelectorAll('figure.plot img')].map(i => [i.alt, i.complete && i.naturalWidth > 0]),
  memories: [...document.querySelectorAll('#memory .memory')].map(m => m.id),
  exactness: document.querySelector('#exactness').innerText,
  remote: [...document.querySelectorAll('[src],[href]')].map(e => e.getAttribute('src') || e.getAttribute('href'))
            .filter(u => !u.startsWith('data:') && !u.startsWith('#')),
  fetched: performance.getEntriesByType('resource').map(e => e.name).filter(u => !u.startsWith('data:')),
  top: document.querySelector('#summary').getBoundingClientRect().bottom,
})"""

SECTIONS = ["summary", "exactness", "float-model", "drift", "speed", "profile", "memory", "inputs", "link"]


def test_the_report_of_a_pass_and_of_a_fail_reads_in_a_browser(converted, tmp_path):
    """report.html rendered by headless Chromium (Debian's): the verdict first, the summary's five cards in
    the first screen, every section, every plot decoded, nothing fetched from anywhere; report.json keeps
    its keys and gains the new ones; no Chromium process outlives the test."""
    from edgernn.testing.browser import Chromium, chromium_path
    from edgernn.testing.zoo import trajectories

    from edgernn.outdir import read_manifest
    from edgernn.validate.run import InterpreterReference, validate

    if chromium_path() is None:
        tool_unavailable("needs chromium (apt-get install --no-install-recommends chromium)")
    out = converted("gru", "host")
    data = trajectories(1, 300, 2, 5)
    passed = validate(out, data=data, json_path=tmp_path / "pass.json")
    manifest = read_manifest(out)
    failed = validate(out, data=data, json_path=tmp_path / "fail.json",
                      reference=OneOutputOff(InterpreterReference(out, manifest), 120))
    assert passed["pass"] and not failed["pass"] and failed["reference"]["first_mismatch"]["step"] == 120
    for report in (passed, failed):
        assert {"pass", "board", "quant", "model_sha256", "steps", "sequences", "reference", "float", "drift",
                "inputs", "device", "link", "notes", "files", "model", "edgernn_version", "date", "memory"} <= set(report)
        assert report["model"] == "gru.keras" and report["device"]["clock_hz"] == 10 ** 9
        assert report["memory"][0]["memory"] == "ram" and report["memory"][0]["items"]["weights"] == \
            manifest.weight_bytes
    browser = Chromium()
    try:
        profile_dir = str(browser.profile)
        facts = {}
        for name in ("pass", "fail"):
            browser.open(tmp_path / f"{name}.html")
            facts[name] = browser.evaluate(PAGE_FACTS)
    finally:
        browser.close()
    assert not processes_mentioning(profile_dir)
    for name, verdict in (("pass", "PASS"), ("fail", "FAIL")):
        page = facts[name]
        assert page["verdict"] == verdict and page["title"].startswith(f"edgernn validate: {verdict} — gru.keras on host")
        assert [c[0] for c in page["cards"]] == ["card-verdict", "card-exactness", "card-float", "card-speed",
                                                 "card-memory"]
        assert ("good" if verdict == "PASS" else "bad") in page["cards"][0][1]
        assert page["top"] < 900, "the summary fits the first screen"
        assert [s[0] for s in page["sections"]] == SECTIONS
        assert all(s[1] for s in page["sections"][1:])
        assert len(page["plots"]) == 3 and all(ok for _, ok in page["plots"]), page["plots"]
        assert page["memories"] == ["memory-ram"]
        assert page["remote"] == [] and page["fetched"] == []
    titles = [alt for alt, _ in facts["pass"]["plots"]]
    assert titles[0].startswith("Device output against the float model") and titles[1] == "Error per step"
    assert "first output difference\tsequence 0, step 120" in facts["fail"]["exactness"]
    assert "differ from the TFLite interpreter's" in facts["fail"]["exactness"]
