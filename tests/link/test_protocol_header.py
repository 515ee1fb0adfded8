"""protocol.h is rendered from the link's Python constants: the shipped header is that rendering."""

import subprocess
from pathlib import Path

import pytest

from edgernn.link import header, protocol
from edgernn.resources import templates_dir

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_the_shipped_protocol_h_is_the_rendering_of_the_python_constants():
    shipped = (templates_dir() / "firmware" / "protocol.h").read_text()
    assert header.render_protocol_h() == shipped
    assert header.main(["--check"]) == 0


def test_a_changed_constant_reaches_the_header(monkeypatch):
    monkeypatch.setattr(protocol, "ERR_MODEL", 42)
    monkeypatch.setattr(protocol, "STEP", 0x13)
    text = header.render_protocol_h(model_frames=(79_067, 300))
    assert "    EDGERNN_ERR_MODEL = 42,\n" in text
    assert "    EDGERNN_MSG_STEP = 0x13,\n" in text
    assert "#define EDGERNN_LINK_MODEL_RX_FRAME 79067\n" in text
    assert "#define EDGERNN_LINK_MODEL_TX_FRAME 300\n" in text
    assert text != (templates_dir() / "firmware" / "protocol.h").read_text()


@pytest.mark.toolchain
@pytest.mark.parametrize("board_frame, model_frames, fixed, limits", [
    (4096, (0, 0), False, (4096, 4096)),              # no model (test fixtures): the board's frames
    (4096, (17, 180), False, (4096, 4096)),           # a small model keeps the board's frames
    (4096, (79_067, 21), False, (79_067, 4096)),      # a camera frame: only the receive buffer grows
    (4096, (40, 70_000), False, (4096, 70_000)),      # a large answer: only the send buffer grows
    (4096, (79_067, 21), True, (4096, 4096)),         # EDGERNN_LINK_FIXED_FRAME=1: a small board keeps its frames
    (1024, (79_067, 21), True, (1024, 1024)),
])
def test_each_direction_takes_the_larger_of_the_board_and_the_model_frame(tmp_path, board_frame, model_frames,
                                                                         fixed, limits):
    """The firmware's buffers as protocol.h sizes them: received frames (rx) and sent ones (tx) apart."""
    from conftest import require_tools

    require_tools("gcc")
    (tmp_path / "protocol.h").write_text(header.render_protocol_h(model_frames))
    flags = [f"-DEDGERNN_LINK_MAX_FRAME={board_frame}"] + (["-DEDGERNN_LINK_FIXED_FRAME=1"] if fixed else [])
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", *flags, f"-I{tmp_path}", str(FIXTURES / "link_limits.c"), "-o",
                    str(tmp_path / "limits")], check=True)
    out = subprocess.run([str(tmp_path / "limits")], check=True, capture_output=True, text=True).stdout
    assert tuple(map(int, out.split())) == limits
