"""``protocol.h``, the firmware's side of the link, rendered from the link's Python constants
(edgernn.link.framing, edgernn.link.protocol) with ``templates/firmware/protocol.h.j2``: one source for
the wire's numbers. ``templates/firmware/protocol.h`` is this rendering, checked by the link tests.

    python -m edgernn.link.header --check     # exit 1 when templates/firmware/protocol.h differs
    python -m edgernn.link.header --write     # render it again after changing a constant
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from edgernn.link import framing, protocol
from edgernn.resources import templates_dir

TEMPLATE = "protocol.h.j2"
HEADER = "protocol.h"
_MESSAGES = ("HELLO", "RESET", "STEP", "BYE", "REPLY", "ERROR")
_NOTES = {"REPLY": "reply type = request type | 0x80"}


def header_context(model_frames: tuple[int, int] = (0, 0)) -> dict:
    """The values protocol.h.j2 prints: frame layout, message types, error codes, STEP flags."""
    return {
        "version": framing.VERSION,
        "max_frame": framing.DEFAULT_MAX_FRAME,
        "model_rx_frame": model_frames[0],
        "model_tx_frame": model_frames[1],
        "size_limit": protocol.HELLO_SIZE_LIMIT,
        "max_steps": protocol.MAX_STEPS_PER_FRAME,
        "header": framing.HEADER.size,
        "crc": framing.CRC.size,
        "no_seq": framing.NO_SEQ,
        "messages": [(name, getattr(protocol, name), _NOTES.get(name)) for name in _MESSAGES],
        "errors": [(name[len("ERR_"):], value) for name, value in vars(protocol).items() if name.startswith("ERR_")],
        "state_every": protocol.STATE_EVERY,
        "state_last": protocol.STATE_LAST,
        "team_cycles": protocol.TEAM_CYCLES,
        "target_team_cycles": protocol.TARGET_TEAM_CYCLES,
    }


def render_protocol_h(model_frames: tuple[int, int] = (0, 0)) -> str:
    """protocol.h's text; ``model_frames``: the raw frames one step of the model needs, received and sent
    (:func:`edgernn.link.protocol.model_step_frames`; 0: no model)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir() / "firmware")),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    return env.get_template(TEMPLATE).render(**header_context(model_frames))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgernn.link.header", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write templates/firmware/protocol.h")
    parser.add_argument("--check", action="store_true", help="exit 1 when templates/firmware/protocol.h differs")
    args = parser.parse_args(argv)
    path = templates_dir() / "firmware" / HEADER
    text = render_protocol_h()
    if args.write:
        path.write_text(text)
        return 0
    if args.check:
        same = path.read_text() == text
        if not same:
            print(f"{path} differs from its rendering: python -m edgernn.link.header --write", file=sys.stderr)
        return 0 if same else 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
