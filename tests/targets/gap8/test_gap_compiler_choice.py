"""Which compiler builds a GAP8 project: Debian's riscv64-unknown-elf-gcc (through edgernn's wrapper), the one the
tests prove, wherever it is installed; GAP's own gcc 7.1 only with EDGERNN_GAP_COMPILER=gap, and a build with it
says that the tests do not cover it; neither, one line saying what to install."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgernn.errors import EdgeRNNError


@pytest.mark.parametrize("env, debian, gap, expected", [
    (None, True, True, "debian"),          # the docker with Debian's gcc installed: Debian's, GAP's untouched
    (None, True, False, "debian"),
    ("debian", True, True, "debian"),
    ("gap", True, True, "gap"),            # asked for by name
    ("gap", False, True, "gap"),
    (None, False, True, "EDGERNN_GAP_COMPILER=gap, which edgernn's tests do not cover"),
    (None, False, False, "apt-get install gcc-riscv64-unknown-elf"),
    ("gap", True, False, "GAP's compiler (riscv32-unknown-elf-gcc) is not installed"),
    ("auto", True, True, "use debian (the default) or gap"),
])
def test_debian_gcc_is_the_default_and_gap_gcc_needs_asking_for(monkeypatch, tmp_path, env, debian, gap, expected):
    import shutil

    import edgernn.targets.gap8.adapter as gap8
    import edgernn.targets.gap8.sdk as gap_sdk
    from edgernn.targets.board import load_board

    board = load_board("ai_deck")
    home = tmp_path / "gap_sdk"
    monkeypatch.setattr(gap8, "gap_sdk_config", lambda b: home / "configs" / "ai_deck.sh")
    monkeypatch.setattr(gap_sdk, "prepare_sdk", lambda h: tmp_path / "copy")
    monkeypatch.setattr(gap_sdk, "debian_toolchain", lambda: tmp_path / "wrapper")
    monkeypatch.setattr(gap_sdk, "gap_compiler", lambda: Path("/usr/lib/gap_riscv_toolchain/bin/gcc") if gap else None)
    which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda cmd, *a, **k: ("/usr/bin/" + cmd if debian else None)
                        if cmd == board.gap_sdk.debian_cc else which(cmd, *a, **k))
    if env is None:
        monkeypatch.delenv("EDGERNN_GAP_COMPILER", raising=False)
    else:
        monkeypatch.setenv("EDGERNN_GAP_COMPILER", env)
    if expected in ("debian", "gap"):
        assert gap8.gap_sdk_setup(board).compiler == expected
    else:
        with pytest.raises(EdgeRNNError, match=expected.replace("(", r"\(").replace(")", r"\)")) as err:
            gap8.gap_sdk_setup(board)
        assert "\n" not in str(err.value)

