"""The Crazyflie receiver's reassembler in C (src/edgernn_appmsg.c of the app write_receiver writes), compiled with
the host's gcc in a small harness (tests/c/appmsg_driver.c) and fed the packets that edgernn.link.appmsg.split
made: it decodes what Python decodes, byte for byte and value for value, and rejects what Python rejects, with the
same code, once a bad message."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from appmsg_streams import DTYPE, N_OUTPUTS, REJECTIONS, message, parts
from conftest import require_module, require_tools
from edgernn.link import appmsg
from edgernn.link.appmsg import Reassembler

ROOT = Path(__file__).resolve().parents[3]
SHA = "0123456789abcdef" * 4


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    """compile(spec) -> the harness binary for a receiver generated from spec (one build a spec)."""
    require_tools("gcc")
    require_module("jinja2")
    from edgernn.targets.stm32.receiver import write_receiver

    built = {}

    def compile_for(n_outputs: int, dtype: str, scale, zero_point: int) -> Path:
        key = (n_outputs, dtype, scale, zero_point)
        if key not in built:
            where = tmp_path_factory.mktemp("receiver")
            app = write_receiver(where / "app", dict(n_outputs=n_outputs, dtype=dtype, scale=scale,
                                                     zero_point=zero_point, model_sha256=SHA, model_name="m"))
            binary = where / "appmsg_driver"
            command = ["gcc", "-std=c99", "-O1", "-Wall", "-Wextra", "-Wconversion", "-pedantic", "-Werror",
                       "-I", str(app / "src"), str(app / "src" / "edgernn_appmsg.c"),
                       str(ROOT / "tests" / "c" / "appmsg_driver.c"), "-o", str(binary)]
            subprocess.run(command, check=True, capture_output=True, text=True)
            built[key] = binary
        return built[key]

    return compile_for


def run_c(binary: Path, stream, dtype: str, n_outputs: int, scale, zero_point: int) -> list[str]:
    records = b"".join(struct.pack("<BH", int(last), len(data)) + data for last, data in stream)
    scale_arg = repr(float(np.float32(scale))) if scale is not None else "1.0"
    done = subprocess.run([str(binary), str(int(appmsg.Dtype.named(dtype))), str(n_outputs), scale_arg,
                           str(zero_point)], input=records, capture_output=True, check=True, timeout=60)
    return done.stdout.decode().splitlines()


def restarted(data: bytes, reassembler: Reassembler) -> bool:
    """A part 0 that rejected the message in progress and started the next: the C returns its own outcome."""
    return bool(data) and data[0] == 0 and reassembler.errors[-1].code == appmsg.Reject.ORDER


def python_lines(stream, dtype: str, n_outputs: int, scale, zero_point: int) -> list[str]:
    """What the harness must print, from edgernn.link.appmsg's tolerant Reassembler."""
    reassembler = Reassembler(n_outputs=n_outputs, dtype=dtype, strict=False)
    lines = []
    for last, data in stream:
        before = reassembler.rejected
        got = reassembler.feed(last, data)
        if got is not None:
            status = 1
        elif reassembler.rejected > before and not restarted(data, reassembler):
            status = -int(reassembler.errors[-1].code)
        else:
            status = None                     # MORE (0) or DROPPED (2): told apart below
        error = -int(reassembler.errors[-1].code) if reassembler.errors else 0
        lines.append([status, reassembler.rejected, error])
        if got is not None:
            lines.append(f"message {got.frame} {int(got.overlapped)} {got.capture_cycles} {got.preprocess_cycles} "
                         f"{got.model_cycles} {len(got.outputs)} {int(got.dtype)}")
            bits = got.dequantized(scale, zero_point).view(np.uint32)
            lines.append(" ".join(["y"] + [f"{b:08x}" for b in bits]))
    lines.append(f"end received {reassembler.received} rejected {reassembler.rejected}")
    return lines


def assert_agree(c_lines: list[str], py_lines: list) -> None:
    assert len(c_lines) == len(py_lines), "\n".join(c_lines)
    for c, py in zip(c_lines, py_lines):
        if isinstance(py, list):
            status, rejected, error = py
            _, c_status, _, c_rejected, _, c_error = c.split()
            if status is None:
                assert int(c_status) in (0, 2), c
            else:
                assert int(c_status) == status, c
            # the C's last_error starts at 0 (MORE): the same until the first rejection
            assert (int(c_rejected), int(c_error)) == (rejected, error), c
        else:
            assert c == py


STREAMS = [
    # (dtype, n_outputs, scale, zero_point): a stream of three messages, their sizes at the MTU's edges
    ("int8", 1, 0.0078125, -128),
    ("int8", appmsg.PART_BYTES - appmsg.HEADER_BYTES, 0.03, 5),       # ends exactly at the first part's end
    ("int8", appmsg.PART_BYTES - appmsg.HEADER_BYTES + 1, 0.03, 5),   # one byte over
    ("int16", 150, 1.0 / 3.0, 17),
    ("float32", 2, None, 0),
    ("float32", 300, None, 0),
]


@pytest.mark.parametrize("dtype, n_outputs, scale, zero_point", STREAMS,
                         ids=[f"{s[0]}x{s[1]}" for s in STREAMS])
def test_the_c_reassembler_decodes_what_python_split(harness, dtype, n_outputs, scale, zero_point):
    binary = harness(n_outputs, dtype, scale, zero_point)
    sent = [message(n_outputs, dtype, frame=f, seed=f) for f in range(3)]
    stream = [p for m in sent for p in parts(appmsg.pack(m))]
    c_lines = run_c(binary, stream, dtype, n_outputs, scale, zero_point)
    assert c_lines[-1] == "end received 3 rejected 0"
    assert_agree(c_lines, python_lines(stream, dtype, n_outputs, scale, zero_point))
    # and the values are the model's: scale * (q - zero_point) in float32
    y = [line for line in c_lines if line.startswith("y")]
    first = np.array([int(b, 16) for b in y[0].split()[1:]], np.uint32).view(np.float32)
    assert first.tolist() == sent[0].dequantized(scale, zero_point).tolist()


@pytest.mark.parametrize("name, stream, code", REJECTIONS, ids=[r[0] for r in REJECTIONS])
def test_the_c_reassembler_rejects_what_python_rejects(harness, name, stream, code):
    binary = harness(N_OUTPUTS, DTYPE, 0.5, 0)
    after = message(N_OUTPUTS, DTYPE, frame=8)
    stream = stream + parts(appmsg.pack(after))
    c_lines = run_c(binary, stream, DTYPE, N_OUTPUTS, 0.5, 0)
    assert c_lines[-1] == "end received 1 rejected 1"
    assert any(line.split()[5] == str(-int(code)) for line in c_lines if line.startswith("status"))
    assert_agree(c_lines, python_lines(stream, DTYPE, N_OUTPUTS, 0.5, 0))


def test_the_c_reassembler_takes_good_messages_around_a_corrupted_one(harness):
    binary = harness(N_OUTPUTS, DTYPE, 0.5, 0)
    good = [message(N_OUTPUTS, DTYPE, frame=f, seed=f) for f in range(4)]
    bad = bytearray(appmsg.pack(good[1]))
    bad[0] ^= 0xFF
    stream = (parts(appmsg.pack(good[0])) + parts(bytes(bad)) + parts(appmsg.pack(good[2]))[1:]
              + parts(appmsg.pack(good[3])))
    c_lines = run_c(binary, stream, DTYPE, N_OUTPUTS, 0.5, 0)
    frames = [int(line.split()[1]) for line in c_lines if line.startswith("message")]
    assert frames == [0, 3] and c_lines[-1] == "end received 2 rejected 2"
    assert_agree(c_lines, python_lines(stream, DTYPE, N_OUTPUTS, 0.5, 0))
