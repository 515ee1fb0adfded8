"""GAP8's int8 convolution paths on the host: CONV_2D's 4x2 blocking (two pixels' patches against 4 output
channels) and DEPTHWISE_CONV_2D by channel planes (edgernn_conv.c, compiled where the kernel set has a 4-lane dot product: the GAP8 set's EDGERNN_DOT_SIMD4),
built here on the C emulation of pv.sdotsp.b (-DEDGERNN_XPULP_EMULATE) and on GCC vectors (the builtin's
form), on 1 and 8 POSIX threads (the team as GAP8's cluster splits it), every output and state byte held
against the LiteRT interpreter. The shapes are the odd ones: channels not a multiple of 4 (tails of the
patch and of the output channels), a single output channel quad, strides, dilation, SAME and VALID, an odd
count of pixels (a last unpaired one), a filter narrower than 3 and taller than 3, one input channel (the stem's
kernel: padding folded into the sum's start, the frame's edges in C). The hardware loop itself
runs only on GAP8: the GVSOC runs are tests/e2e (test_frontends_e2e, test_conv_dma_e2e) and
bench/bench_conv.py --board gvsoc_gap8."""

from __future__ import annotations

import pytest

from edgernn.testing.conv_steps import STATES, convert_case, frames, layers, step_model

pytestmark = pytest.mark.toolchain


def _cases():
    L = layers()
    return {
        # patch 27 (3 mod 4), 5 output channels (one quad and one single)
        "conv_c3_o5_same": ((7, 9, 3), lambda x: L.Conv2D(5, 3, padding="same")(x)),
        # patch 45 (1 mod 4), 13 channels (a block of 8, a quad, a single); 4x4 = 16 pixels at stride 2
        "conv_c5_o13_s2_valid": ((9, 9, 5), lambda x: L.Conv2D(13, 3, strides=2, padding="valid")(x)),
        # patch of whole words (word copies), 12 channels (8 + 4), 5x5 = 25 pixels (odd), dilation 2
        "conv_c8_o12_dil2": ((9, 9, 8), lambda x: L.Conv2D(12, 3, dilation_rate=2, padding="valid",
                                                            activation="relu")(x)),
        # 1x1 stride 1, 6 inputs a pixel (pixels read in place, not word-aligned: one at a time)
        "conv_1x1_c6_o9": ((5, 7, 6), lambda x: L.Conv2D(9, 1)(x)),
        # one input channel (a stem, the frame read in place): stride 2, a zero-point row below and column right,
        # a block of 4 channels, under a ReLU (the signless requantization)
        "conv_c1_o4_s2_same_relu": ((17, 16, 1), lambda x: L.Conv2D(4, 3, strides=2, padding="same",
                                                                     activation="relu")(x)),
        # stride 1 (pixel pairs), padded on every side, 13 channels (8 + 4 + 1), ReLU6 (the clamp's p.max/p.min)
        "conv_c1_o13_relu6": ((7, 9, 1), lambda x: L.Conv2D(13, 3, padding="same", activation="relu6")(x)),
        # a filter row of 2 taps, strides (2, 1), VALID, 8 channels (a channel a worker on 8)
        "conv_c1_o8_k3x2_s21": ((9, 10, 1), lambda x: L.Conv2D(8, (3, 2), strides=(2, 1), padding="valid")(x)),
        # 5 rows dilated by 2 (not the 3-row loop), 5 channels
        "conv_c1_o5_k5x3_dil2": ((11, 8, 1), lambda x: L.Conv2D(5, (5, 3), dilation_rate=(2, 1),
                                                                 padding="same")(x)),
        # one input channel whose zero point is far from 0 (the frame shifted by 0.7 before the convolution): the
        # filter rows above and below the frame add the zero point times their weights to each sum's start; at
        # stride 2 SAME with a row outside at the top and the bottom, and at stride 1 SAME, 5 rows a channel
        "conv_c1_o8_s2_same_zp": ((13, 12, 1), lambda x: L.Conv2D(8, 3, strides=2, padding="same")(
            L.Rescaling(1.0, offset=0.7)(x))),
        "conv_c1_o5_same_zp_relu": ((6, 9, 1), lambda x: L.Conv2D(5, 3, padding="same", activation="relu")(
            L.Rescaling(1.0, offset=0.7)(x))),
        # one input channel, filter rows past 3 taps (the stem kernel refuses them: the patches' 4x2 blocking):
        # 5x5 stride 2 SAME (PULP-Dronet's stem: a zero-point row above, a column left, two right), 32 channels, no
        # clamp; 5x5 stride 1 SAME under a ReLU, odd width; 5x5 stride 2 VALID, 9 channels (8 + 1), ReLU6; 7x7
        # stride 2 SAME; a 5x4 filter at strides (1, 2)
        "conv_c1_o32_k5_s2_same": ((21, 20, 1), lambda x: L.Conv2D(32, 5, strides=2, padding="same")(x)),
        "conv_c1_o6_k5_same_relu": ((9, 13, 1), lambda x: L.Conv2D(6, 5, padding="same", activation="relu")(x)),
        "conv_c1_o9_k5_s2_valid_relu6": ((15, 17, 1), lambda x: L.Conv2D(9, 5, strides=2, padding="valid",
                                                                          activation="relu6")(x)),
        "conv_c1_o8_k7_s2_same": ((19, 18, 1), lambda x: L.Conv2D(8, 7, strides=2, padding="same")(x)),
        "conv_c1_o5_k5x4_s12": ((11, 14, 1), lambda x: L.Conv2D(5, (5, 4), strides=(1, 2), padding="same")(x)),
        # 2x5 filter (the depthwise planes refuse k_w 5: the HWC walk), 2x2 stride
        "depthwise_k2x5": ((8, 8, 4), lambda x: L.DepthwiseConv2D((5, 2), strides=2, padding="same")(x)),
        # 3x3 over 7 channels (a quad, a partial quad), odd width
        "depthwise_c7_same": ((7, 9, 7), lambda x: L.DepthwiseConv2D(3, padding="same")(x)),
        # 3x3 VALID, stride 2 along y and x (x stride 2: the HWC walk), and stride (2, 1): planes
        "depthwise_c8_s2": ((9, 9, 8), lambda x: L.DepthwiseConv2D(3, strides=2, padding="valid")(x)),
        "depthwise_c12_s21": ((9, 10, 12), lambda x: L.DepthwiseConv2D(3, strides=(2, 1), padding="same")(x)),
        # 4x1 filter taller than 3, 32 channels (8 workers, a quad each)
        "depthwise_c32_k4x1": ((6, 5, 32), lambda x: L.DepthwiseConv2D((4, 1), padding="same")(x)),
    }


VARIANTS = {  # label: compiler flags (the POSIX team of EDGERNN_THREADS workers)
    "emulated, 1 worker": ["-DEDGERNN_XPULP_EMULATE", "-DEDGERNN_THREADS=1", "-pthread"],
    "emulated, 8 workers": ["-DEDGERNN_XPULP_EMULATE", "-DEDGERNN_THREADS=8", "-pthread"],
    # and every frame as near as scratch: a one-input-channel filter reads it in place (the others copy its rows)
    "vector, 3 workers, frames near": ["-DEDGERNN_XPULP=1", "VECTOR", "-DEDGERNN_THREADS=3", "-pthread",
                                       "-DEDGERNN_NEAR(p)=1"],
}


@pytest.mark.parametrize("name", sorted(_cases()))
def test_gap8_convolution_paths_match_the_interpreter(tmp_path, name):
    from edgernn.testing import backend_harness as H
    from edgernn.tflite.oracle import Stepper

    shape, body = _cases()[name]
    folder = tmp_path / name
    folder.mkdir()
    (folder / "step.tflite").write_bytes(convert_case(step_model(shape, body), shape, "int8"))
    xq = frames(folder, shape, steps=6)
    ref, _ = Stepper(folder / "step.tflite", STATES).records(xq)
    for i, (label, flags) in enumerate(VARIANTS.items()):
        flags = [H.VECTOR_SDOTSP4 if f == "VECTOR" else f for f in flags]
        b = H.build(folder, cflags=["-O2", *flags], name=f"driver_{i}", kernels=H.kernel_set_of(flags))
        got, _ = H.run_driver(b.exe, xq, ref.shape[1], folder)
        assert H.compare(got, ref, "int8")["mismatches"] == 0, label
