"""protocol.h is rendered from the link's Python constants: the shipped header is that rendering."""

from edgernn.link import header, protocol
from edgernn.resources import templates_dir


def test_the_shipped_protocol_h_is_the_rendering_of_the_python_constants():
    shipped = (templates_dir() / "firmware" / "protocol.h").read_text()
    assert header.render_protocol_h() == shipped
    assert header.main(["--check"]) == 0


def test_a_changed_constant_reaches_the_header(monkeypatch):
    monkeypatch.setattr(protocol, "ERR_MODEL", 42)
    monkeypatch.setattr(protocol, "STEP", 0x13)
    text = header.render_protocol_h(model_frame=300)
    assert "    EDGERNN_ERR_MODEL = 42,\n" in text
    assert "    EDGERNN_MSG_STEP = 0x13,\n" in text
    assert "#define EDGERNN_LINK_MODEL_FRAME 300\n" in text
    assert text != (templates_dir() / "firmware" / "protocol.h").read_text()
