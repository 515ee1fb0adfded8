"""Board files: the shipped ones load, and `extends` takes another board's facts table by table."""

from __future__ import annotations

import pytest

from edgernn.resources import templates_dir
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


@pytest.mark.parametrize("name, unit", [("host", "cycles"), ("ai_deck", "cycles"), ("gvsoc_gap8", "cycles"),
                                        ("qemu_riscv32", "instructions (QEMU)"),
                                        ("qemu_stm32f405", "instructions (QEMU)"), ("crazyflie", "cycles")])
def test_a_board_that_counts_instructions_says_so(name, unit):
    # QEMU's counters (-icount shift=0: minstret, TIM2) count instructions, never cycles
    assert load_board(name).cpu.count_unit == unit


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
    from edgernn.pipeline.build import build_model

    monkeypatch.delenv("GAP_SDK_HOME", raising=False)
    # The model does not exist: a conversion started first would fail on it with another message.
    with pytest.raises(EdgeRNNError, match=r"the GAP SDK is not set up \(\$GAP_SDK_HOME is unset\)"):
        build_model(str(tmp_path / "missing.keras"), tmp_path / "out", board="gvsoc_gap8")
    assert not (tmp_path / "out").exists()


def test_typed_sections_carry_the_file_and_the_defaults(tmp_path):
    host, qemu, deck, sim = (load_board(n) for n in ("host", "qemu_riscv32", "ai_deck", "gvsoc_gap8"))
    assert host.serial.baud == 115200 and host.serial.timeout_s == 5.0          # timeout_s: the default
    assert sim.serial.timeout_s == 60.0 and sim.emulator.start_timeout_s == 120.0
    assert qemu.emulator.start_timeout_s == 20.0 and host.emulator.start_timeout_s == 10.0
    assert host.emulator.kind == "fd" and qemu.emulator.kind == "announce" and sim.emulator.kind == "gvsoc"
    assert deck.emulator is None and host.gap_sdk is None and deck.gap_sdk.elf.endswith("/edgernn")
    assert (host.family, qemu.family, deck.family, sim.family) == ("native", "native", "gap8", "gvsoc_gap8")
    assert deck.memory_typed("l2").budget == 524288 - 196608 and deck.memory_typed("l1").team_memory
    assert deck.cpu.fc_mv == 1200 and host.cpu.fc_mv == 1200
    assert host.placement.weights_section == "" and host.parallel.min_count == 8 and qemu.parallel.min_count == 16
    assert deck.quant_rule("float32")[0] == "warn" and host.quant_rule("int8") == (
        "ok", "board host does not support int8")
    assert host.elf_name == "firmware" and qemu.elf_name == "firmware.elf"
    # an emulator table that names no start timeout waits the one default, whatever its kind
    mine = load_board(write(tmp_path / "mine.toml", 'extends = "host"\nname = "mine"\ndescription = "d"\n'))
    data = {**mine.data, "emulator": {"command": ["{elf}", "--fd", "{fd}"]}}
    from edgernn.targets.board import Board, Emulator

    assert Board("x", "d", tmp_path / "x.toml", data).emulator.start_timeout_s == Emulator().start_timeout_s == 60.0


@pytest.mark.parametrize("extra, message", [
    ('[serial]\nbuad = 9600\n', r"unknown key serial\.buad"),
    ('colour = "red"\n', "unknown key colour"),
    ('[serial]\nbaud = "fast"\n', r"serial\.baud must be a whole number, not 'fast'"),
    ('[toolchain]\noptional = 1\n', r"toolchain\.optional must be true or false"),
    ('[emulator]\nstart_timeout_s = "soon"\n', r"emulator\.start_timeout_s must be a number"),
    ('[emulator]\nkind = "telepathy"\n', r"emulator\.kind must be one of fd, announce, gvsoc"),
    ('[quant]\nint8 = "maybe"\n', r"quant\.int8 must be one of ok, warn, refuse"),
    ('[[memory]]\nname = "flash"\nsize = 10\nspeed = 3\n', r"unknown key memory\[flash\]\.speed"),
    ('[placement]\narena_memory = 3\n', r"placement\.arena_memory must be a string or an array"),
])
def test_an_unknown_or_mistyped_key_is_one_line(tmp_path, extra, message):
    board = write(tmp_path / "mine.toml", f'extends = "host"\nname = "mine"\ndescription = "d"\n{extra}')
    with pytest.raises(EdgeRNNError, match=message) as err:
        load_board(board)
    assert "\n" not in str(err.value) and str(board) in str(err.value)


@pytest.mark.parametrize("drop, message", [
    ('template = "targets/native/hal/host"\n', r"lacks hal\.template"),
    ('arch = "native"\n', r"lacks cpu\.arch"),
    ('[hal]\ntemplate = "targets/native/hal/host"\ndone_line = "~~~EDGERNN SERVER DONE~~~"\n', "lacks hal"),
])
def test_a_missing_required_key_is_one_line(tmp_path, drop, message):
    from edgernn.resources import boards_dir

    text = (boards_dir() / "host.toml").read_text()
    assert drop in text
    board = write(tmp_path / "mine.toml", text.replace(drop, ""))
    with pytest.raises(EdgeRNNError, match=message):
        load_board(board)


def test_a_gap_sdk_toolchain_needs_its_table_and_an_unknown_family_is_refused(tmp_path):
    from edgernn.targets.device import adapter_for

    board = write(tmp_path / "mine.toml", 'extends = "host"\nname = "mine"\ndescription = "d"\n'
                                          '[toolchain]\nkind = "gap_sdk"\n')
    with pytest.raises(EdgeRNNError, match=r'toolchain\.kind = "gap_sdk" needs a \[gap_sdk\] table'):
        load_board(board)
    board = write(tmp_path / "fam.toml", 'extends = "host"\nname = "fam"\ndescription = "d"\nfamily = "abacus"\n')
    with pytest.raises(EdgeRNNError, match="unknown family 'abacus' .known: native, stm32, crazyflie, gap8, gvsoc_gap8."):
        adapter_for(board)


def test_each_family_has_its_adapter_with_the_same_verbs():
    from edgernn.targets.device import adapter_for

    names = {n: type(adapter_for(n)).__name__ for n in ("host", "qemu_riscv32", "ai_deck", "gvsoc_gap8")}
    assert names == {"host": "NativeAdapter", "qemu_riscv32": "NativeAdapter", "ai_deck": "Gap8Adapter",
                     "gvsoc_gap8": "GvsocGap8Adapter"}
    host = adapter_for("host")
    assert host.link_settings(started=True).ready_timeout_s is None            # the host HAL sends no ready byte
    sim = adapter_for("gvsoc_gap8").link_settings(started=True, baud=9600)
    assert (sim.baud, sim.timeout_s, sim.ready_timeout_s) == (9600, 60.0, 120.0)
    assert adapter_for("gvsoc_gap8").link_settings(started=False).ready_timeout_s is None
    with pytest.raises(EdgeRNNError, match="board ai_deck is not emulated"):
        adapter_for("ai_deck").start("/nonexistent.elf")


def test_every_key_of_the_schema_is_documented():
    from edgernn.resources import boards_dir
    from edgernn.targets.board import schema

    text = (boards_dir().parent / "docs" / "boards" / "format.md").read_text()
    for section, rows in schema().items():
        assert f"[{section}]" in text, section
        for key, *_ in rows:
            assert f"| `{key}` |" in text, f"{section}.{key}"


@pytest.mark.parametrize("table, key, written, read", [
    ("hal", "template", "hal/host", "targets/native/hal/host"),
    ("hal", "template", "hal/ai_deck", "targets/gap8/hal"),
    ("placement", "dma_source", "hal/ai_deck/dma/edgernn_conv_dma.c", "targets/gap8/hal/dma/edgernn_conv_dma.c"),
    ("placement", "stream_source", "hal/ai_deck/l3/edgernn_l3.c", "targets/gap8/hal/l3/edgernn_l3.c"),
    ("parallel", "team", "hal/posix/edgernn_team.c", "firmware/edgernn_team.c"),
    ("hal", "template", "my/own/hal", "my/own/hal"),             # a path of the user's own: as written
])
def test_template_paths_written_before_the_family_rooms_still_load(tmp_path, table, key, written, read):
    path = tmp_path / "mine.toml"
    path.write_text(f'extends = "host"\nname = "mine"\n\n[{table}]\n{key} = "{written}"\n')
    board = load_board(path)
    assert board.data[table][key] == read


def test_a_board_builds_from_the_kernel_set_its_file_names(tmp_path):
    """The kernel set is the board file's explicit choice: the GAP8 set's files join the reference ones for
    ai_deck, none for host, and a folder rebuilt for another board loses the other set's files."""
    from edgernn.backend.codegen import copy_kernels, kernel_sets

    assert kernel_sets() == ["reference", "gap8", "stm32"]
    assert load_board("ai_deck").toolchain.kernels == "gap8" and load_board("gvsoc_gap8").toolchain.kernels == "gap8"
    assert load_board("host").toolchain.kernels == "reference"
    gap8_dir = templates_dir() / "targets" / "gap8" / "kernels"
    gap8_set = sorted(p.name for p in gap8_dir.iterdir())
    replaced = [name for name in gap8_set if (templates_dir() / "kernels" / name).is_file()]
    assert replaced == ["edgernn_arch.h"]     # the set's own instructions, under the reference file's name
    fw = tmp_path / "fw"
    fw.mkdir()
    sources = copy_kernels(fw, load_board("ai_deck"), ())
    assert "edgernn_dot_xpulp.S" in sources
    assert all((fw / name).read_bytes() == (gap8_dir / name).read_bytes() for name in gap8_set)
    sources = copy_kernels(fw, load_board("host"), ())
    assert "edgernn_dot_xpulp.S" not in sources
    assert not any((fw / name).exists() for name in gap8_set if name not in replaced)
    assert (fw / "edgernn_arch.h").read_bytes() == (templates_dir() / "kernels" / "edgernn_arch.h").read_bytes()


def test_an_unknown_kernel_set_is_refused_never_replaced_by_the_reference(tmp_path):
    from edgernn.backend.codegen import copy_kernels

    path = tmp_path / "mine.toml"
    path.write_text('extends = "host"\nname = "mine"\n\n[toolchain]\nkernels = "cortex_m9"\n')
    with pytest.raises(EdgeRNNError, match=r"toolchain.kernels 'cortex_m9' is not a kernel set \(known: reference, gap8, stm32\)"):
        copy_kernels(tmp_path, load_board(path), ())


def test_the_link_memory_is_a_key_or_the_memory_whose_holds_lists_link_buffers(tmp_path):
    """[placement] link_memory names where the link's buffers are; a board file without it keeps the memory
    whose holds lists "link buffers", as board files said before the key. The frames come from defines."""
    assert load_board("ai_deck").placement.link_memory == "l2" and load_board("host").placement.link_memory is None
    keyed = tmp_path / "keyed.toml"
    keyed.write_text('extends = "host"\nname = "keyed"\n\n[placement]\nlink_memory = "ram"\n\n[toolchain]\n'
                     'defines = ["EDGERNN_LINK_MAX_FRAME=0x2000", "EDGERNN_LINK_FIXED_FRAME"]\n')
    board = load_board(keyed)
    assert board.placement.link_memory == "ram" and (board.link.max_frame, board.link.fixed) == (8192, True)
    legacy = tmp_path / "legacy.toml"
    legacy.write_text(load_board("host").path.read_text().replace('name = "host"', 'name = "legacy"')
                      .replace('"state", "code"]', '"state", "code", "link buffers"]'))
    assert load_board(legacy).placement.link_memory == "ram" and not load_board(legacy).link.fixed
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('extends = "host"\nname = "wrong"\n\n[placement]\nlink_memory = "l9"\n')
    with pytest.raises(EdgeRNNError, match="placement.link_memory names no memory 'l9'"):
        load_board(wrong)
    bad = tmp_path / "bad.toml"
    bad.write_text('extends = "host"\nname = "bad"\n\n[toolchain]\ndefines = ["EDGERNN_LINK_MAX_FRAME=big"]\n')
    with pytest.raises(EdgeRNNError, match="EDGERNN_LINK_MAX_FRAME must be a whole number"):
        load_board(bad)
