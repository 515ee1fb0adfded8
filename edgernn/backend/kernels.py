"""Every C kernel the lowering can call, and every parameter struct they take: the one place a signature
is written. The types are in kernel_types.py, the team's reading of a call in splits.py, the C written
from the table in kernel_sources.py.

From this table come the kernel prototypes (edgernn_kernels.h), the team kernel prototypes
(edgernn_team.h) and the team wrappers (edgernn_team_kernels.c) (kernel_sources.render_sources); the
lowering's calls (``Kernel.order``, by argument name); which calls the team may share and how large their
output range is (splits.split_count); and the sizes of the constant structs (``SIZES``).
"""

from __future__ import annotations

from edgernn.backend.kernel_types import SCALAR_SIZES, Arg, Field, Kernel, Split, Struct
from edgernn.backend.layout import depthwise_s8_scratch, padded_frame_elems, patch_slots_elems, stem_rows_bytes

__all__ = ["Arg", "Field", "Kernel", "Split", "Struct", "KERNELS", "STRUCTS", "BY_NAME", "STRUCT_BY_NAME",
           "TEAM_KERNELS", "SIZES", "kernel", "kernel_args", "call_args"]

REQUANTIZE_IDENTITY = 0
REQUANTIZE_ABS = 1
REQUANTIZE_NEG = 2


# ---- the scratch each kernel needs, in elements of its scratch argument, from its struct's fields ----

def _conv_patches(g: dict) -> int:
    """A row of patches, or a slot of patch pairs for each of the team's workers (edgernn_conv.c), the
    larger; none for a 1x1 stride-1 filter, whose pixels the integer kernels read in place."""
    n_in = g["k_h"] * g["k_w"] * g["in_c"]
    if (g["k_h"], g["k_w"], g["stride_h"], g["stride_w"]) == (1, 1, 1, 1):
        return 0
    return max(g["out_w"] * n_in, patch_slots_elems(n_in))


def _conv_s8_scratch(g: dict) -> int:
    """The int8 CONV_2D's: its patches, or a one-input-channel filter's row slots (layout.stem_rows_bytes), the
    larger."""
    return max(_conv_patches(g), stem_rows_bytes(g))


def _channel_sums(g: dict) -> int:
    return g["out_c"]


def _padded_frame(g: dict) -> int:
    return padded_frame_elems(g)


def _depthwise_s8_scratch(g: dict) -> int:
    return depthwise_s8_scratch(g)


def _lstm_gates(p: dict) -> int:
    return 4 * p["n_cell"]


def _lstm_hidden(p: dict) -> int:
    return p["n_cell"]


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

_FLAT = Split("n", (("in1", 1), ("in2", 1), ("out", 1)))
_FLAT_CONST = Split("n", (("in", 1), ("k", 1), ("out", 1)))
_FLAT_UNARY = Split("n", (("in", 1), ("out", 1)))
# the builtin kernels' variants (edgernn_add_blocks_*, edgernn_mul_blocks_*): a sub-range's first element is the
# op's element first + begin
_FLAT_BLOCKS = Split("n", (("first", 1), ("in1", 1), ("in2", 1), ("out", 1)))
_FLAT_BLOCKS_CONST = Split("n", (("first", 1), ("in", 1), ("k", 1), ("out", 1)))
_BCAST = Split("b.dims[3]", (("in1", "b.stride1[3]"), ("in2", "b.stride2[3]"), ("out", 1)), broadcast="b")
_FC_INT = (
    Split("n_out", (("w", "n_in"), ("bias", 1), ("multiplier", 1), ("shift", 1), ("out", 1)),
          when=("rows", 1), grain=8),
    Split("rows", (("in", "n_in"), ("out", "n_out"))),
)
_FC_S16 = (
    Split("n_out", (("w", "n_in"), ("bias", 1), ("multiplier", 1), ("shift", 1), ("scale", 1), ("out", 1)),
          when=("rows", 1), grain=1),     # any rows (its weights are not blocked; a block of 4 rows or fewer)
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
           splits=(Split("n_out", (("w", "n_in"), ("bias", 1), ("out", 1)), when=("rows", 1), grain=4),
                   Split("rows", (("in", "n_in"), ("out", "n_out")))),
           optional=("bias",),
           team_doc=_FC_FEATURES + ",\nelse its rows; feature sub-ranges start at multiples of 4, "
                    "the row block of the int8 kernel.", source="edgernn_fully_connected.c"),
    Kernel("edgernn_fully_connected_s8",
           "const int8_t *in, const int8_t *w, const int32_t *bias, const int32_t *multiplier, const int32_t *shift, "
           "int rounding, int32_t output_offset, int32_t act_min, int32_t act_max, int rows, int n_in, int n_out, "
           "int8_t *out",
           doc="w is in edgernn_dot.h's blocked layout (rows by blocks of 8, inputs by groups of 4).\n"
               "bias already holds bias[o] + input_offset * sum_i w[o][i]. rounding: how the int32 sum is rescaled,\n"
               "as the kernel of the graph's oracle does it (docs/ops.md): EDGERNN_ROUND_ONCE, LiteRT's reference\n"
               "kernel, (x * m + 2^(30 - shift)) >> (31 - shift); EDGERNN_ROUND_TWICE_UP, its builtin kernel (ruy on\n"
               "x86), the rounded high multiply then a rounding right shift, halves up.",
           splits=_FC_INT, source="edgernn_fully_connected.c"),
    Kernel("edgernn_fully_connected_gates_s8",
           "const int8_t *in, const int8_t *w, const int32_t *bias, const int32_t *multiplier, const int32_t *shift, "
           "int rounding, int32_t output_offset, int32_t act_min, int32_t act_max, int n_in, int stride, int gates, "
           "int begin, int end, int8_t *out",
           doc="The rows g * stride + [begin, end) of a one-row edgernn_fully_connected_s8 for each g < gates, in one\n"
               "call: a worker's share of a split by units (edgernn/backend/cells.py), its units' rows of every gate.\n"
               "begin and stride are multiples of 8 (the blocked layout's blocks), end - begin too or end == stride.\n"
               "The bytes are those of the whole call's rows.",
           source="edgernn_fully_connected.c"),
    Kernel("edgernn_fully_connected_group_s8",
           "const int8_t *in, const int8_t *w, const int32_t *bias, const int32_t *multiplier, const int32_t *rnd, "
           "const int32_t *shift, int rounding, const int32_t *ends, int row0, int32_t act_min, int32_t act_max, "
           "int n_in, int n_out, int8_t *out0, int8_t *out1, int8_t *out2, int8_t *out3",
           doc="Two to four int8 FULLY_CONNECTED ops (one row each) that read the same input, one call over all their\n"
               "rows (edgernn/backend/grouping.py): w, bias, multiplier, rnd, shift are the ops' one after the other\n"
               "(w in the blocked layout of all the rows, in blocks of 4); row r gives clamp((hi(acc * multiplier[r]) +\n"
               "rnd[r]) >> shift[r]), its op's output zero point folded into rnd[r]; op k writes out<k> and ends[k] is\n"
               "the row after its last; row0 is the first row's place in the group (0 for a whole call).",
           splits=(Split("n_out", (("w", "n_in"), ("bias", 1), ("multiplier", 1), ("rnd", 1), ("shift", 1),
                                   ("row0", 1)), grain=4),),
           team_doc="A group's rows, in its blocks of 4; row0 moves with the range.",
           source="edgernn_fully_connected.c"),
    Kernel("edgernn_fully_connected_group_s8_range", "const void *args, int begin, int end",
           doc="edgernn_fully_connected_group_s8 as an edgernn_range_fn: rows [begin, end) of the group its args\n"
               "(an edgernn_fc_group_s8_args_t) describe; begin a multiple of 4, end too or the group's last row.",
           source="edgernn_fully_connected.c"),
    Kernel("edgernn_fully_connected_s16",
           "const int16_t *in, const int8_t *w, const int64_t *bias, const int32_t *multiplier, const int32_t *shift, "
           "const int64_t *scale, int rounding, int32_t output_offset, int32_t act_min, int32_t act_max, int rows, "
           "int n_in, int n_out, int16_t *out",
           doc="16x8: bias is int64; scale[o] holds the bits of the double s_in * s_w[o] / s_out. rounding: as the kernel\n"
               "of the graph's oracle rescales the sum (docs/ops.md): EDGERNN_ROUND_DOUBLE, LiteRT's reference kernel\n"
               "and its builtin one with a bias, round((double)acc * scale[o]), halves away from zero;\n"
               "EDGERNN_ROUND_TWICE_UP, its builtin kernel without a bias (ruy), the int32 sum rounded twice, halves up.",
           splits=_FC_S16, source="edgernn_fully_connected.c"),
    Kernel("edgernn_fully_connected_group_s16",
           "const int16_t *in, const int8_t *w, const int64_t *bias, const int32_t *multiplier, const int32_t *shift, "
           "const int64_t *scale, int rounding, int32_t output_offset, int32_t act_min, int32_t act_max, "
           "const int32_t *ends, int row0, int n_in, int n_out, int16_t *out0, int16_t *out1, int16_t *out2, "
           "int16_t *out3",
           doc="Two to four 16x8 FULLY_CONNECTED ops (one row each) that read the same input, one call over all their\n"
               "rows (edgernn/backend/grouping.py): w, bias, multiplier, shift, scale are the ops' one after the other;\n"
               "each row is computed as its op's own call computes it; op k writes out<k> and ends[k] is the row after\n"
               "its last; row0 is the first row's place in the group (0 for a whole call).",
           splits=(Split("n_out", (("w", "n_in"), ("bias", 1), ("multiplier", 1), ("shift", 1), ("scale", 1),
                                   ("row0", 1)), grain=1),),
           team_doc="A group's rows, any sub-range, as a 16x8 FULLY_CONNECTED's features; row0 moves with the range.",
           source="edgernn_fully_connected.c"),
    Kernel("edgernn_fully_connected_group_s16_words",
           "const int16_t *in, const int8_t *w, const int32_t *bias, const int32_t *multiplier, const int32_t *shift, "
           "const int64_t *scale, int rounding, int32_t output_offset, int32_t act_min, int32_t act_max, "
           "const int32_t *ends, int row0, int n_in, int n_out, int16_t *out0, int16_t *out1, int16_t *out2, "
           "int16_t *out3",
           doc="edgernn_fully_connected_group_s16 for rows whose sums generation bounded to int32 for every int16\n"
               "input, each with a right shift of 3 to 31 or the ruy rounding (grouping.words_s16): an int32 bias,\n"
               "the sums and their requantization in 32-bit words. The same bytes.",
           splits=(Split("n_out", (("w", "n_in"), ("bias", 1), ("multiplier", 1), ("shift", 1), ("scale", 1),
                                   ("row0", 1)), grain=1),),
           team_doc="A group's rows, any sub-range, as a 16x8 FULLY_CONNECTED's features; row0 moves with the range.",
           source="edgernn_fully_connected.c"),
    # ---- binary element-wise ----
    Kernel("edgernn_add_f32", _BINARY_F32, section="binary element-wise", splits=(_BCAST,),
           team_doc=_TEAM_BCAST_DOC, source="edgernn_elementwise.c"),
    Kernel("edgernn_sub_f32", _BINARY_F32, splits=(_BCAST,), source="edgernn_elementwise.c"),
    Kernel("edgernn_mul_f32", _BINARY_F32, splits=(_BCAST,), source="edgernn_elementwise.c"),
    Kernel("edgernn_div_f32", _BINARY_F32, source="edgernn_elementwise.c"),
    Kernel("edgernn_maximum_f32", "const edgernn_bcast_t *b, const float *in1, const float *in2, float *out",
           source="edgernn_elementwise.c"),
    Kernel("edgernn_minimum_f32", "const edgernn_bcast_t *b, const float *in1, const float *in2, float *out",
           source="edgernn_elementwise.c"),
    Kernel("edgernn_maximum_minimum_s8",
           "const edgernn_bcast_t *b, int minimum, const int8_t *in1, const int8_t *in2, int8_t *out",
           doc="MAXIMUM (minimum == 0) or MINIMUM of the raw values, as TFLite compares them.",
           source="edgernn_maximum_minimum.c"),
    Kernel("edgernn_maximum_minimum_s16",
           "const edgernn_bcast_t *b, int minimum, const int16_t *in1, const int16_t *in2, int16_t *out",
           source="edgernn_maximum_minimum.c"),
    Kernel("edgernn_squared_difference_f32", "const edgernn_bcast_t *b, const float *in1, const float *in2, float *out",
           source="edgernn_elementwise.c"),
    Kernel("edgernn_addsub_s8",
           "const edgernn_bcast_t *b, const edgernn_addsub_params_t *p, int subtract, const int8_t *in1, "
           "const int8_t *in2, int8_t *out",
           doc="subtract != 0: in1 - in2 with TFLite's 8-bit SUB rounding; for int16 SUB TFLite negates the\n"
               "second multiplier instead and calls ADD, which the caller expresses through the parameters.",
           splits=(_BCAST,), source="edgernn_elementwise.c"),
    Kernel("edgernn_addsub_s16",
           "const edgernn_bcast_t *b, const edgernn_addsub_params_t *p, int subtract, const int16_t *in1, "
           "const int16_t *in2, int16_t *out", splits=(_BCAST,), source="edgernn_elementwise.c"),
    Kernel("edgernn_mul_s8",
           "const edgernn_bcast_t *b, const edgernn_mul_params_t *p, const int8_t *in1, const int8_t *in2, int8_t *out",
           splits=(_BCAST,), source="edgernn_elementwise.c"),
    Kernel("edgernn_mul_s16",
           "const edgernn_bcast_t *b, const edgernn_mul_params_t *p, const int16_t *in1, const int16_t *in2, "
           "int16_t *out", splits=(_BCAST,), source="edgernn_elementwise.c"),
    Kernel("edgernn_div_s8",
           "const edgernn_bcast_t *b, const edgernn_mul_params_t *p, const int8_t *in1, const int8_t *in2, int8_t *out",
           source="edgernn_elementwise.c"),
    Kernel("edgernn_squared_difference_s8",
           "const edgernn_bcast_t *b, const edgernn_addsub_params_t *p, const int8_t *in1, const int8_t *in2, "
           "int8_t *out",
           doc="squared_difference.cc's 8-bit path; left_shift is 7, the activation range the full int8 range",
           source="edgernn_squared_difference.c"),
    Kernel("edgernn_addsub_n_s8",
           "const edgernn_addsub_params_t *p, int subtract, const int8_t *in1, const int8_t *in2, int n, int8_t *out",
           doc="The same without broadcasting, on n elements: a range [i0, i1) of the output is the same call with\n"
               "every pointer advanced by i0 and n = i1 - i0.",
           splits=(_FLAT,), team_doc="The same without broadcasting, over n elements.",
           source="edgernn_elementwise.c", banded="edgernn_dma_addsub_n_s8"),
    Kernel("edgernn_addsub_n_s16",
           "const edgernn_addsub_params_t *p, int subtract, const int16_t *in1, const int16_t *in2, int n, "
           "int16_t *out", splits=(_FLAT,), source="edgernn_elementwise.c"),
    Kernel("edgernn_addsub_const_s8",
           "const edgernn_addsub_params_t *p, int negate, const int8_t *in, const int32_t *k, int n, int8_t *out",
           doc="One operand constant, rescaled at generation time: out[i] = rescale_out(+-rescale_1(in[i]) + k[i]),\n"
               "the input1 fields of p describing in, negate != 0 for constant - in.",
           splits=(_FLAT_CONST,), source="edgernn_elementwise.c"),
    Kernel("edgernn_addsub_const_s16",
           "const edgernn_addsub_params_t *p, int negate, const int16_t *in, const int32_t *k, int n, int16_t *out",
           splits=(_FLAT_CONST,), source="edgernn_elementwise.c"),
    Kernel("edgernn_add_blocks_n_s16",
           "const edgernn_addsub_params_t *p, int first, int blocked, const int16_t *in1, const int16_t *in2, "
           "int n, int16_t *out",
           doc="int16 ADD of two operands of one shape as LiteRT's builtin kernel computes it, for a graph whose oracle\n"
               "those kernels are: element i is the op's element first + i, rescaled as that kernel's blocks of 16 do\n"
               "when first + i < blocked, as the reference kernel does after that (docs/ops.md).",
           splits=(_FLAT_BLOCKS,), source="edgernn_elementwise.c"),
    Kernel("edgernn_add_blocks_const_s16",
           "const edgernn_addsub_params_t *p, int first, int blocked, const int16_t *in, const int32_t *k, int n, "
           "int16_t *out",
           doc="The same with one operand constant, rescaled at generation time into k (in a block as a block does).",
           splits=(_FLAT_BLOCKS_CONST,), source="edgernn_elementwise.c"),
    Kernel("edgernn_add_blocks_n_s8",
           "const edgernn_addsub_params_t *p, int first, int run, int blocked, const int8_t *in1, const int8_t *in2, "
           "int n, int8_t *out",
           doc="int8 ADD and MUL as LiteRT's builtin kernels compute them, for a graph whose oracle those kernels are:\n"
               "output element o (the flat call's element i being o = first + i) lies in one of their vector blocks,\n"
               "whose int16 narrowing can turn a result far outside the output's range, when o % run < blocked.",
           splits=(_FLAT_BLOCKS,), source="edgernn_elementwise.c"),
    Kernel("edgernn_add_blocks_const_s8",
           "const edgernn_addsub_params_t *p, int first, int run, int blocked, const int8_t *in, const int32_t *k, "
           "int n, int8_t *out",
           splits=(_FLAT_BLOCKS_CONST,), source="edgernn_elementwise.c"),
    Kernel("edgernn_add_blocks_s8",
           "const edgernn_bcast_t *b, const edgernn_addsub_params_t *p, int run, int blocked, const int8_t *in1, "
           "const int8_t *in2, int8_t *out", source="edgernn_elementwise.c"),
    Kernel("edgernn_mul_blocks_n_s8",
           "const edgernn_mul_params_t *p, int first, int run, int blocked, const int8_t *in1, const int8_t *in2, "
           "int n, int8_t *out",
           splits=(_FLAT_BLOCKS,), source="edgernn_elementwise.c"),
    Kernel("edgernn_mul_blocks_s8",
           "const edgernn_bcast_t *b, const edgernn_mul_params_t *p, int run, int blocked, const int8_t *in1, "
           "const int8_t *in2, int8_t *out", source="edgernn_elementwise.c"),
    Kernel("edgernn_mul_n_s8", "const edgernn_mul_params_t *p, const int8_t *in1, const int8_t *in2, int n, int8_t *out",
           splits=(_FLAT,), source="edgernn_elementwise.c"),
    Kernel("edgernn_mul_n_s16",
           "const edgernn_mul_params_t *p, const int16_t *in1, const int16_t *in2, int n, int16_t *out",
           splits=(_FLAT,), source="edgernn_elementwise.c"),
    # ---- unary ----
    Kernel("edgernn_unary_f32", "edgernn_unary_t op, const float *in, int n, float *out", section="unary",
           splits=(_FLAT_UNARY,), team_doc="Unary element-wise ops over n elements.", source="edgernn_elementwise.c"),
    Kernel("edgernn_lut_s8", "const int8_t *table, const int8_t *in, int n, int8_t *out",
           doc="Any 8-bit op that maps each input value to one output value, through a 256-entry table indexed\n"
               "by (uint8_t)input.",
           splits=(_FLAT_UNARY,), source="edgernn_elementwise.c"),
    Kernel("edgernn_lut_s16", "const int16_t *table, const int16_t *in, int n, int16_t *out",
           doc="TFLite's interpolating int16 lookup (LUTLookup) over a 513-entry table.", source="edgernn_lut16.c"),
    Kernel("edgernn_logistic_s16",
           "int32_t input_multiplier, int32_t input_left_shift, const int16_t *in, int n, int16_t *out",
           splits=(_FLAT_UNARY,), source="edgernn_elementwise.c"),
    Kernel("edgernn_tanh_s16",
           "int32_t input_multiplier, int32_t input_left_shift, const int16_t *in, int n, int16_t *out",
           splits=(_FLAT_UNARY,), source="edgernn_elementwise.c"),
    Kernel("edgernn_requantize_s16",
           "const edgernn_mul_params_t *p, edgernn_requantize_t mode, const int16_t *in, int n, int16_t *out",
           doc="out = clamp(MultiplyByQuantizedMultiplier(mode(in - input_offset)) + output_offset).",
           source="edgernn_elementwise.c"),
    Kernel("edgernn_requantize_s8_s16",
           "const edgernn_mul_params_t *p, const int8_t *in, int n, int16_t *out",
           doc="QUANTIZE int8 -> int16 and int16 -> int8 (a mixed model's seams): LiteRT's Requantize,\n"
               "out = clamp(MultiplyByQuantizedMultiplier(in - input_offset) + output_offset, act_min, act_max).",
           splits=(_FLAT_UNARY,), source="edgernn_elementwise.c"),
    Kernel("edgernn_requantize_s16_s8",
           "const edgernn_mul_params_t *p, const int16_t *in, int n, int8_t *out",
           splits=(_FLAT_UNARY,), source="edgernn_elementwise.c"),
    Kernel("edgernn_quantize_f32_s8", "float scale, int32_t zero_point, const float *in, int n, int8_t *out",
           source="edgernn_elementwise.c"),
    Kernel("edgernn_quantize_f32_s16", "float scale, int32_t zero_point, const float *in, int n, int16_t *out",
           source="edgernn_elementwise.c"),
    Kernel("edgernn_quantize_f32_s16_even",
           "float inverse_scale, float scale, int32_t zero_point, const float *in, int n, int16_t *out",
           doc="QUANTIZE float32 -> int16 as LiteRT's builtin kernel: in blocks of 8, x * inverse_scale in float32, "
               "halves to even; the last n % 8, x / (double)scale, halves away from zero.",
           source="edgernn_elementwise.c"),
    Kernel("edgernn_dequantize_s8_f32", "float scale, int32_t zero_point, const int8_t *in, int n, float *out",
           source="edgernn_elementwise.c"),
    Kernel("edgernn_dequantize_s16_f32", "float scale, int32_t zero_point, const int16_t *in, int n, float *out",
           source="edgernn_elementwise.c"),
    # ---- data movement ----
    Kernel("edgernn_copy_runs",
           "const edgernn_run_t *runs, int n_runs, size_t elem_size, const void *src, void *dst",
           section="data movement: SPLIT, SPLIT_V, CONCATENATION, STRIDED_SLICE, RESHAPE, PACK, GATHER ...",
           source="edgernn_shape.c"),
    # ---- softmax ----
    Kernel("edgernn_softmax_f32", "const float *in, int rows, int depth, float beta, float *out",
           section="softmax over the last dimension (depth) of rows",
           doc="with TFLite's beta", source="edgernn_shape.c"),
    Kernel("edgernn_softmax_s8",
           "int32_t input_multiplier, int input_left_shift, int32_t diff_min, const int8_t *in, int rows, int depth, "
           "int8_t *out",
           doc="8-bit: TFLite's reference fixed-point softmax (output scale 1/256, zero point -128)",
           source="edgernn_softmax.c"),
    Kernel("edgernn_softmax_s16",
           "const int16_t *exp_lut, const int16_t *recip_lut, int32_t input_multiplier, int input_shift, "
           "const int16_t *in, int rows, int depth, int16_t *out",
           doc="16-bit: TFLite's SoftmaxInt16 with its exp and 1 / (1 + x) tables (output scale 1/32768)",
           source="edgernn_softmax.c"),
    # ---- reductions ----
    Kernel("edgernn_sum_f32", "const float *in, int outer, int reduced, int inner, float *out",
           section="reductions: out[o][i] = sum_r in[o][r][i]", source="edgernn_shape.c"),
    Kernel("edgernn_mean_f32", "const float *in, int outer, int reduced, int inner, float *out",
           source="edgernn_shape.c"),
    Kernel("edgernn_mean_s8",
           "const int8_t *in, int outer, int reduced, int inner, int32_t input_zero_point, int32_t multiplier, "
           "int shift, int32_t output_zero_point, int8_t *out",
           doc="MEAN, 8-bit: out = clamp(mbqm(sum - reduced * input_zero_point) + output_zero_point)",
           source="edgernn_reduce.c"),
    Kernel("edgernn_sum_s8",
           "const int8_t *in, int outer, int reduced, int inner, float scale, float bias, int32_t output_zero_point, "
           "int8_t *out",
           doc="SUM, 8-bit: out = clamp(roundf(sum * scale + bias) + output_zero_point), in float32",
           source="edgernn_reduce.c"),
    Kernel("edgernn_mean_s16",
           "const int16_t *in, int outer, int reduced, int inner, int32_t multiplier, int shift, int16_t *out",
           doc="MEAN, 16-bit (zero points 0): out = clamp(mbqm(sum, multiplier, shift)), 1 / reduced folded into the\n"
               "multiplier as at 8-bit (QuantizedMeanOrSum)", source="edgernn_reduce.c"),
    Kernel("edgernn_sum_s16", "const int16_t *in, int outer, int reduced, int inner, int stride, int16_t *out",
           doc="SUM, 16-bit, input and output quantized alike (as TF's 16x8 quantizer makes them; zero points 0):\n"
               "out = clamp(sum), the int32 sum saturated to int16 (LiteRT's kernel, measured). stride: the distance\n"
               "between two reduced elements (the tensor's inner size; a team's sub-range of inner outputs keeps it).",
           splits=(Split("inner", (("in", 1), ("out", 1)), when=("outer", 1)),),
           team_doc="A SUM of one outer row: its inner outputs, each reduced over the whole stride.",
           source="edgernn_reduce.c"),
    Kernel("edgernn_reduce_max_f32", "const float *in, int outer, int reduced, int inner, float *out",
           section="REDUCE_MAX: out[o][i] = max_r in[o][r][i] (the integer ones keep the input's quantization)",
           source="edgernn_reduce.c"),
    Kernel("edgernn_reduce_max_s8", "const int8_t *in, int outer, int reduced, int inner, int8_t *out",
           source="edgernn_reduce.c"),
    Kernel("edgernn_reduce_max_s16", "const int16_t *in, int outer, int reduced, int inner, int16_t *out",
           source="edgernn_reduce.c"),
    # ---- convolutions and pools (edgernn_conv.c) ----
    Kernel("edgernn_conv_f32",
           "const edgernn_conv_geom_t *g, const float *in, const float *w, const float *bias, float act_min, "
           "float act_max, float *scratch, float *out",
           section="CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D, AVERAGE_POOL_2D over one NHWC frame (edgernn_conv.c)",
           doc="CONV_2D: each output row's patches gathered into scratch (out_w * k_h * k_w * in_c elements), then\n"
               "edgernn_fully_connected_f32 over them; w is the filter [out_c][k_h][k_w][in_c].",
           optional=("bias",), source="edgernn_conv.c",
           scratch=_conv_patches, scratch_from="g"),
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
                    "FULLY_CONNECTED outputs (a guess, not measured on GAP8).", source="edgernn_conv.c",
           scratch=_conv_s8_scratch, scratch_from="g", banded="edgernn_dma_conv_s8"),
    Kernel("edgernn_conv_s16",
           "const edgernn_conv_geom_t *g, const int16_t *in, const int8_t *w, const int64_t *bias, "
           "const int32_t *multiplier, const int32_t *shift, int32_t act_min, int32_t act_max, int16_t *scratch, "
           "int16_t *out",
           doc="16x8 (zero points 0): int64 sums, the multiplier reduced to Q15 as in TFLite's int64\n"
               "MultiplyByQuantizedMultiplier.",
           optional=("scratch",),
           splits=(Split("g.out_h", weight=8),), wrapper=False,
           team_doc="CONV_2D, 16x8: the output pixels split as the 8-bit one's. Defined in edgernn_conv.c.",
           source="edgernn_conv.c",
           scratch=_conv_patches, scratch_from="g", banded="edgernn_dma_conv_s16"),
    Kernel("edgernn_depthwise_conv_f32",
           "const edgernn_conv_geom_t *g, const float *in, const float *w_f, const float *bias, float act_min, "
           "float act_max, float *scratch, float *out",
           doc="DEPTHWISE_CONV_2D: w is [k_h][k_w][out_c], out channel ic * depth_multiplier + m reads channel ic;\n"
               "scratch holds out_c sums.",
           optional=("bias",), source="edgernn_conv.c",
           scratch=_channel_sums, scratch_from="g"),
    Kernel("edgernn_depthwise_conv_s8",
           "const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w, const int32_t *bias, "
           "const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point, int32_t output_offset, "
           "int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out",
           doc="Integer: scratch holds the frame with its padding, filled with the input zero point\n"
               "(((out_h - 1) * stride_h + (k_h - 1) * dil_h + 1) rows, as many columns likewise); bias[oc] holds\n"
               "bias + input_offset * the sum of oc's taps. Two-rounding rescale, as TFLite's DepthwisePerChannel.",
           splits=(Split("g.out_h", weight=8),), wrapper=False,
           team_doc="DEPTHWISE_CONV_2D, 8-bit: with Xpulp and a filter row of at most 3 taps at stride 1 along x, the\n"
                    "channels split across the workers, each copying its channel quads into planes of its slot of scratch;\n"
                    "otherwise the calling core pads the frame, then the output rows are split (a row counted as 8\n"
                    "FULLY_CONNECTED outputs, a guess). Defined in edgernn_conv.c.",
           source="edgernn_conv.c",
           scratch=_depthwise_s8_scratch, scratch_from="g", banded="edgernn_dma_depthwise_conv_s8"),
    Kernel("edgernn_depthwise_conv_s16",
           "const edgernn_conv_geom_t *g, const int16_t *in, const int8_t *w, const int64_t *bias, "
           "const int32_t *multiplier, const int32_t *shift, int32_t act_min, int32_t act_max, int16_t *scratch, "
           "int16_t *out", source="edgernn_conv.c",
           scratch=_padded_frame, scratch_from="g"),
    Kernel("edgernn_max_pool_f32",
           "const edgernn_conv_geom_t *g, const float *in, float act_min, float act_max, float *out",
           source="edgernn_conv.c"),
    Kernel("edgernn_max_pool_s8",
           "const edgernn_conv_geom_t *g, const int8_t *in, int32_t act_min, int32_t act_max, int8_t *out",
           splits=(Split("g.out_h", weight=4),), wrapper=False,
           team_doc="MAX_POOL_2D, 8-bit: the output rows split (a row counted as 4 FULLY_CONNECTED outputs, a guess).\n"
                    "Defined in edgernn_conv.c.", source="edgernn_conv.c", banded="edgernn_dma_max_pool_s8"),
    Kernel("edgernn_conv_max_pool_s8",
           "const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w, const int32_t *bias, "
           "const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point, int32_t output_offset, "
           "int32_t act_min, int32_t act_max, const edgernn_conv_geom_t *pool, int32_t pool_min, int32_t pool_max, "
           "int32_t band_rows, int32_t rows_at, int8_t *scratch, int8_t *out",
           doc="edgernn_conv_s8 then edgernn_max_pool_s8 (geometry pool, its clamp pool_min..pool_max) over the\n"
               "convolution's output, in bands of band_rows pooled rows: the convolution's rows a band reads are\n"
               "computed at scratch + rows_at (the convolution's own scratch before them), so its whole output\n"
               "never exists (edgernn/backend/conv_pool.py). The pair's bytes.",
           splits=(Split("g.out_h", weight=8),), wrapper=False,
           team_doc="CONV_2D + MAX_POOL_2D, 8-bit: each band's convolution and pool split as their own team kernels.\n"
                    "Defined in edgernn_conv.c.", source="edgernn_conv.c", banded="edgernn_dma_conv_max_pool_s8"),
    Kernel("edgernn_max_pool_s16",
           "const edgernn_conv_geom_t *g, const int16_t *in, int32_t act_min, int32_t act_max, int16_t *out",
           source="edgernn_conv.c"),
    Kernel("edgernn_avg_pool_f32",
           "const edgernn_conv_geom_t *g, const float *in, float act_min, float act_max, float *out",
           source="edgernn_conv.c"),
    Kernel("edgernn_avg_pool_s8",
           "const edgernn_conv_geom_t *g, const int8_t *in, int32_t act_min, int32_t act_max, int8_t *out",
           doc="The window's in-frame sum over their count, halves away from zero (TFLite's reference).",
           splits=(Split("g.out_h", weight=4),), wrapper=False,
           team_doc="AVERAGE_POOL_2D, 8-bit: the output rows split (a row counted as 4 FULLY_CONNECTED outputs, a\n"
                    "guess). Defined in edgernn_conv.c.", source="edgernn_conv.c", banded="edgernn_dma_avg_pool_s8"),
    Kernel("edgernn_avg_pool_s16",
           "const edgernn_conv_geom_t *g, const int16_t *in, int32_t act_min, int32_t act_max, int16_t *out",
           source="edgernn_conv.c"),
    Kernel("edgernn_leaky_relu_f32", "const float *in, float alpha, int n, float *out",
           section="LEAKY_RELU (edgernn_conv.c; 8-bit is edgernn_lut_s8)", source="edgernn_conv.c"),
    Kernel("edgernn_leaky_relu_s16",
           "const int16_t *in, int32_t input_zero_point, int32_t identity_multiplier, int identity_shift, "
           "int32_t alpha_multiplier, int alpha_shift, int32_t output_zero_point, int n, int16_t *out",
           source="edgernn_conv.c"),
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
                    "firmware holds only when its schedule has an LSTM.", source="edgernn_lstm.c",
           scratch=_lstm_hidden, scratch_from="p"),
    Kernel("edgernn_lstm_f32",
           "const edgernn_lstm_f32_params_t *p, const float *w_in, const float *w_rec, const float *bias, int steps, "
           "const float *x, float *h, float *c, float *y, float *scratch",
           splits=_LSTM, wrapper=False, source="edgernn_lstm.c",
           scratch=_lstm_gates, scratch_from="p"),
]

# Kernels that stand in for others where generation-time work makes them cheaper (kept apart from the
# table above, whose entries they do not change).
KERNELS += [
    Kernel("edgernn_sum_thresholds_s8",
           "const int8_t *in, int outer, int reduced, int inner, int stride, const int32_t *thresholds, "
           "int n_thresholds, int32_t first, int8_t *out",
           section="reductions, by thresholds computed at generation",
           doc="SUM, 8-bit, where edgernn_sum_s8's float rescale of the int32 sum is a non-decreasing function of\n"
               "the sum: out = first + the number of thresholds[k] <= sum (ascending: the least sum giving each\n"
               "next output value), found by a binary search. The same bytes as edgernn_sum_s8, without float.\n"
               "stride: the distance between two reduced elements (the tensor's inner size; a team's sub-range of\n"
               "inner outputs keeps it).",
           splits=(Split("inner", (("in", 1), ("out", 1)), when=("outer", 1)),),
           team_doc="A SUM of one outer row: its inner outputs, each reduced over the whole stride.",
           source="edgernn_reduce.c"),
]

BY_NAME: dict[str, Kernel] = {k.name: k for k in KERNELS}
# The kernel sources, in link order. Every firmware holds the first ones; an optional one only when its
# schedule calls one of its kernels (codegen.copy_kernels). edgernn_tables.c holds shared tables and
# edgernn_team_kernels.c is rendered from this table (kernel_sources.py).
SOURCES = ("edgernn_fully_connected.c", "edgernn_elementwise.c", "edgernn_shape.c", "edgernn_tables.c",
           "edgernn_reduce.c", "edgernn_lut16.c", "edgernn_squared_difference.c", "edgernn_softmax.c",
           "edgernn_team_kernels.c")
OPTIONAL_SOURCES = ("edgernn_lstm.c", "edgernn_conv.c", "edgernn_maximum_minimum.c")
# Optional sources whose prototypes are in a header of their own (the source's stem, rendered from this table
# by kernel_sources.py) and not in edgernn_kernels.h: a kernel added there changes only the firmware that
# calls it. New kernel sources go here.
OWN_HEADER_SOURCES = ("edgernn_maximum_minimum.c",)
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


def struct_fields(struct) -> dict:
    """A ConstStruct's initializer by field name."""
    return dict(zip((f.name for f in STRUCT_BY_NAME[struct.ctype].fields), struct.fields))


def call_args(call) -> dict:
    """The inverse of kernel_args: a call's (``.fn``, ``.args``) arguments by the kernel's argument names."""
    return dict(zip(kernel(call.fn).arg_names, call.args))


# ---- the team's view of a call ----
