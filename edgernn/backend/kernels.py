"""Every C kernel the lowering can call, and every parameter struct they take: the one place a signature
is written.

From this table come the kernel prototypes (edgernn_kernels.h), the team kernel
prototypes (edgernn_team.h) and the team wrappers (edgernn_team_kernels.c), through the Jinja templates
in templates/kernels/ (``render_sources``); the lowering's calls (``Kernel.order``, by argument name); which calls
the team may share and how large their output range is (``split_count``); and the sizes of the
constant structs (``SIZES``).

The three C files exist only where they are used: ``copy_kernels`` renders them into each firmware
folder beside the kernels, and a test or C check that compiles the kernels on their own renders them
into its own folder (``write_sources(folder)``). So a signature is written once, here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# sizes of the scalar C types of constant arrays and struct fields
SCALAR_SIZES = {"int8_t": 1, "uint8_t": 1, "int16_t": 2, "int32_t": 4, "int64_t": 8, "float": 4}

# edgernn_requantize_s16's mode (edgernn_requantize_t in edgernn_kernels.h)
REQUANTIZE_IDENTITY = 0
REQUANTIZE_ABS = 1
REQUANTIZE_NEG = 2

_DTYPES = {"f32": "float32", "s8": "int8", "s16": "int16"}


@dataclass(frozen=True)
class Arg:
    ctype: str        # as declared, without the name: "const int8_t *", "int"
    name: str

    @property
    def decl(self) -> str:
        return f"{self.ctype}{self.name}" if self.ctype.endswith("*") else f"{self.ctype} {self.name}"


def _params(signature: str) -> tuple[Arg, ...]:
    args = []
    for part in signature.split(","):
        m = re.fullmatch(r"\s*(.*?[\s*])(\w+)\s*", part)
        if m is None:
            raise ValueError(f"cannot read C parameter {part!r}")
        args.append(Arg(m.group(1).strip(), m.group(2)))
    return tuple(args)


@dataclass(frozen=True)
class Field:
    ctype: str
    name: str
    count: int        # 1 for a scalar, N for an array [N]


@dataclass(frozen=True)
class Struct:
    """A parameter struct, declared as C member lines ("int32_t a, b[4];  /* why */")."""

    name: str
    members: tuple[str, ...]
    doc: str = ""

    @property
    def fields(self) -> list[Field]:
        out = []
        for line in self.members:
            decl = line.split("/*")[0].strip().rstrip(";")
            ctype, names = decl.split(" ", 1)
            for name in names.split(","):
                m = re.fullmatch(r"\s*(\w+)(?:\[(\d+)\])?\s*", name)
                out.append(Field(ctype, m.group(1), int(m.group(2) or 1)))
        return out

    @property
    def size(self) -> int:
        """sizeof in C: each field at its natural alignment, the whole rounded to the largest."""
        offset, align = 0, 1
        for f in self.fields:
            s = SCALAR_SIZES[f.ctype]
            offset = (offset + s - 1) // s * s + s * f.count
            align = max(align, s)
        return (offset + align - 1) // align * align

    def index(self, name: str) -> int:
        """The position of a field in the struct's initializer (one item per field, arrays included)."""
        return [f.name for f in self.fields].index(name)


@dataclass(frozen=True)
class Split:
    """One way the team cuts a kernel's output range [0, count) into sub-ranges, one per worker.

    ``count`` is an argument (the range's length; a sub-range passes ``end - begin``) or ``arg.field``
    of a struct argument. ``advance`` names the pointer arguments that move with the range, each with
    the elements it moves per element of the range (a C expression of the arguments). ``when`` is
    (argument, value): this split applies only then, else the next one. ``broadcast``: the count is
    the last dimension of that edgernn_bcast_t argument, shared only when the broadcast is one-dimensional,
    and a sub-range gets a copy of it of that length. ``weight`` scales the count into the measure the
    board's ``[parallel] min_count`` is in (a FULLY_CONNECTED's outputs).
    """

    count: str
    advance: tuple[tuple[str, str], ...] = ()
    when: tuple[str, int] | None = None
    grain: int = 1
    broadcast: str | None = None
    weight: int = 1


@dataclass(frozen=True)
class Kernel:
    name: str
    signature: str
    doc: str = ""
    section: str = ""                 # a heading printed before the kernel in edgernn_kernels.h
    splits: tuple[Split, ...] = ()    # empty: the team does not share it
    team_doc: str = ""                # a comment before the team kernel in edgernn_team.h
    wrapper: bool = True              # False: the team kernel is written by hand (edgernn_lstm.c)
    optional: tuple[str, ...] = ()    # pointer arguments that may be NULL

    @property
    def args(self) -> tuple[Arg, ...]:
        return _params(self.signature)

    @property
    def arg_names(self) -> list[str]:
        return [a.name for a in self.args]

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The element types of the kernel, from its name's suffix (quantize_f32_s8: float32, int8)."""
        return tuple(_DTYPES[p] for p in self.name.split("_")[-2:] if p in _DTYPES)

    @property
    def team_name(self) -> str | None:
        return "edgernn_team_" + self.name[len("edgernn_"):] if self.splits else None

    @property
    def short(self) -> str:
        return self.name[len("edgernn_"):]

    def order(self, args: dict) -> list:
        """The call's arguments in the kernel's order, from a dict by argument name."""
        names = self.arg_names
        if set(args) != set(names):
            missing, extra = set(names) - set(args), set(args) - set(names)
            raise TypeError(f"{self.name}: missing arguments {sorted(missing)}, unknown {sorted(extra)}")
        return [args[n] for n in names]


_FC_FEATURES = "FULLY_CONNECTED splits its output features when there is one row (the step models' case)"

STRUCTS: list[Struct] = [
    Struct("edgernn_bcast_t", ("int32_t dims[4];", "int32_t stride1[4];", "int32_t stride2[4];"),
           doc="Broadcasting of a binary element-wise op, collapsed to at most 4 dimensions. Strides are in\n"
               "elements; a stride of 0 repeats the operand along that dimension."),
    Struct("edgernn_addsub_params_t",
           ("int32_t input1_offset, input2_offset, output_offset;", "int32_t left_shift;",
            "int32_t input1_multiplier, input1_shift;", "int32_t input2_multiplier, input2_shift;",
            "int32_t output_multiplier, output_shift;", "int32_t act_min, act_max;"),
           doc="ADD and SUB of TFLite's general 8/16-bit path."),
    Struct("edgernn_mul_params_t",
           ("int32_t input1_offset, input2_offset, output_offset;", "int32_t output_multiplier, output_shift;",
            "int32_t act_min, act_max;"),
           doc="MUL, and the requantizing unary ops."),
    Struct("edgernn_run_t", ("int32_t dst, src, count;",),
           doc="A contiguous run of elements copied by the data-movement ops."),
    Struct("edgernn_conv_geom_t",
           ("int32_t in_h, in_w, in_c;", "int32_t out_h, out_w, out_c;", "int32_t k_h, k_w;",
            "int32_t stride_h, stride_w, dil_h, dil_w;",
            "int32_t pad_top, pad_left;               /* TFLite's ComputePaddingHeightWidth */",
            "int32_t depth_multiplier;                /* DEPTHWISE_CONV_2D; 1 elsewhere */"),
           doc="The geometry of a convolution or pool over one NHWC frame (batch 1)."),
    Struct("edgernn_lstm_s8_params_t",
           ("int32_t n_input, n_cell;",
            "int32_t in_multiplier[4], in_shift[4];   /* effective input-to-gate scales, per gate */",
            "int32_t rec_multiplier[4], rec_shift[4]; /* effective recurrent-to-gate scales, per gate */",
            "int32_t hidden_multiplier, hidden_shift, hidden_zero_point;",
            "int32_t cell_shift;                      /* 30 + log2(cell scale): input gate x cell gate */",
            "int32_t cell_tanh_integer_bits;          /* 15 + log2(cell scale) */",
            "int32_t cell_clip;                       /* quantized cell clip, 0 for none */"),
           doc="UNIDIRECTIONAL_SEQUENCE_LSTM, 8-bit (edgernn_lstm_s8)."),
    Struct("edgernn_lstm_f32_params_t",
           ("int32_t n_input, n_cell;", "float cell_clip;                        /* 0 for none */"),
           doc="UNIDIRECTIONAL_SEQUENCE_LSTM, float (edgernn_lstm_f32)."),
]

_FLAT = Split("n", (("in1", "1"), ("in2", "1"), ("out", "1")))
_FLAT_CONST = Split("n", (("in", "1"), ("k", "1"), ("out", "1")))
_FLAT_UNARY = Split("n", (("in", "1"), ("out", "1")))
_BCAST = Split("b.dims[3]", (("in1", "b->stride1[3]"), ("in2", "b->stride2[3]"), ("out", "1")), broadcast="b")
_FC_INT = (
    Split("n_out", (("w", "n_in"), ("bias", "1"), ("multiplier", "1"), ("shift", "1"), ("out", "1")),
          when=("rows", 1), grain=8),
    Split("rows", (("in", "n_in"), ("out", "n_out"))),
)
_LSTM = (Split("p.n_cell", weight=4),)
_BINARY_F32 = "const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min, float act_max, float *out"
_TEAM_BCAST_DOC = ("Binary element-wise ops whose broadcast is one-dimensional (dims[0..2] == 1); the schedule only\n"
                   "uses them there.")

KERNELS: list[Kernel] = [
    # ---- fully connected ----
    Kernel("edgernn_fully_connected_f32",
           "const float *in, const float *w, const float *bias, float act_min, float act_max, int rows, int n_in, "
           "int n_out, float *out",
           section="fully connected: out[r][o] = act(sum_i in[r][i] * w[o][i] + bias[o])",
           splits=(Split("n_out", (("w", "n_in"), ("bias", "1"), ("out", "1")), when=("rows", 1), grain=4),
                   Split("rows", (("in", "n_in"), ("out", "n_out")))),
           optional=("bias",),
           team_doc=_FC_FEATURES + ",\nelse its rows; feature sub-ranges start at multiples of 4, "
                    "the row block of the int8 kernel."),
    Kernel("edgernn_fully_connected_s8",
           "const int8_t *in, const int8_t *w, const int32_t *bias, const int32_t *multiplier, const int32_t *shift, "
           "int rounding, int32_t output_offset, int32_t act_min, int32_t act_max, int rows, int n_in, int n_out, "
           "int8_t *out",
           doc="w is in edgernn_dot.h's blocked layout (rows by blocks of 8, inputs by groups of 4).\n"
               "bias already holds bias[o] + input_offset * sum_i w[o][i]. rounding: how the int32 sum is rescaled,\n"
               "as the kernel of the graph's oracle does it (docs/ops.md): EDGERNN_ROUND_ONCE, LiteRT's reference\n"
               "kernel, (x * m + 2^(30 - shift)) >> (31 - shift); EDGERNN_ROUND_TWICE_UP, its builtin kernel (ruy on\n"
               "x86), the rounded high multiply then a rounding right shift, halves up.",
           splits=_FC_INT),
    Kernel("edgernn_fully_connected_group_s8",
           "const int8_t *in, const int8_t *w, const int32_t *bias, const int32_t *multiplier, const int32_t *rnd, "
           "const int32_t *shift, int rounding, const int32_t *ends, int row0, int32_t act_min, int32_t act_max, "
           "int n_in, int n_out, int8_t *out0, int8_t *out1, int8_t *out2, int8_t *out3",
           doc="Two to four int8 FULLY_CONNECTED ops (one row each) that read the same input, one call over all their\n"
               "rows (edgernn/backend/grouping.py): w, bias, multiplier, rnd, shift are the ops' one after the other\n"
               "(w in the blocked layout of all the rows); row r gives clamp((hi(acc * multiplier[r]) + rnd[r]) >>\n"
               "shift[r]), its op's output zero point folded into rnd[r]; op k writes out<k> and ends[k] is the row\n"
               "after its last; row0 is the first row's place in the group (0 for a whole call).",
           splits=(Split("n_out", (("w", "n_in"), ("bias", "1"), ("multiplier", "1"), ("rnd", "1"), ("shift", "1"),
                                   ("row0", "1")), grain=8),),
           team_doc="A group's rows, in blocks of 8 as a FULLY_CONNECTED's features; row0 moves with the range."),
    Kernel("edgernn_fully_connected_s16",
           "const int16_t *in, const int8_t *w, const int64_t *bias, const int32_t *multiplier, const int32_t *shift, "
           "int32_t output_offset, int32_t act_min, int32_t act_max, int rows, int n_in, int n_out, int16_t *out",
           splits=_FC_INT),
    # ---- binary element-wise ----
    Kernel("edgernn_add_f32", _BINARY_F32, section="binary element-wise", splits=(_BCAST,),
           team_doc=_TEAM_BCAST_DOC),
    Kernel("edgernn_sub_f32", _BINARY_F32, splits=(_BCAST,)),
    Kernel("edgernn_mul_f32", _BINARY_F32, splits=(_BCAST,)),
    Kernel("edgernn_div_f32", _BINARY_F32),
    Kernel("edgernn_maximum_f32", "const edgernn_bcast_t *b, const float *in1, const float *in2, float *out"),
    Kernel("edgernn_minimum_f32", "const edgernn_bcast_t *b, const float *in1, const float *in2, float *out"),
    Kernel("edgernn_squared_difference_f32", "const edgernn_bcast_t *b, const float *in1, const float *in2, float *out"),
    Kernel("edgernn_addsub_s8",
           "const edgernn_bcast_t *b, const edgernn_addsub_params_t *p, int subtract, const int8_t *in1, "
           "const int8_t *in2, int8_t *out",
           doc="subtract != 0: in1 - in2 with TFLite's 8-bit SUB rounding; for int16 SUB TFLite negates the\n"
               "second multiplier instead and calls ADD, which the caller expresses through the parameters.",
           splits=(_BCAST,)),
    Kernel("edgernn_addsub_s16",
           "const edgernn_bcast_t *b, const edgernn_addsub_params_t *p, int subtract, const int16_t *in1, "
           "const int16_t *in2, int16_t *out", splits=(_BCAST,)),
    Kernel("edgernn_mul_s8",
           "const edgernn_bcast_t *b, const edgernn_mul_params_t *p, const int8_t *in1, const int8_t *in2, int8_t *out",
           splits=(_BCAST,)),
    Kernel("edgernn_mul_s16",
           "const edgernn_bcast_t *b, const edgernn_mul_params_t *p, const int16_t *in1, const int16_t *in2, "
           "int16_t *out", splits=(_BCAST,)),
    Kernel("edgernn_div_s8",
           "const edgernn_bcast_t *b, const edgernn_mul_params_t *p, const int8_t *in1, const int8_t *in2, int8_t *out"),
    Kernel("edgernn_squared_difference_s8",
           "const edgernn_bcast_t *b, const edgernn_addsub_params_t *p, const int8_t *in1, const int8_t *in2, "
           "int8_t *out",
           doc="squared_difference.cc's 8-bit path; left_shift is 7, the activation range the full int8 range"),
    Kernel("edgernn_addsub_n_s8",
           "const edgernn_addsub_params_t *p, int subtract, const int8_t *in1, const int8_t *in2, int n, int8_t *out",
           doc="The same without broadcasting, on n elements: a range [i0, i1) of the output is the same call with\n"
               "every pointer advanced by i0 and n = i1 - i0.",
           splits=(_FLAT,), team_doc="The same without broadcasting, over n elements."),
    Kernel("edgernn_addsub_n_s16",
           "const edgernn_addsub_params_t *p, int subtract, const int16_t *in1, const int16_t *in2, int n, "
           "int16_t *out", splits=(_FLAT,)),
    Kernel("edgernn_addsub_const_s8",
           "const edgernn_addsub_params_t *p, int negate, const int8_t *in, const int32_t *k, int n, int8_t *out",
           doc="One operand constant, rescaled at generation time: out[i] = rescale_out(+-rescale_1(in[i]) + k[i]),\n"
               "the input1 fields of p describing in, negate != 0 for constant - in.",
           splits=(_FLAT_CONST,)),
    Kernel("edgernn_addsub_const_s16",
           "const edgernn_addsub_params_t *p, int negate, const int16_t *in, const int32_t *k, int n, int16_t *out",
           splits=(_FLAT_CONST,)),
    Kernel("edgernn_mul_n_s8", "const edgernn_mul_params_t *p, const int8_t *in1, const int8_t *in2, int n, int8_t *out",
           splits=(_FLAT,)),
    Kernel("edgernn_mul_n_s16",
           "const edgernn_mul_params_t *p, const int16_t *in1, const int16_t *in2, int n, int16_t *out",
           splits=(_FLAT,)),
    # ---- unary ----
    Kernel("edgernn_unary_f32", "edgernn_unary_t op, const float *in, int n, float *out", section="unary",
           splits=(_FLAT_UNARY,), team_doc="Unary element-wise ops over n elements."),
    Kernel("edgernn_lut_s8", "const int8_t *table, const int8_t *in, int n, int8_t *out",
           doc="Any 8-bit op that maps each input value to one output value, through a 256-entry table indexed\n"
               "by (uint8_t)input.",
           splits=(_FLAT_UNARY,)),
    Kernel("edgernn_lut_s16", "const int16_t *table, const int16_t *in, int n, int16_t *out",
           doc="TFLite's interpolating int16 lookup (LUTLookup) over a 513-entry table."),
    Kernel("edgernn_logistic_s16",
           "int32_t input_multiplier, int32_t input_left_shift, const int16_t *in, int n, int16_t *out",
           splits=(_FLAT_UNARY,)),
    Kernel("edgernn_tanh_s16",
           "int32_t input_multiplier, int32_t input_left_shift, const int16_t *in, int n, int16_t *out",
           splits=(_FLAT_UNARY,)),
    Kernel("edgernn_requantize_s16",
           "const edgernn_mul_params_t *p, edgernn_requantize_t mode, const int16_t *in, int n, int16_t *out",
           doc="out = clamp(MultiplyByQuantizedMultiplier(mode(in - input_offset)) + output_offset)."),
    Kernel("edgernn_quantize_f32_s8", "float scale, int32_t zero_point, const float *in, int n, int8_t *out"),
    Kernel("edgernn_quantize_f32_s16", "float scale, int32_t zero_point, const float *in, int n, int16_t *out"),
    Kernel("edgernn_dequantize_s8_f32", "float scale, int32_t zero_point, const int8_t *in, int n, float *out"),
    Kernel("edgernn_dequantize_s16_f32", "float scale, int32_t zero_point, const int16_t *in, int n, float *out"),
    # ---- data movement ----
    Kernel("edgernn_copy_runs",
           "const edgernn_run_t *runs, int n_runs, size_t elem_size, const void *src, void *dst",
           section="data movement: SPLIT, SPLIT_V, CONCATENATION, STRIDED_SLICE, RESHAPE, PACK, GATHER ..."),
    # ---- softmax ----
    Kernel("edgernn_softmax_f32", "const float *in, int rows, int depth, float beta, float *out",
           section="softmax over the last dimension (depth) of rows",
           doc="with TFLite's beta"),
    Kernel("edgernn_softmax_s8",
           "int32_t input_multiplier, int input_left_shift, int32_t diff_min, const int8_t *in, int rows, int depth, "
           "int8_t *out",
           doc="8-bit: TFLite's reference fixed-point softmax (output scale 1/256, zero point -128)"),
    Kernel("edgernn_softmax_s16",
           "const int16_t *exp_lut, const int16_t *recip_lut, int32_t input_multiplier, int input_shift, "
           "const int16_t *in, int rows, int depth, int16_t *out",
           doc="16-bit: TFLite's SoftmaxInt16 with its exp and 1 / (1 + x) tables (output scale 1/32768)"),
    # ---- reductions ----
    Kernel("edgernn_sum_f32", "const float *in, int outer, int reduced, int inner, float *out",
           section="reductions: out[o][i] = sum_r in[o][r][i]"),
    Kernel("edgernn_mean_f32", "const float *in, int outer, int reduced, int inner, float *out"),
    Kernel("edgernn_mean_s8",
           "const int8_t *in, int outer, int reduced, int inner, int32_t input_zero_point, int32_t multiplier, "
           "int shift, int32_t output_zero_point, int8_t *out",
           doc="MEAN, 8-bit: out = clamp(mbqm(sum - reduced * input_zero_point) + output_zero_point)"),
    Kernel("edgernn_sum_s8",
           "const int8_t *in, int outer, int reduced, int inner, float scale, float bias, int32_t output_zero_point, "
           "int8_t *out",
           doc="SUM, 8-bit: out = clamp(roundf(sum * scale + bias) + output_zero_point), in float32"),
    Kernel("edgernn_mean_s16",
           "const int16_t *in, int outer, int reduced, int inner, int32_t multiplier, int shift, int16_t *out",
           doc="MEAN, 16-bit (zero points 0): out = clamp(mbqm(sum, multiplier, shift)), 1 / reduced folded into the\n"
               "multiplier as at 8-bit (QuantizedMeanOrSum)"),
    Kernel("edgernn_reduce_max_f32", "const float *in, int outer, int reduced, int inner, float *out",
           section="REDUCE_MAX: out[o][i] = max_r in[o][r][i] (the integer ones keep the input's quantization)"),
    Kernel("edgernn_reduce_max_s8", "const int8_t *in, int outer, int reduced, int inner, int8_t *out"),
    Kernel("edgernn_reduce_max_s16", "const int16_t *in, int outer, int reduced, int inner, int16_t *out"),
    # ---- convolutions and pools (edgernn_conv.c) ----
    Kernel("edgernn_conv_f32",
           "const edgernn_conv_geom_t *g, const float *in, const float *w, const float *bias, float act_min, "
           "float act_max, float *scratch, float *out",
           section="CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D, AVERAGE_POOL_2D over one NHWC frame (edgernn_conv.c)",
           doc="CONV_2D: each output row's patches gathered into scratch (out_w * k_h * k_w * in_c elements), then\n"
               "edgernn_fully_connected_f32 over them; w is the filter [out_c][k_h][k_w][in_c].",
           optional=("bias",)),
    Kernel("edgernn_conv_s8",
           "const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w, const int32_t *bias, "
           "const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point, int32_t output_offset, "
           "int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out",
           doc="The same over edgernn_dot.h's dot products (w in its blocked layout), bias[o] + input_offset * sum(w[o])\n"
               "folded, taps outside the frame given the input zero point, the sums rescaled with two roundings\n"
               "(MultiplyByQuantizedMultiplier, as TFLite's reference convolutions). scratch may be NULL for a\n"
               "1x1 stride-1 filter, whose pixels are read in place.",
           optional=("scratch",),
           splits=(Split("g.out_h", weight=8),), wrapper=False,
           team_doc="CONV_2D, 8-bit: the output pixels split across the workers, each gathering its own patches into its\n"
                    "slot of scratch (8 slots). Defined in edgernn_conv.c. The split's measure counts an output row as 8\n"
                    "FULLY_CONNECTED outputs (a guess, not measured on GAP8)."),
    Kernel("edgernn_conv_s16",
           "const edgernn_conv_geom_t *g, const int16_t *in, const int8_t *w, const int64_t *bias, "
           "const int32_t *multiplier, const int32_t *shift, int32_t act_min, int32_t act_max, int16_t *scratch, "
           "int16_t *out",
           doc="16x8 (zero points 0): int64 sums, the multiplier reduced to Q15 as in TFLite's int64\n"
               "MultiplyByQuantizedMultiplier.",
           optional=("scratch",),
           splits=(Split("g.out_h", weight=8),), wrapper=False,
           team_doc="CONV_2D, 16x8: the output pixels split as the 8-bit one's. Defined in edgernn_conv.c."),
    Kernel("edgernn_depthwise_conv_f32",
           "const edgernn_conv_geom_t *g, const float *in, const float *w_f, const float *bias, float act_min, "
           "float act_max, float *scratch, float *out",
           doc="DEPTHWISE_CONV_2D: w is [k_h][k_w][out_c], out channel ic * depth_multiplier + m reads channel ic;\n"
               "scratch holds out_c sums.",
           optional=("bias",)),
    Kernel("edgernn_depthwise_conv_s8",
           "const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w, const int32_t *bias, "
           "const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point, int32_t output_offset, "
           "int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out",
           doc="Integer: scratch holds the frame with its padding, filled with the input zero point\n"
               "(((out_h - 1) * stride_h + (k_h - 1) * dil_h + 1) rows, as many columns likewise); bias[oc] holds\n"
               "bias + input_offset * the sum of oc's taps. Two-rounding rescale, as TFLite's DepthwisePerChannel.",
           splits=(Split("g.out_h", weight=8),), wrapper=False,
           team_doc="DEPTHWISE_CONV_2D, 8-bit: the calling core pads the frame, then the output rows are split (a row\n"
                    "counted as 8 FULLY_CONNECTED outputs, a guess). Defined in edgernn_conv.c."),
    Kernel("edgernn_depthwise_conv_s16",
           "const edgernn_conv_geom_t *g, const int16_t *in, const int8_t *w, const int64_t *bias, "
           "const int32_t *multiplier, const int32_t *shift, int32_t act_min, int32_t act_max, int16_t *scratch, "
           "int16_t *out"),
    Kernel("edgernn_max_pool_f32",
           "const edgernn_conv_geom_t *g, const float *in, float act_min, float act_max, float *out"),
    Kernel("edgernn_max_pool_s8",
           "const edgernn_conv_geom_t *g, const int8_t *in, int32_t act_min, int32_t act_max, int8_t *out",
           splits=(Split("g.out_h", weight=4),), wrapper=False,
           team_doc="MAX_POOL_2D, 8-bit: the output rows split (a row counted as 4 FULLY_CONNECTED outputs, a guess).\n"
                    "Defined in edgernn_conv.c."),
    Kernel("edgernn_max_pool_s16",
           "const edgernn_conv_geom_t *g, const int16_t *in, int32_t act_min, int32_t act_max, int16_t *out"),
    Kernel("edgernn_avg_pool_f32",
           "const edgernn_conv_geom_t *g, const float *in, float act_min, float act_max, float *out"),
    Kernel("edgernn_avg_pool_s8",
           "const edgernn_conv_geom_t *g, const int8_t *in, int32_t act_min, int32_t act_max, int8_t *out",
           doc="The window's in-frame sum over their count, halves away from zero (TFLite's reference).",
           splits=(Split("g.out_h", weight=4),), wrapper=False,
           team_doc="AVERAGE_POOL_2D, 8-bit: the output rows split (a row counted as 4 FULLY_CONNECTED outputs, a\n"
                    "guess). Defined in edgernn_conv.c."),
    Kernel("edgernn_avg_pool_s16",
           "const edgernn_conv_geom_t *g, const int16_t *in, int32_t act_min, int32_t act_max, int16_t *out"),
    Kernel("edgernn_leaky_relu_f32", "const float *in, float alpha, int n, float *out",
           section="LEAKY_RELU (edgernn_conv.c; 8-bit is edgernn_lut_s8)"),
    Kernel("edgernn_leaky_relu_s16",
           "const int16_t *in, int32_t input_zero_point, int32_t identity_multiplier, int identity_shift, "
           "int32_t alpha_multiplier, int alpha_shift, int32_t output_zero_point, int n, int16_t *out"),
    # ---- fused LSTM ----
    Kernel("edgernn_lstm_s8",
           "const edgernn_lstm_s8_params_t *p, const int8_t *w_in, const int8_t *w_rec, const int32_t *bias_in, "
           "const int32_t *bias_rec, int steps, const int8_t *x, int8_t *h, int16_t *c, int8_t *y, int16_t *scratch",
           section="UNIDIRECTIONAL_SEQUENCE_LSTM (edgernn_lstm.c): batch 1, `steps` time steps",
           doc="Gates are packed in the order input, forget, cell, output: w_in is [4 * n_cell][n_input] and\n"
               "w_rec [4 * n_cell][n_cell]; the float32 kernel's rows are gate-major (row g * n_cell + u), the int8\n"
               "kernel's unit-major (row 4 * u + g, biases too) in edgernn_dot.h's blocked layout. h and c are the\n"
               "op's variable tensors (the persistent state), updated in place; y receives h after every step.\n"
               "scratch holds 4 * n_cell gate values (float32) or the n_cell new hidden values (int8).\n"
               "bias_in[r] = gate bias - input zero point * sum(w_in[r]); bias_rec[r] = -h zero point * sum(w_rec[r]).\n"
               "The team versions, edgernn_team_lstm_* (edgernn_team.h), are in edgernn_lstm.c too, which firmware\n"
               "holds only when its schedule has an LSTM.",
           splits=_LSTM, wrapper=False,
           team_doc="UNIDIRECTIONAL_SEQUENCE_LSTM: every time step splits its units. Defined in edgernn_lstm.c, which\n"
                    "firmware holds only when its schedule has an LSTM."),
    Kernel("edgernn_lstm_f32",
           "const edgernn_lstm_f32_params_t *p, const float *w_in, const float *w_rec, const float *bias, int steps, "
           "const float *x, float *h, float *c, float *y, float *scratch",
           splits=_LSTM, wrapper=False),
]

# Kernels that stand in for others where generation-time work makes them cheaper (kept apart from the
# table above, whose entries they do not change).
KERNELS += [
    Kernel("edgernn_sum_steps_s8",
           "const int8_t *in, int outer, int reduced, int inner, const int32_t *steps, int n_steps, int32_t first, "
           "int8_t *out",
           section="reductions, by steps computed at generation",
           doc="SUM, 8-bit, where edgernn_sum_s8's float rescale of the int32 sum is a non-decreasing function of\n"
               "the sum: out = first + the number of steps[k] <= sum (steps ascending: the least sum giving each\n"
               "next output value), found by a binary search. The same bytes as edgernn_sum_s8, without float."),
]

BY_NAME: dict[str, Kernel] = {k.name: k for k in KERNELS}
STRUCT_BY_NAME: dict[str, Struct] = {s.name: s for s in STRUCTS}
TEAM_KERNELS: dict[str, str] = {k.name: k.team_name for k in KERNELS if k.splits}
SIZES: dict[str, int] = {**SCALAR_SIZES, **{s.name: s.size for s in STRUCTS}}


def kernel(name: str) -> Kernel:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"{name} is not in the kernel table (edgernn/backend/kernels.py)") from None


def kernel_args(name: str, args: dict) -> list:
    """A call's arguments in the order of the kernel's signature, checked against it by name."""
    return kernel(name).order(args)


def call_args(call) -> dict:
    """The inverse of kernel_args: a call's (``.fn``, ``.args``) arguments by the kernel's argument names."""
    return dict(zip(kernel(call.fn).arg_names, call.args))


# ---- the team's view of a call ----

def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _struct_of(call, arg_value):
    """The ConstStruct a ("ref", name) argument points to, or None."""
    if isinstance(arg_value, tuple) and arg_value[0] == "ref":
        for struct in call.structs:
            if struct.name == arg_value[1]:
                return struct
    return None


def _field(call, args: dict, path: str):
    """An argument's value, or a field of the struct an argument points to ("p.n_cell", "b.dims[3]")."""
    m = re.fullmatch(r"(\w+)(?:\.(\w+)(?:\[(\d+)\])?)?", path)
    name, member, item = m.group(1), m.group(2), m.group(3)
    if member is None:
        return args[name]
    struct = _struct_of(call, args[name])
    if struct is None:
        return None
    value = struct.fields[STRUCT_BY_NAME[struct.ctype].index(member)]
    return value[int(item)] if item is not None else value


def split_count(call) -> int | None:
    """The size of a call's output range as its split measures it (``Split.weight`` per element), or
    None when the team cannot split it (not a team kernel, a size not known at generation time, a
    broadcast over more than one dimension)."""
    k = BY_NAME.get(call.fn)
    if k is None or not k.splits:
        return None
    args = dict(zip(k.arg_names, call.args))
    for split in k.splits:
        if split.when is not None:
            value = _int(args[split.when[0]])
            if value is None:
                return None
            if value != split.when[1]:
                continue
        if split.broadcast is not None:
            dims = _field(call, args, f"{split.broadcast}.dims")
            if dims is None or any(int(d) != 1 for d in dims[:3]):
                return None
        n = _int(_field(call, args, split.count))
        return None if n is None else n * split.weight
    return None


# ---- the C generated from the table ----

def _c_comment(text: str, indent: str = "") -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return f"{indent}/* {lines[0]} */"
    return "\n".join([f"{indent}/* {lines[0]}"] + [f"{indent} * {line}" for line in lines[1:-1]]
                     + [f"{indent} * {lines[-1]} */"])


def _wrap_call(head: str, items: list[str], tail: str, width: int = 110) -> str:
    """head + items joined by ", " + tail, broken before an item that would pass width, continuation
    lines aligned after head."""
    lines, line = [], head
    indent = " " * len(head)
    for i, item in enumerate(items):
        piece = item + (", " if i < len(items) - 1 else tail)
        if line != head and line != indent and len(line) + len(piece.rstrip()) > width:
            lines.append(line.rstrip())
            line = indent
        line += piece
    lines.append(line)
    return "\n".join(lines)


def prototype(name: str, args: tuple[Arg, ...], indent: str = "") -> str:
    return _wrap_call(f"{indent}void {name}(", [a.decl for a in args], ");")


def _c_args(expr: str, names: list[str]) -> str:
    """A C expression of the kernel's arguments, read from the packed struct ``a``."""
    return re.sub(r"(?<![\w>.])([A-Za-z_]\w*)", lambda m: f"a->{m.group(1)}" if m.group(1) in names else m.group(1),
                  expr)


def _sub_call(k: Kernel, split: Split, indent: str) -> str:
    names = k.arg_names
    advance = dict(split.advance)
    items = []
    for arg in k.args:
        n = arg.name
        if split.broadcast == n:
            items.append("&sub")
        elif n == split.count:
            items.append("end - begin")
        elif n in advance:
            step = advance[n]
            moved = f"a->{n} + begin" if step == "1" else f"a->{n} + (size_t)begin * {_c_args(step, names)}"
            items.append(f"a->{n} ? {moved} : NULL" if n in k.optional else moved)
        elif split.when is not None and n == split.when[0]:
            items.append(str(split.when[1]))
        else:
            items.append(f"a->{n}")
    return _wrap_call(f"{indent}{k.name}(", items, ");")


def _range_body(k: Kernel) -> str:
    lines = [f"    const {k.short}_args_t *a = (const {k.short}_args_t *)args;"]
    b = next((s.broadcast for s in k.splits if s.broadcast), None)
    if b is not None:
        lines += [f"    edgernn_bcast_t sub = *a->{b};", "    sub.dims[3] = end - begin;"]
    conditional = [s for s in k.splits if s.when is not None]
    if not conditional:
        lines.append(_sub_call(k, k.splits[0], "    "))
        return "\n".join(lines)
    for i, split in enumerate(k.splits):
        if split.when is not None:
            keyword = "if" if i == 0 else "} else if"
            lines.append(f"    {keyword} (a->{split.when[0]} == {split.when[1]}) {{")
        else:
            lines.append("    } else {")
        lines.append(_sub_call(k, split, "        "))
    lines.append("    }")
    return "\n".join(lines)


def _split_expr(k: Kernel, attr: str) -> str:
    """The count (or grain) the team kernel passes edgernn_team_split, chosen by the splits' conditions."""
    def one(split: Split) -> str:
        if attr == "grain":
            return str(split.grain)
        return f"{split.broadcast}->dims[3]" if split.broadcast else split.count
    expr = one(k.splits[-1])
    for split in reversed(k.splits[:-1]):
        expr = f"{split.when[0]} == {split.when[1]} ? {one(split)} : {expr}"
    return expr


def _wrapper(k: Kernel) -> dict:
    return {
        "kernel": k,
        "fields": [f"    {a.decl};" for a in k.args],
        "range_body": _range_body(k),
        "definition": prototype(k.team_name, k.args)[:-1],
        "count": _split_expr(k, "count"),
        "grain": _split_expr(k, "grain"),
    }


def _environment():
    import jinja2

    from edgernn.resources import templates_dir

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir() / "kernels")),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["comment"] = _c_comment
    return env


GENERATED = {"edgernn_kernels.h": "edgernn_kernels.h.j2", "edgernn_team.h": "edgernn_team.h.j2",
             "edgernn_team_kernels.c": "edgernn_team_kernels.c.j2"}


def render_sources() -> dict[str, str]:
    """The C files generated from the table: file name -> text."""
    env = _environment()
    team = [k for k in KERNELS if k.splits]
    context = {
        "structs": STRUCTS,
        "kernels": [{"kernel": k, "prototype": prototype(k.name, k.args)} for k in KERNELS],
        "team": [{"kernel": k, "prototype": prototype(k.team_name, k.args)} for k in team],
        "wrappers": [_wrapper(k) for k in team if k.wrapper],
        "requantize": {"IDENTITY": REQUANTIZE_IDENTITY, "ABS": REQUANTIZE_ABS, "NEG": REQUANTIZE_NEG},
    }
    return {name: env.get_template(template).render(**context) for name, template in GENERATED.items()}


def write_sources(folder: Path) -> list[Path]:
    """Render the generated C files into folder (beside a copy of the kernels, or as an include path)."""
    folder = Path(folder)
    written = []
    for name, text in render_sources().items():
        (folder / name).write_text(text)
        written.append(folder / name)
    return written
