"""Board files: the shipped ones load, and `extends` takes another board's facts table by table."""

from __future__ import annotations

import pytest

from edgernn.targets.board import known_boards, load_board
from edgernn.errors import EdgeRNNError


def test_every_shipped_board_loads():
    assert {"host", "qemu_riscv32", "ai_deck", "gvsoc_gap8"} <= set(known_boards())
    for name in known_boards():
        assert load_board(name).name == name


def test_gvsoc_gap8_is_the_ai_deck_emulated():
    deck, sim = load_board("ai_deck"), load_board("gvsoc_gap8")
    assert sim.emulated and not deck.emulated
    # The same GAP8: memories, placement, the cluster team, the GAP SDK project and its HAL.
    for key in ("memory", "placement", "parallel", "hal", "quant"):
        assert sim[key] == deck[key], key
    # The same project, built for PMSIS's simulator platform (pmsis_exit ends the simulation).
    assert {**sim["gap_sdk"], "make_vars": {}} == {**deck["gap_sdk"], "make_vars": {}}
    assert sim["gap_sdk"]["make_vars"] == {"platform": "gvsoc"}
    assert sim["toolchain"]["kind"] == deck["toolchain"]["kind"] == "gap_sdk"
    assert sim["toolchain"]["cflags"] == deck["toolchain"]["cflags"]
    assert sim["serial"]["baud"] == deck["serial"]["baud"] == 115200
    assert sim["emulator"]["kind"] == "gvsoc" and sim["toolchain"]["optional"] is False


def write(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, message", [
    ('extends = "no_such_board"\n', "not a board file"),
    ('extends = 3\n', "must name a board"),
    ('extends = "self.toml"\n', "round in a circle"),
])
def test_a_bad_extends_is_one_line(tmp_path, text, message):
    board = write(tmp_path / "self.toml", text)
    with pytest.raises(EdgeRNNError, match=message):
        load_board(board)


def test_extends_merges_tables_and_replaces_values(tmp_path):
    board = write(tmp_path / "mine.toml", 'extends = "qemu_riscv32"\nname = "mine"\ndescription = "d"\n'
                                          '[toolchain]\ncflags = ["-O1"]\n[serial]\nbaud = 9600\n')
    mine, base = load_board(board), load_board("qemu_riscv32")
    assert mine.name == "mine" and mine["serial"]["baud"] == 9600
    assert mine["toolchain"]["cflags"] == ["-O1"]                      # an array is replaced whole
    assert mine["toolchain"]["cc"] == base["toolchain"]["cc"]          # the rest of the table stays
    assert mine["emulator"] == base["emulator"]


def test_gvsoc_gap8_without_the_sdk_is_one_line_before_any_conversion(monkeypatch, tmp_path):
    from edgernn.pipeline.build import build_firmware

    monkeypatch.delenv("GAP_SDK_HOME", raising=False)
    # The model does not exist: a conversion started first would fail on it with another message.
    with pytest.raises(EdgeRNNError, match=r"the GAP SDK is not set up \(\$GAP_SDK_HOME is unset\)"):
        build_firmware(str(tmp_path / "missing.keras"), tmp_path / "out", board="gvsoc_gap8")
    assert not (tmp_path / "out").exists()
