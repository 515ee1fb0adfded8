"""Per-frame CNN front ends in the C backend: CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D, AVERAGE_POOL_2D,
MEAN and REDUCE_MAX (global pools), LEAKY_RELU, byte-exact with the LiteRT interpreter.

Each case is a step model built here, without the Keras front end: x is one (H, W, C) frame, the
conv stack's features are flattened and feed a tanh state and a Dense output, so the conv ops' every
byte reaches y and the state. It is converted with edgernn's own calibration and tied-state quantization
(edgernn.tflite.quantize), generated for the host (or qemu_riscv32) and run over a sequence of frames
wider than the calibration range; every output and state byte is held against the interpreter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from edgernn.testing.backend_harness import build, compare, compare_float_per_tensor, run_driver
from edgernn.testing.conv_steps import (N_STATE, STATES, convert_case, frames, layers, run_qemu,
                                        step_model)


# name -> (frame shape, body: keras tensor -> keras tensor). Small frames keep the conversions fast.
def _cases() -> dict[str, tuple[tuple[int, int, int], Callable]]:
    L = layers()
    return {
        "conv_k3_same_relu": ((8, 8, 3), lambda x: L.Conv2D(6, 3, padding="same", activation="relu")(x)),
        "conv_k3_s2_valid": ((9, 9, 2), lambda x: L.Conv2D(5, 3, strides=2, padding="valid")(x)),
        "conv_s2_same": ((10, 10, 3), lambda x: L.Conv2D(9, 3, strides=2, padding="same")(x)),
        "conv_dilation2_relu6": ((10, 10, 2), lambda x: L.Conv2D(4, 3, dilation_rate=2, padding="same",
                                                                  activation="relu6")(x)),
        "conv_1x1": ((6, 6, 5), lambda x: L.Conv2D(8, 1)(x)),
        "depthwise_dm1": ((8, 8, 4), lambda x: L.DepthwiseConv2D(3, padding="same")(x)),
        "depthwise_dm2_s2": ((9, 9, 3), lambda x: L.DepthwiseConv2D(3, strides=2, padding="same",
                                                                     depth_multiplier=2)(x)),
        "separable": ((8, 8, 3), lambda x: L.SeparableConv2D(6, 3, padding="same", activation="relu")(x)),
        "maxpool2": ((8, 8, 3), lambda x: L.MaxPooling2D(2)(L.Conv2D(4, 3, padding="same")(x))),
        "maxpool3_s2_same": ((9, 9, 2), lambda x: L.MaxPooling2D(3, strides=2, padding="same")(x)),
        # channels in words: the team's pool by words, its windows cut by the frame's edges, 25 pixels over 3, 8, 9
        "maxpool3_s2_same_c8": ((9, 9, 3), lambda x: L.MaxPooling2D(3, strides=2, padding="same")(
            L.Conv2D(8, 3, padding="same")(x))),
        "avgpool2": ((8, 8, 3), lambda x: L.AveragePooling2D(2)(L.Conv2D(4, 3, padding="same")(x))),
        "avgpool3_s2_same": ((9, 9, 2), lambda x: L.AveragePooling2D(3, strides=2, padding="same")(x)),
        "global_avg": ((8, 8, 3), lambda x: L.GlobalAveragePooling2D()(L.Conv2D(6, 3)(x))),
        "global_max": ((8, 8, 3), lambda x: L.GlobalMaxPooling2D()(L.Conv2D(6, 3)(x))),
        "conv_bn": ((8, 8, 3), lambda x: L.BatchNormalization()(L.Conv2D(4, 3)(x))),
        "batchnorm_alone": ((6, 6, 3), lambda x: L.BatchNormalization()(x)),
        "conv_leaky": ((8, 8, 3), lambda x: L.LeakyReLU(0.1)(L.Conv2D(4, 3, padding="same")(x))),
        "conv_relu6_layer": ((8, 8, 3), lambda x: L.ReLU(6.0)(L.Conv2D(4, 3)(x))),
        "stack": ((16, 16, 1), lambda x: L.GlobalAveragePooling2D()(
            L.SeparableConv2D(8, 3, padding="same", activation="relu")(
                L.MaxPooling2D(2)(L.Conv2D(8, 3, strides=1, padding="same", activation="relu6")(x))))),
    }


def case_folder(tmp: Path, name: str, quant: str) -> tuple[Path, tuple[int, int, int]]:
    shape, body = _cases()[name]
    folder = tmp / f"{name}_{quant}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "step.tflite").write_bytes(convert_case(step_model(shape, body), shape, quant))
    return folder, shape


def check_exact(folder: Path, shape, quant: str, board: str = "host") -> dict:
    from edgernn.tflite.oracle import Stepper

    xq = frames(folder, shape)
    ref, _ = Stepper(folder / "step.tflite", STATES).records(xq)
    if board == "host":
        b = build(folder)
        got, _ = run_driver(b.exe, xq, ref.shape[1], folder)
    else:
        got, _ = run_qemu(folder, xq, ref.shape[1])
    if quant == "float32":
        values = ref.shape[1] // 4
        return compare_float_per_tensor(got, ref, [values - N_STATE, N_STATE])
    return compare(got, ref, quant)


OPS = {
    "conv_k3_same_relu": {"CONV_2D"}, "conv_k3_s2_valid": {"CONV_2D"}, "conv_s2_same": {"CONV_2D"},
    "conv_dilation2_relu6": {"CONV_2D"}, "conv_1x1": {"CONV_2D"}, "depthwise_dm1": {"DEPTHWISE_CONV_2D"},
    "depthwise_dm2_s2": {"DEPTHWISE_CONV_2D"}, "separable": {"DEPTHWISE_CONV_2D", "CONV_2D"},
    "maxpool2": {"MAX_POOL_2D"}, "maxpool3_s2_same": {"MAX_POOL_2D"}, "avgpool2": {"AVERAGE_POOL_2D"},
    "avgpool3_s2_same": {"AVERAGE_POOL_2D"}, "global_avg": {"MEAN"}, "global_max": {"REDUCE_MAX"},
    "conv_bn": {"CONV_2D"}, "batchnorm_alone": {"MUL", "ADD"}, "conv_leaky": {"LEAKY_RELU"}, "conv_relu6_layer": {"CONV_2D"},
    "stack": {"CONV_2D", "MAX_POOL_2D", "DEPTHWISE_CONV_2D", "MEAN"},
}


@pytest.mark.parametrize("quant", ["int8", "int16", "float32"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_conv_front_end_matches_interpreter(tmp_path, name, quant):
    from edgernn.backend.reader import read_tflite

    folder, shape = case_folder(tmp_path, name, quant)
    ops = set(read_tflite(folder / "step.tflite").op_names)
    assert OPS[name] <= ops, f"the converter emitted {sorted(ops)}"
    stats = check_exact(folder, shape, quant)
    if quant == "float32":
        assert stats["not_close"] == 0, stats
    else:
        assert stats["mismatches"] == 0, stats


@pytest.mark.qemu
@pytest.mark.toolchain
@pytest.mark.parametrize("quant", ["int8", "int16"])
@pytest.mark.parametrize("name", ["stack", "depthwise_dm2_s2", "avgpool3_s2_same", "conv_leaky"])
def test_conv_front_end_on_qemu_riscv32(tmp_path, name, quant):
    """The RV32IMC build (picolibc, bare metal) computes the same bytes as the interpreter."""
    folder, shape = case_folder(tmp_path, name, quant)
    stats = check_exact(folder, shape, quant, board="qemu_riscv32")
    assert stats["mismatches"] == 0, stats


MBQM_HI_CHECK = r"""
#include <stdio.h>
#include "edgernn_fixedpoint.h"

static uint64_t state = 88172645463325252ull;
static uint64_t next(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

int main(void)
{
    long bad = 0;
    int s;
    for (s = -31; s <= 3; ++s) {
        long k;
        for (k = 0; k < 200000; ++k) {
            int32_t m = (int32_t)((1u << 30) + (uint32_t)(next() % (1u << 30)));
            int32_t x;
            switch (k % 6) {
            case 0: x = (int32_t)next(); break;
            case 1: x = (int32_t)(next() % 200001) - 100000; break;
            case 2: m = 1 << 30; x = (int32_t)(next() % 2001) - 1000; break;   /* every tie */
            case 3: x = (int32_t)(next() % 21) - 10; break;
            case 4: m = 0x7fffffff; x = (int32_t)next(); break;
            default: x = (int32_t)(next() % 2000001) - 1000000; break;
            }
            if (k < 3) {
                x = k == 0 ? INT32_MIN : (k == 1 ? INT32_MAX : -1);
            }
            if (s > 0 && (x > (INT32_MAX >> s) || x < (INT32_MIN >> s))) {
                continue;   /* TFLite's precondition: x * 2^shift fits in int32 */
            }
            bad += edgernn_mbqm_hi(x, m, s) != edgernn_mbqm(x, m, s);
        }
    }
    printf("%ld\n", bad);
    return bad != 0;
}
"""


@pytest.mark.toolchain
def test_high_word_rescale_equals_multiply_by_quantized_multiplier(tmp_path):
    """edgernn_mbqm_hi (the convolutions' rescale) against edgernn_mbqm, over 7 million operands: every right
    shift, ties of both signs, the extremes of int32."""
    import subprocess

    from edgernn.resources import templates_dir

    src = tmp_path / "mbqm_hi_check.c"
    src.write_text(MBQM_HI_CHECK)
    exe = tmp_path / "mbqm_hi_check"
    subprocess.run(["gcc", "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic",
                    "-I", str(templates_dir() / "kernels"), str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split()[-1] == "0", out.stdout


@pytest.mark.parametrize("padding", [0, 1])
def test_geometry_is_tflites(padding):
    """Output sizes and leading padding as TFLite's ComputePaddingHeightWidth, against the closed forms."""
    import math

    from edgernn.backend.lowering.conv import _out_size, _pad

    for size in range(3, 20):
        for k in (1, 2, 3, 5):
            for stride in (1, 2, 3):
                for dil in (1, 2):
                    eff = (k - 1) * dil + 1
                    if eff > size:
                        continue
                    out = _out_size(padding, size, k, stride, dil)
                    assert out == (math.ceil(size / stride) if padding == 0 else math.ceil((size - eff + 1) / stride))
                    total = max((out - 1) * stride + eff - size, 0)
                    assert _pad(size, k, stride, dil, out) == total // 2


def test_convolution_refused_in_a_graph_on_builtin_kernels(tmp_path):
    """A graph validated on LiteRT's builtin kernels (one with a quantized SUM) would hold the convolutions
    against kernels not measured here: refused, with the op named."""
    from edgernn.backend.lowering import Lowering, Unsupported
    from edgernn.backend.reader import read_tflite

    folder, _ = case_folder(tmp_path, "conv_k3_same_relu", "int8")
    graph = read_tflite(folder / "step.tflite")
    graph.oracle = "builtin"
    with pytest.raises(Unsupported, match=r"op 0 \(CONV_2D\) is not supported by the C backend: int8 convolution in"):
        Lowering(graph, "edgernn_step").lower()


@pytest.mark.toolchain
@pytest.mark.parametrize("name", ["stack", "conv_s2_same"])
def test_int8_convolution_dot_paths_are_byte_exact(tmp_path, name):
    """The int8 convolution's dot products in every build of edgernn_dot.h: portable, the scalar-core
    blocking (EDGERNN_FC_SCALAR), and GAP8's Xpulp SIMD path built on the host on the C emulation of its
    builtin and on GCC vectors. Patches of 9 and 27 bytes (not multiples of 4), 8 and 9 output channels."""
    from edgernn.testing import backend_harness as H

    folder, shape = case_folder(tmp_path, name, "int8")
    xq = frames(folder, shape)
    from edgernn.tflite.oracle import Stepper

    ref, _ = Stepper(folder / "step.tflite", STATES).records(xq)
    variants = {"portable": [], "scalar": ["-DEDGERNN_FC_SCALAR"], "emulated": ["-DEDGERNN_XPULP_EMULATE"],
                "vector": ["-DEDGERNN_XPULP=1", H.VECTOR_SDOTSP4]}
    objects = {}
    for label, flags in variants.items():
        b = H.build(folder, cflags=["-O2", *flags], name=f"driver_{label}", kernels=H.kernel_set_of(flags))
        objects[label] = b.object_of("edgernn_conv.c").read_bytes()
        got, _ = H.run_driver(b.exe, xq, ref.shape[1], folder)
        assert H.compare(got, ref, "int8")["mismatches"] == 0, label
    # the macros select other code, or the comparison would prove nothing
    assert objects["emulated"] != objects["portable"] and objects["vector"] != objects["portable"]


@pytest.mark.toolchain
@pytest.mark.parametrize("name,quant", [("stack", "int8"), ("conv_1x1", "int8"), ("maxpool2", "int8"),
                                        ("maxpool3_s2_same_c8", "int8"), ("stack", "int16")])
def test_team_shares_int8_convolutions_with_identical_bytes(tmp_path, name, quant):
    """1, 3 and 8 POSIX threads (the host's team, as GAP8's cluster splits), and 9 (more workers than
    CONV_2D has patch slots: its single-core kernel): CONV_2D's output pixels (int8 and 16x8), each worker
    gathering its own patches, and the int8 DEPTHWISE_CONV_2D's and pools' rows give the bytes of the
    single-core build and the interpreter's."""
    from edgernn.testing import backend_harness as H
    from edgernn.tflite.oracle import Stepper

    folder, shape = case_folder(tmp_path, name, quant)
    xq = frames(folder, shape)
    ref, _ = Stepper(folder / "step.tflite", STATES).records(xq)
    suffix = "s8" if quant == "int8" else "s16"
    for n in (1, 3, 8, 9):
        b = H.build(folder, cflags=["-O2", f"-DEDGERNN_THREADS={n}", "-pthread"], name=f"driver_t{n}")
        model_c = (folder / "firmware" / "model.c").read_text()
        if "pool" not in name:
            assert f"edgernn_team_conv_{suffix}(" in model_c, "the schedule shares no CONV_2D"
        if name == "stack" and quant == "int8":
            assert "edgernn_team_depthwise_conv_s8(" in model_c
        if "pool" in name:
            assert f"edgernn_team_{name[:3]}_pool_s8(" in model_c, "the schedule shares no pool"
        got, _ = H.run_driver(b.exe, xq, ref.shape[1], folder)
        assert H.compare(got, ref, quant)["mismatches"] == 0, f"{n} workers"


@pytest.mark.toolchain
@pytest.mark.parametrize("name,quant", [("stack", "int8"), ("stack", "int16"), ("depthwise_dm2_s2", "int8"),
                                        ("conv_k3_s2_valid", "int16"), ("maxpool3_s2_same", "float32")])
def test_sanitizers_report_nothing_on_the_front_end(tmp_path, name, quant):
    """AddressSanitizer and UBSan over the gathered patches, the padded frames and the pools' windows (frames
    with strides that leave rows and columns over, and 'same' padding on every side)."""
    import os

    from edgernn.testing import backend_harness as H
    from edgernn.tflite.oracle import Stepper

    folder, shape = case_folder(tmp_path, name, quant)
    b = H.build(folder, cflags=["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                                "-fno-omit-frame-pointer"], name="driver_asan")
    xq = frames(folder, shape)
    ref, _ = Stepper(folder / "step.tflite", STATES).records(xq)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1")
    got, stderr = H.run_driver(b.exe, xq, ref.shape[1], folder, env=env)
    assert "runtime error" not in stderr and "AddressSanitizer" not in stderr, stderr
    if quant == "float32":
        assert compare_float_per_tensor(got, ref, [ref.shape[1] // 4 - N_STATE, N_STATE])["not_close"] == 0
    else:
        assert compare(got, ref, quant)["mismatches"] == 0


@pytest.mark.toolchain
def test_clang_compiles_the_front_end_warning_free(tmp_path):
    """-Werror -pedantic -std=c99 with clang too (the host board's flags), every kernel of edgernn_conv.c used."""
    import shutil

    from conftest import require_tools

    require_tools("clang")
    from edgernn.backend import generate_firmware
    from edgernn.targets.board import load_board
    from edgernn.targets.compile import Part, compile_firmware
    from edgernn.testing.backend_harness import DRIVER

    folder, _ = case_folder(tmp_path, "stack", "int16")
    board = load_board("host")
    generate_firmware(folder, board)
    built = compile_firmware(folder / "firmware", board, part=Part.MODEL, extra_sources=[DRIVER],
                             build_dir=folder / "build" / "clang", output_name="clang", compilers=["clang"])
    assert all("-Werror" in c and "-pedantic" in c for c in built.command_lines)


@pytest.mark.toolchain
def test_thread_sanitizer_reports_nothing_on_the_shared_convolutions(tmp_path):
    """8 threads under ThreadSanitizer: the patches each worker gathers into its own slot, and the padded frame
    the calling core writes before the depthwise split, read by every worker, race with nothing (TSan checked to see a planted race first, as in
    tests/backend/test_team.py)."""
    import os
    import subprocess

    from edgernn.testing import backend_harness as H
    from edgernn.tflite.oracle import Stepper

    tsan = ["-fsanitize=thread", "-g", "-O1", "-pthread"]
    probe = tmp_path / "race.c"
    probe.write_text("#include <pthread.h>\nint x;\nstatic void *f(void *a) { x++; return a; }\n"
                     "int main(void) { pthread_t t; pthread_create(&t, 0, f, 0); x++; pthread_join(t, 0); "
                     "return 0; }\n")
    if subprocess.run(["gcc", *tsan, str(probe), "-o", str(tmp_path / "race")], capture_output=True).returncode:
        from conftest import tool_unavailable

        tool_unavailable("gcc cannot build with -fsanitize=thread here")
    prefix = []
    if "ThreadSanitizer" not in subprocess.run([str(tmp_path / "race")], capture_output=True, text=True).stderr:
        prefix = ["setarch", "-R"]     # address-space randomisation can defeat TSan's memory map
    control = subprocess.run(prefix + [str(tmp_path / "race")], capture_output=True, text=True)
    assert "WARNING: ThreadSanitizer: data race" in control.stderr, "TSan does not work here"

    folder, shape = case_folder(tmp_path, "stack", "int8")
    xq = frames(folder, shape, steps=4)
    ref, _ = Stepper(folder / "step.tflite", STATES).records(xq)
    b = H.build(folder, cflags=[*tsan, "-DEDGERNN_THREADS=8"], name="driver_tsan")
    assert "edgernn_team_depthwise_conv_s8(" in (folder / "firmware" / "model.c").read_text()
    inp, out = tmp_path / "tsan.in", tmp_path / "tsan.out"
    inp.write_bytes(np.int32(xq.shape[0]).tobytes() + np.ascontiguousarray(xq).tobytes())
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=0 exitcode=66")
    proc = subprocess.run(prefix + [str(b.exe), str(inp), str(out)], capture_output=True, text=True, env=env)
    assert "ThreadSanitizer" not in proc.stderr, proc.stderr[:2000]
    assert proc.returncode == 0, proc.stderr[:500]
    got = np.frombuffer(out.read_bytes(), np.uint8).reshape(xq.shape[0], -1)
    assert compare(got, ref, "int8")["mismatches"] == 0
