"""TFLite's quantization arithmetic, computed in Python exactly as the reference kernels compute it.

Multipliers are derived from the float32 scales stored in the model, with the same float/double
promotions as TFLite's Prepare functions (they matter for the last bit of a multiplier). The integer
helpers mirror ``tensorflow/lite/kernels/internal/common.h`` and gemmlowp, so a lookup table for an
8-bit op can be filled here by running the very arithmetic the interpreter runs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math

import numpy as np

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


def tflite_round(x: float) -> float:
    """std::round: halves away from zero."""
    return math.copysign(math.floor(abs(x) + 0.5), x)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """tflite::QuantizeMultiplier: (Q31 multiplier, shift), shift > 0 meaning a left shift."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = int(tflite_round(q * (1 << 31)))
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        shift, q_fixed = 0, 0
    if shift > 30:
        shift, q_fixed = 30, (1 << 31) - 1
    return q_fixed, shift


def f32(x) -> float:
    """Round a Python float to float32, as a C++ float expression would."""
    return float(np.float32(x))


# ---- integer helpers, value for value the same as the C in templates/kernels/edgernn_fixedpoint.h ----

def _wrap32(x: int) -> int:
    return (x + (1 << 31)) % (1 << 32) - (1 << 31)


def srdhm(a: int, b: int) -> int:
    """gemmlowp::SaturatingRoundingDoublingHighMul."""
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return _tdiv(ab + nudge, 1 << 31)


def _tdiv(a: int, b: int) -> int:
    """C integer division (truncation toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def rdbpot(x: int, exponent: int) -> int:
    """gemmlowp::RoundingDivideByPOT."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def shift_left_or_floor(x: int, shift: int) -> int:
    """x * 2^shift, or for a negative shift x >> -shift (arithmetic, truncating toward -inf): NEON's vshl."""
    return _wrap32(x << shift) if shift >= 0 else x >> -shift


def mbqm(x: int, multiplier: int, shift: int) -> int:
    """tflite::MultiplyByQuantizedMultiplier (int32 form, double rounding)."""
    left = shift if shift > 0 else 0
    right = 0 if shift > 0 else -shift
    return rdbpot(srdhm(_wrap32(x * (1 << left)), multiplier), right)


# ---- float activation tables, computed with the C library's float functions as TFLite's Prepare does ----

_LIBM = None


def _libm():
    global _LIBM
    if _LIBM is None:
        lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        for fn in ("expf", "tanhf"):
            getattr(lib, fn).restype = ctypes.c_float
            getattr(lib, fn).argtypes = [ctypes.c_float]
        _LIBM = lib
    return _LIBM


def float_unary(name: str):
    """The float function that TFLite's PopulateLookupTable applies, evaluated in float32."""
    lib = _libm()
    if name == "LOGISTIC":
        return lambda v: f32(1.0 / f32(1.0 + lib.expf(f32(-v))))
    if name == "TANH":
        return lambda v: f32(lib.tanhf(v))
    if name == "EXP":
        return lambda v: f32(lib.expf(v))
    raise KeyError(name)


def lookup_table_s8(fn, in_scale: float, in_zp: int, out_scale: float, out_zp: int) -> np.ndarray:
    """tflite PopulateLookupTable<int8_t>: table indexed by (uint8_t)input."""
    inverse_scale = f32(1.0 / np.float32(out_scale))
    table = np.zeros(256, dtype=np.int8)
    for val in range(-128, 128):
        dequantized = f32(np.float32(in_scale) * np.float32(val - in_zp))
        transformed = fn(dequantized)
        rescaled = tflite_round(f32(np.float32(transformed) * np.float32(inverse_scale)))
        quantized = int(rescaled + out_zp) if math.isfinite(rescaled) else (127 if rescaled > 0 else -128)
        table[val & 0xFF] = max(-128, min(127, quantized))
    return table


def checked_log2(x: float) -> tuple[bool, int]:
    """tflite::CheckedLog2."""
    x_log2 = math.log(x) * (1.0 / math.log(2.0))
    x_log2_rounded = tflite_round(x_log2)
    return abs(x_log2 - x_log2_rounded) < 1e-3, int(x_log2_rounded)


def int16_activation_params(op: str, in_scale: float) -> tuple[int, int]:
    """(input_multiplier, input_left_shift) of TFLite's int16 LOGISTIC / TANH Prepare."""
    pot, log2 = checked_log2(in_scale)
    left_shift = (15 - 3) + log2
    if op == "TANH":
        pot = pot and left_shift in (0, 1)
    else:
        pot = pot and left_shift == 0
    if pot:
        return 0, left_shift
    multiplier = float(np.float32(in_scale)) * 4096.0 * 3.0
    left_shift = 0
    while multiplier <= 32767.0 / 2.0 and left_shift <= 30:
        left_shift += 1
        multiplier *= 2.0
    return int(multiplier), left_shift


def lstm_effective_scale(weight_scale: float, activation_scale: float, gate_scale: float) -> float:
    """weight scale * activation scale / gate scale, in float as the integer LSTM's Prepare computes it."""
    return f32(np.float32(np.float32(weight_scale) * np.float32(activation_scale)) / np.float32(gate_scale))


def lstm_quantized_cell_clip(cell_clip: float, cell_scale: float) -> int:
    """The int16 cell clip of the integer LSTM's Prepare (0: no clipping); the cast truncates."""
    if cell_clip <= 0.0:
        return 0
    value = f32(np.float32(cell_clip) / np.float32(cell_scale))
    return int(min(max(value, -32768.0), 32767.0))


def activation_range(act: int, dtype: str, scale: float, zp: int) -> tuple[int, int]:
    """CalculateActivationRangeQuantized for a fused activation code of the schema."""
    qmin, qmax = {"int8": (-128, 127), "int16": (-32768, 32767)}[dtype]
    def q(v: float) -> int:
        return zp + int(tflite_round(v / scale))
    if act == 0:  # NONE
        return qmin, qmax
    if act == 1:  # RELU
        return max(qmin, q(0.0)), qmax
    if act == 2:  # RELU_N1_TO_1
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    if act == 3:  # RELU6
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    raise ValueError(f"fused activation {act}")


def activation_range_float(act: int) -> tuple[float, float]:
    inf = float("inf")
    return {0: (-inf, inf), 1: (0.0, inf), 2: (-1.0, 1.0), 3: (0.0, 6.0)}[act]


# ---- reductions, 16-bit tables, reciprocal square root ----

def reduce_params(in_scale: float, out_scale: float, count: int, mean: bool) -> tuple[int, int]:
    """(multiplier, shift) of reference_ops::QuantizedMeanOrSum for a sum (or mean) of count values.

    PrepareMeanOrSum quantizes input_scale / output_scale; for MEAN the kernel folds 1 / count into
    the multiplier with an integer division, clamping the extra shift as the kernel does.
    """
    mult, shift = quantize_multiplier(float(np.float32(in_scale)) / float(np.float32(out_scale)))
    if mean:
        extra = min(count.bit_length() - 1, 32, 31 + shift)
        mult = _tdiv(mult << extra, count)
        shift -= extra
    return mult, shift


def sum_float_params(in_scale: float, out_scale: float, in_zp: int, count: int) -> tuple[float, float]:
    """(scale, bias) in float32 of LiteRT's quantized SUM: out = round(sum * scale + bias) + zp_out."""
    scale = np.float32(in_scale) / np.float32(out_scale)
    bias = np.float32(np.float32(np.float32(-in_zp) * scale) * np.float32(count))
    return float(scale), float(bias)


def thresholds_slope(thresholds: list[int]) -> int:
    """(n - 1) / (last - first) of n thresholds in 16.16, truncated (0 for fewer than two, or equal ends):
    edgernn_sum_thresholds_s8's guess, which reads it after the thresholds rather than divide at run time (a
    `divu` a call, some 26 cycles in GVSOC, 14 calls a core in an LTC step). The same unsigned division the C
    would do: the ends' difference is positive and below 2^32."""
    n = len(thresholds)
    if n < 2 or thresholds[-1] <= thresholds[0]:
        return 0
    return ((n - 1) << 16) // (thresholds[-1] - thresholds[0])


def sum_thresholds(scale: float, bias: float, out_zp: int, count: int) -> tuple[int, list[int]] | None:
    """edgernn_sum_s8's output for every int32 sum of ``count`` int8 values, as (output of the least sum,
    the least sum giving each next output value); None where that is not a non-decreasing function or
    the float leaves the int32 range. The float32 arithmetic is the kernel's, operation by operation:
    (float)sum * scale, + bias, roundf (halves away from zero), + zero point, clamped."""
    sums = np.arange(-128 * count, 127 * count + 1, dtype=np.int64)
    if sums.size > (1 << 22) or 127 * count >= (1 << 24):
        return None
    scaled = sums.astype(np.float32) * np.float32(scale)
    shifted = (scaled + np.float32(bias)).astype(np.float64)
    if not np.all(np.abs(shifted) < 2.0 ** 31 - 1):
        return None
    rounded = np.sign(shifted) * np.floor(np.abs(shifted) + 0.5)
    out = np.clip(rounded.astype(np.int64) + out_zp, -128, 127)
    if np.any(np.diff(out) < 0):
        return None
    rises = np.nonzero(np.diff(out))[0] + 1
    steps = []
    for k in rises:
        steps += [int(sums[k])] * int(out[k] - out[k - 1])
    return int(out[0]), steps


def lookup_table_s16(fn, in_scale: float, in_zp: int, out_scale: float, out_zp: int,
                     precision=np.float32) -> np.ndarray:
    """tflite LUTPopulateInt16<FloatT>: 513 entries for the interpolating int16 lookup.

    FloatT is float for EXP and double for the two tables of the int16 SOFTMAX; ``fn`` must compute
    in the same precision (the C library's expf for float).
    """
    F = precision
    in_s, out_s = F(in_scale), F(out_scale)
    input_min = F(in_s * F(-32768 - in_zp))
    input_max = F(in_s * F(32767 - in_zp))
    output_min = F(out_s * F(-32768 - out_zp))
    output_max = F(out_s * F(32767 - out_zp))
    step = F(F(input_max - input_min) / F(512))
    half_step = F(step / F(2))
    inv = F(F(65536) / F(output_max - output_min))

    def rnd(x):
        return F(tflite_round(float(x)))

    lut = np.zeros(513, dtype=np.int16)
    for i in range(512):
        x = F(input_min + F(F(i) * step))
        val = F(fn(float(x)))
        val_mid = F(fn(float(F(x + half_step))))
        val_next = F(fn(float(F(input_min + F(F(i + 1) * step)))))
        sample = rnd(F(val * inv))
        mid_interp = rnd(F(F(F(val_next * inv) + rnd(F(val * inv))) / F(2)))
        mid = rnd(F(val_mid * inv))
        bias = rnd(F(F(mid_interp - mid) / F(2)))
        lut[i] = int(min(max(F(sample - bias), F(-32768)), F(32767)))
    lut[512] = int(min(max(rnd(F(F(fn(float(input_max))) * inv)), F(-32768)), F(32767)))
    return lut


def softmax_s16_tables() -> tuple[np.ndarray, np.ndarray]:
    """The exp and 1 / (1 + x) tables of TFLite's int16 SOFTMAX Prepare (double precision)."""
    rng = 65535.0
    exp_lut = lookup_table_s16(math.exp, 10.0 / rng, 32767, 2.0 / rng, 0, precision=np.float64)
    recip_lut = lookup_table_s16(lambda v: 1.0 / (1.0 + v), 1.0 / rng, -32768, 2.0 / rng, 0,
                                 precision=np.float64)
    return exp_lut, recip_lut


def softmax_s8_params(beta: float, in_scale: float) -> tuple[int, int, int]:
    """(input_multiplier, input_left_shift, diff_min) of the 8-bit reference SOFTMAX Prepare."""
    integer_bits = 5
    real = min(float(np.float32(beta)) * float(np.float32(in_scale)) * float(1 << (31 - integer_bits)),
               float((1 << 31) - 1))
    mult, left_shift = quantize_multiplier(real)
    radius = math.floor(1.0 * ((1 << integer_bits) - 1) * (1 << (31 - integer_bits)) / (1 << left_shift))
    return mult, left_shift, -radius


def softmax_s16_params(beta: float, in_scale: float) -> tuple[int, int]:
    """(input_multiplier, input_shift) of the int16 SOFTMAX Prepare: the input scaled to 10 / 65535."""
    real = f32(np.float32(in_scale) * np.float32(beta)) / (10.0 / 65535.0)
    return quantize_multiplier(real)


def _sat_shl(x: int, exponent: int) -> int:
    return max(INT32_MIN, min(INT32_MAX, x * (1 << exponent)))


def inv_sqrt_multiplier_exp(value: int) -> tuple[int, int]:
    """tflite::GetInvSqrtQuantizedMultiplierExp(value, kReverseShift): (multiplier, left shift)."""
    if value <= 1:
        return INT32_MAX, 0
    shift = 11
    while value >= (1 << 29):
        value //= 4
        shift += 1
    max_left_shift_bits = (32 - value.bit_length()) - 1
    left_shift_bit_pairs = max_left_shift_bits // 2 - 1
    shift -= left_shift_bit_pairs
    value <<= 2 * left_shift_bit_pairs
    fixed_input = value >> 1                      # F3
    half_input = rdbpot(fixed_input, 1)           # SaturatingRoundingMultiplyByPOT<-1>
    half_three = (1 << 28) + (1 << 27)            # 1.5 in F3
    x = 1 << 28                                   # F3 one
    for _ in range(5):
        x3 = _sat_shl(srdhm(srdhm(x, x), x), 6)   # Rescale<3>(x * x * x), F9 -> F3
        x = _sat_shl(_wrap32(srdhm(half_three, x) - srdhm(half_input, x3)), 3)
    x = srdhm(x, 1518500250)                      # times sqrt(2) / 2 in F0
    if shift < 0:
        x = _wrap32(x << -shift)
        shift = 0
    return x, -shift


def rsqrt_table_s8(in_scale: float, in_zp: int, out_scale: float, out_zp: int) -> np.ndarray:
    """The 8-bit RSQRT of elementwise.cc, value by value (its Prepare: 1 / (sqrtf(s_in) * s_out))."""
    real = 1.0 / float(np.float32(np.sqrt(np.float32(in_scale)) * np.float32(out_scale)))
    mult, shift = quantize_multiplier(real)
    k_shift = 20
    table = np.zeros(256, dtype=np.int8)
    for v in range(-128, 128):
        value = v - in_zp
        if value == 0:
            table[v & 0xFF] = 127
            continue
        if value < 0:
            table[v & 0xFF] = 127       # the interpreter rejects these inputs; never reached
            continue
        inv_m, inv_s = inv_sqrt_multiplier_exp(value)
        data = mbqm(1, inv_m, inv_s + k_shift)
        out = mbqm(data, mult, shift - k_shift) + out_zp
        table[v & 0xFF] = max(-128, min(127, out))
    return table


# ---- LEAKY_RELU ----

def leaky_relu_params(in_scale: float, out_scale: float, alpha: float) -> tuple[tuple[int, int], tuple[int, int]]:
    """((identity multiplier, shift), (alpha multiplier, shift)) as TFLite's LeakyReluPrepare computes
    them: the scales and alpha multiplied and divided in float32, then QuantizeMultiplier."""
    si, so, a = np.float32(in_scale), np.float32(out_scale), np.float32(alpha)
    identity = f32(si / so)
    alpha_real = f32(np.float32(si * a) / so)
    return quantize_multiplier(identity), quantize_multiplier(alpha_real)


def leaky_relu_table_s8(in_zp: int, out_zp: int, mi: int, shi: int, ma: int, sha: int) -> np.ndarray:
    """The outputs of TFLite's QuantizeLeakyRelu<int8_t>, as edgernn_lut_s8's table (indexed by (uint8_t)input)."""
    table = np.zeros(256, dtype=np.int64)
    for q in range(-128, 128):
        v = q - in_zp
        r = mbqm(v, mi, shi) if v >= 0 else mbqm(v, ma, sha)
        table[q & 0xFF] = min(127, max(-128, r + out_zp))
    return table
