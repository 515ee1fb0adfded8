/* The per-element arithmetic of the 8/16-bit element-wise kernels: one definition, used by the kernels
 * of edgernn_elementwise.c and by the fused loops that model.c generates for chains of element-wise
 * ops (edgernn/backend/fusion.py). A fused loop builds each op's constants from literals, so once these
 * functions are inlined the compiler sees every multiplier, shift and offset as a constant. */
#ifndef EDGERNN_ELEMENTWISE_H
#define EDGERNN_ELEMENTWISE_H

#include <stdint.h>

#include "edgernn_fixedpoint.h"
#include "edgernn_kernels.h"

/* Inlined into the loops that call them, so literal constants fold (not when optimizing for size). */
#if defined(__GNUC__) && !defined(__OPTIMIZE_SIZE__)
#define EDGERNN_EW_INLINE static inline __attribute__((always_inline))
#else
#define EDGERNN_EW_INLINE static inline
#endif

/* reference_integer_ops::Add / reference_ops::Sub, general rescaling path: each input, offset and
 * shifted left, is rescaled to the common scale, the sum is rescaled to the output's. */
typedef struct {
    edgernn_rescale_t r1, r2, ro;
    int32_t off1, off2, out_off, lo, hi, sign2;
    int half1, half2;   /* the input's real multiplier is 0.5 exactly */
    int32_t half_mul;   /* its rescale is then the exact product by 2^(left_shift - 1) */
    int32_t m1, m2;     /* the inputs' multipliers and left_shift + input_shift, for the rescale of */
    int pre1, pre2;     /* LiteRT's builtin int16 ADD (edgernn_add_blocks_scaled) */
} edgernn_addsub_k_t;

EDGERNN_EW_INLINE edgernn_addsub_k_t edgernn_addsub_k(const edgernn_addsub_params_t *p, int subtract)
{
    edgernn_addsub_k_t k;
    k.r1 = edgernn_rescale_make(p->input1_multiplier, p->left_shift, -p->input1_shift);
    k.r2 = edgernn_rescale_make(p->input2_multiplier, p->left_shift, -p->input2_shift);
    k.ro = edgernn_rescale_make(p->output_multiplier, 0, -p->output_shift);
    k.off1 = p->input1_offset;
    k.off2 = p->input2_offset;
    k.out_off = p->output_offset;
    k.lo = p->act_min;
    k.hi = p->act_max;
    k.sign2 = subtract ? -1 : 1;
    /* TFLite rescales both inputs to twice the larger input scale, so that input's multiplier is
     * 0.5 exactly: m = 2^30 with shift 0, and floor((x * 2^L * 2^30 + 2^30) / 2^31) = x * 2^(L-1). */
    k.half1 = p->input1_multiplier == (1 << 30) && p->input1_shift == 0 && p->left_shift >= 1;
    k.half2 = p->input2_multiplier == (1 << 30) && p->input2_shift == 0 && p->left_shift >= 1;
    k.half_mul = p->left_shift >= 1 ? (int32_t)1 << (p->left_shift - 1) : 1;
    k.m1 = p->input1_multiplier;
    k.m2 = p->input2_multiplier;
    k.pre1 = p->left_shift + p->input1_shift;
    k.pre2 = p->left_shift + p->input2_shift;
    return k;
}

/* An input offset and rescaled to the common scale; half: the exact product (see above). */
EDGERNN_EW_INLINE int32_t edgernn_addsub_scaled(const edgernn_rescale_t *r, int half, int32_t half_mul, int32_t x)
{
    return half ? x * half_mul : edgernn_rescale(r, x);
}

EDGERNN_EW_INLINE int32_t edgernn_addsub_out(const edgernn_addsub_k_t *k, int32_t raw)
{
    return edgernn_clamp(edgernn_rescale(&k->ro, raw) + k->out_off, k->lo, k->hi);
}

/* One element of ADD/SUB: in1 +- in2. */
EDGERNN_EW_INLINE int32_t edgernn_addsub_elem(const edgernn_addsub_k_t *k, int32_t a, int32_t c)
{
    const int32_t s1 = edgernn_addsub_scaled(&k->r1, k->half1, k->half_mul, a + k->off1);
    const int32_t s2 = edgernn_addsub_scaled(&k->r2, k->half2, k->half_mul, c + k->off2);
    return edgernn_addsub_out(k, s1 + k->sign2 * s2);
}

/* One element of ADD/SUB with a constant operand, rescaled (with the op's sign) at generation time
 * into kc; the input1 fields describe the other operand, sign2 its sign. */
EDGERNN_EW_INLINE int32_t edgernn_addsub_const_elem(const edgernn_addsub_k_t *k, int32_t a, int32_t kc)
{
    return edgernn_addsub_out(k, k->sign2 * edgernn_addsub_scaled(&k->r1, k->half1, k->half_mul, a + k->off1) + kc);
}

/* LiteRT's builtin int16 ADD (optimized_integer_ops::AddElementwiseInt16, its NEON path: on x86 through
 * NEON_2_SSE) takes the elements of two operands of one shape in blocks of 16 from the first, and the last
 * n % 16 as the reference kernel. In a block each input is shifted by left_shift + input_shift (right,
 * truncating, when that is negative) and then high-multiplied once (vqrdmulh, gemmlowp's
 * SaturatingRoundingDoublingHighMul), where the reference multiplies input * 2^left_shift and then divides
 * by 2^-input_shift with a second rounding; the sum's rescale is the same. The two differ by 1 on a few
 * inputs in 10^4 (measured, docs/ops.md). in_block: the element lies in a block. */
EDGERNN_EW_INLINE int32_t edgernn_add_blocks_scaled(int32_t x, int32_t m, int pre)
{
    return edgernn_srdhm(pre >= 0 ? (int32_t)((uint32_t)x << pre) : x >> -pre, m);
}

EDGERNN_EW_INLINE int32_t edgernn_add_blocks_elem(const edgernn_addsub_k_t *k, int32_t a, int32_t c, int in_block)
{
    if (!in_block) {
        return edgernn_addsub_elem(k, a, c);
    }
    return edgernn_addsub_out(k, edgernn_add_blocks_scaled(a + k->off1, k->m1, k->pre1) +
                                 edgernn_add_blocks_scaled(c + k->off2, k->m2, k->pre2));
}

/* The same with a constant operand rescaled at generation (kc: in a block, as a block rescales it). */
EDGERNN_EW_INLINE int32_t edgernn_add_blocks_const_elem(const edgernn_addsub_k_t *k, int32_t a, int32_t kc,
                                                        int in_block)
{
    const int32_t x = a + k->off1;
    return edgernn_addsub_out(k, (in_block ? edgernn_add_blocks_scaled(x, k->m1, k->pre1)
                                           : edgernn_addsub_scaled(&k->r1, k->half1, k->half_mul, x)) + kc);
}

/* LiteRT's builtin int8 ADD and MUL in their vector blocks (optimized_integer_ops, the NEON paths that x86 runs
 * through NEON_2_SSE) narrow the rescaled value r to int16 before the output offset: ADD wrapping (vmovn), MUL
 * saturating (vqmovn); the offset is added in int16, wrapping, and the result saturated to int8 and clamped. It
 * is the reference's clamp(r + offset) unless r + offset leaves int16 (a result some 256 times outside the
 * output's range): there the sign can turn. saturate: MUL's narrowing. */
EDGERNN_EW_INLINE int32_t edgernn_vector_out_s8(int32_t r, int32_t offset, int32_t lo, int32_t hi, int saturate)
{
    const int32_t v = saturate ? edgernn_clamp(r, -32768, 32767) : r;
    const int32_t wrapped = (int32_t)(((uint32_t)v + (uint32_t)offset + 0x8000u) & 0xFFFFu) - 0x8000;
    return edgernn_clamp(wrapped, lo, hi);
}

/* MUL: MultiplyByQuantizedMultiplier of the product of the offset inputs. A positive shift multiplies
 * the product in 32 bits first, as TFLite does; a negative one is the rounding right shift. */
typedef struct {
    edgernn_rescale_t r;
    int32_t off1, off2, out_off, lo, hi, left;
} edgernn_mul_k_t;

EDGERNN_EW_INLINE edgernn_mul_k_t edgernn_mul_k(const edgernn_mul_params_t *p)
{
    edgernn_mul_k_t k;
    k.left = p->output_shift > 0 ? p->output_shift : 0;
    k.r = edgernn_rescale_make(p->output_multiplier, 0, p->output_shift > 0 ? 0 : -p->output_shift);
    k.off1 = p->input1_offset;
    k.off2 = p->input2_offset;
    k.out_off = p->output_offset;
    k.lo = p->act_min;
    k.hi = p->act_max;
    return k;
}

/* The product MUL rescales. */
EDGERNN_EW_INLINE int32_t edgernn_mul_prod(const edgernn_mul_k_t *k, int32_t a, int32_t c)
{
    return (int32_t)((int64_t)((k->off1 + a) * (k->off2 + c)) * ((int64_t)1 << k->left));
}

/* One element of MUL. */
EDGERNN_EW_INLINE int32_t edgernn_mul_elem(const edgernn_mul_k_t *k, int32_t a, int32_t c)
{
    return edgernn_clamp(edgernn_rescale(&k->r, edgernn_mul_prod(k, a, c)) + k->out_off, k->lo, k->hi);
}

/* One element of int8 ADD, of ADD with a constant operand (kc) and of MUL as LiteRT's builtin kernels compute
 * them: in_block, the element lies in one of their vector blocks (edgernn_vector_out_s8). */
EDGERNN_EW_INLINE int32_t edgernn_add_vector_elem_s8(const edgernn_addsub_k_t *k, int32_t a, int32_t c, int in_block)
{
    const int32_t raw = edgernn_addsub_scaled(&k->r1, k->half1, k->half_mul, a + k->off1) +
                        edgernn_addsub_scaled(&k->r2, k->half2, k->half_mul, c + k->off2);
    return in_block ? edgernn_vector_out_s8(edgernn_rescale(&k->ro, raw), k->out_off, k->lo, k->hi, 0)
                    : edgernn_addsub_out(k, raw);
}

EDGERNN_EW_INLINE int32_t edgernn_add_vector_const_elem_s8(const edgernn_addsub_k_t *k, int32_t a, int32_t kc,
                                                           int in_block)
{
    const int32_t raw = edgernn_addsub_scaled(&k->r1, k->half1, k->half_mul, a + k->off1) + kc;
    return in_block ? edgernn_vector_out_s8(edgernn_rescale(&k->ro, raw), k->out_off, k->lo, k->hi, 0)
                    : edgernn_addsub_out(k, raw);
}

EDGERNN_EW_INLINE int32_t edgernn_mul_vector_elem_s8(const edgernn_mul_k_t *k, int32_t a, int32_t c, int in_block)
{
    return in_block ? edgernn_vector_out_s8(edgernn_rescale(&k->r, edgernn_mul_prod(k, a, c)), k->out_off, k->lo,
                                            k->hi, 1)
                    : edgernn_mul_elem(k, a, c);
}

/* The output of MUL (prod) or of ADD/SUB (raw) through edgernn_rescale_narrow: for a fused loop whose
 * generation bounded the value (m, up, e as that function takes them; the same result). */
EDGERNN_EW_INLINE int32_t edgernn_mul_out_narrow(const edgernn_mul_k_t *k, int32_t prod, int32_t m, int up, int e)
{
    return edgernn_clamp(edgernn_rescale_narrow(prod, m, up, e) + k->out_off, k->lo, k->hi);
}

EDGERNN_EW_INLINE int32_t edgernn_addsub_out_narrow(const edgernn_addsub_k_t *k, int32_t raw, int32_t m, int up,
                                                    int e)
{
    return edgernn_clamp(edgernn_rescale_narrow(raw, m, up, e) + k->out_off, k->lo, k->hi);
}

/* The int16 forms of a fused loop on a 32-bit core: each 64-bit rescale of MUL, ADD and SUB as
 * edgernn_rescale_words, the multipliers and right shifts as the loop's literals. Generation checks the
 * bounds that form needs for every input (fusion.mul_words, fusion.addsub_words); the result is the same. */
EDGERNN_EW_INLINE int32_t edgernn_mul_words_elem(const edgernn_mul_k_t *k, int32_t a, int32_t c, int32_t m, int e)
{
    return edgernn_clamp(edgernn_rescale_words((k->off1 + a) * (k->off2 + c), m, 0, e) + k->out_off, k->lo, k->hi);
}

EDGERNN_EW_INLINE int32_t edgernn_addsub_words_scaled(const edgernn_addsub_k_t *k, int half, int32_t x, int left,
                                                     int32_t m, int e)
{
    return half ? x * k->half_mul : edgernn_rescale_words(x, m, left, e);
}

EDGERNN_EW_INLINE int32_t edgernn_addsub_words_out(const edgernn_addsub_k_t *k, int32_t raw, int32_t m, int e)
{
    return edgernn_clamp(edgernn_rescale_words(raw, m, 0, e) + k->out_off, k->lo, k->hi);
}

/* ADD/SUB: in1 +- in2; (m1, e1), (m2, e2), (mo, eo): the inputs' and the output's rescales, left the left shift */
EDGERNN_EW_INLINE int32_t edgernn_addsub_words_elem(const edgernn_addsub_k_t *k, int32_t a, int32_t c, int left,
                                                   int32_t m1, int e1, int32_t m2, int e2, int32_t mo, int eo)
{
    const int32_t s1 = edgernn_addsub_words_scaled(k, k->half1, a + k->off1, left, m1, e1);
    const int32_t s2 = edgernn_addsub_words_scaled(k, k->half2, c + k->off2, left, m2, e2);
    return edgernn_addsub_words_out(k, s1 + k->sign2 * s2, mo, eo);
}

/* ADD/SUB of a constant operand rescaled at generation (kc), as edgernn_addsub_const_elem */
EDGERNN_EW_INLINE int32_t edgernn_addsub_const_words_elem(const edgernn_addsub_k_t *k, int32_t a, int32_t kc,
                                                         int left, int32_t m1, int e1, int32_t mo, int eo)
{
    const int32_t s1 = edgernn_addsub_words_scaled(k, k->half1, a + k->off1, left, m1, e1);
    return edgernn_addsub_words_out(k, k->sign2 * s1 + kc, mo, eo);
}

/* edgernn_add_blocks_elem and edgernn_add_blocks_const_elem in 32-bit words (fusion.add_blocks_words checks the
 * bounds), the literals those of edgernn_addsub_words_elem: a block's rescale of an input is
 * edgernn_rescale_words(x, m, left - e, 0), SaturatingRoundingDoublingHighMul(x * 2^(left - e), m). */
EDGERNN_EW_INLINE int32_t edgernn_add_blocks_words_scaled(const edgernn_addsub_k_t *k, int half, int32_t x,
                                                          int in_block, int left, int32_t m, int e)
{
    return half ? x * k->half_mul
                : (in_block ? edgernn_rescale_words(x, m, left - e, 0) : edgernn_rescale_words(x, m, left, e));
}

EDGERNN_EW_INLINE int32_t edgernn_add_blocks_words_elem(const edgernn_addsub_k_t *k, int32_t a, int32_t c,
                                                        int in_block, int left, int32_t m1, int e1, int32_t m2,
                                                        int e2, int32_t mo, int eo)
{
    const int32_t s1 = edgernn_add_blocks_words_scaled(k, k->half1, a + k->off1, in_block, left, m1, e1);
    const int32_t s2 = edgernn_add_blocks_words_scaled(k, k->half2, c + k->off2, in_block, left, m2, e2);
    return edgernn_addsub_words_out(k, s1 + s2, mo, eo);
}

EDGERNN_EW_INLINE int32_t edgernn_add_blocks_const_words_elem(const edgernn_addsub_k_t *k, int32_t a, int32_t kc,
                                                              int in_block, int left, int32_t m1, int e1, int32_t mo,
                                                              int eo)
{
    return edgernn_addsub_words_out(
        k, edgernn_add_blocks_words_scaled(k, k->half1, a + k->off1, in_block, left, m1, e1) + kc, mo, eo);
}

/* One element of an 8-bit table op (LOGISTIC, TANH, EXP, ABS, NEG, RELU, QUANTIZE ...). */
EDGERNN_EW_INLINE int32_t edgernn_lut_elem(const int8_t *table, int32_t a)
{
    return table[(uint8_t)a];
}

/* QUANTIZE between the integer types (a mixed model's seam), one element: LiteRT's Requantize,
 * clamp(MultiplyByQuantizedMultiplier(x + off, m, shift) + zo, lo, hi). The _narrow form is the same with
 * the left shift as a product and one high multiply (edgernn_rescale_narrow with up = 2), where the
 * caller has checked its bounds for every input (edgernn_elementwise.c, requantize_narrow_applies). */
EDGERNN_EW_INLINE int32_t edgernn_requantize_elem(int32_t x, int32_t off, int32_t m, int32_t shift, int32_t zo,
                                                  int32_t lo, int32_t hi)
{
    return edgernn_clamp(edgernn_mbqm(x + off, m, shift) + zo, lo, hi);
}

EDGERNN_EW_INLINE int32_t edgernn_requantize_narrow_elem(int32_t x, int32_t off, int left, int32_t m, int e,
                                                         int32_t zo, int32_t lo, int32_t hi)
{
    return edgernn_clamp(edgernn_rescale_narrow((x + off) * ((int32_t)1 << left), m, 2, e) + zo, lo, hi);
}

/* LOGISTIC and TANH, int16 (reference_integer_ops::Logistic and Tanh), one element: the input rescaled by
 * (multiplier, left_shift) with round = 2^(left_shift - 1) (0 for no shift), then the interpolated
 * 256-entry sigmoid table: edgernn_sigmoid_table_uint16, or a fused loop's copy of it in the team's fast
 * memory (fusion.sigmoid16_table). A multiplier of 0 stands for 3 << left_shift with no shift: the caller
 * passes the values after that substitution. */
extern const uint16_t edgernn_sigmoid_table_uint16[256];

/* The rescaled input, and its magnitude through the table: entry |x| >> frac, the next one weighted by the
 * frac low bits, or sat past the table's end. */
EDGERNN_EW_INLINE int32_t edgernn_sigmoid16_input(int32_t x, int32_t multiplier, int32_t left_shift, int32_t round)
{
    return (x * multiplier + round) >> left_shift;
}

EDGERNN_EW_INLINE uint32_t edgernn_sigmoid16_lookup(const uint16_t *table, int32_t input_data, int frac, uint32_t sat)
{
    const uint32_t abs_input = (uint32_t)(input_data < 0 ? -input_data : input_data);
    const uint32_t uh = abs_input >> frac;
    if (uh >= 255) {
        return sat;
    }
    {
        const uint32_t ua = table[uh];
        const uint32_t ub = table[uh + 1];
        return (ua << frac) + (abs_input & ((1u << frac) - 1u)) * (ub - ua);
    }
}

EDGERNN_EW_INLINE int32_t edgernn_logistic_s16_elem(const uint16_t *table, int32_t x, int32_t multiplier,
                                                     int32_t left_shift, int32_t round)
{
    const int32_t input_data = edgernn_sigmoid16_input(x, multiplier, left_shift, round);
    uint32_t result = edgernn_sigmoid16_lookup(table, input_data, 9, 0x7FFFu << 10);
    result = input_data >= 0 ? (result + (1u << 9)) : ((1u << (16 + 9)) - result + (1u << 9) - 1);
    return (int16_t)(result >> 10);
}

EDGERNN_EW_INLINE int32_t edgernn_tanh_s16_elem(const uint16_t *table, int32_t x, int32_t multiplier,
                                                 int32_t left_shift, int32_t round)
{
    const int32_t input_data = edgernn_sigmoid16_input(x, multiplier, left_shift, round);
    int32_t result = (int32_t)edgernn_sigmoid16_lookup(table, input_data, 8, 0xFFFFu << 8);
    result = input_data >= 0 ? (result - (1 << (14 + 9)) + (1 << (9 - 2)))
                             : (-result + (1 << (14 + 9)) + (1 << (9 - 2)) - 1);
    return (int16_t)(result >> (9 - 1));
}

/* DIV, 8-bit: reference_ops::DivElementwise with gemmlowp's reciprocal. */

EDGERNN_EW_INLINE int edgernn_count_leading_sign_bits(int32_t x)
{
    if (x == 0) {
        return 31;
    }
    return x < 0 ? edgernn_clz32(~(uint32_t)x) - 1 : edgernn_clz32((uint32_t)x) - 1;
}

/* tflite::GetReciprocal(x, x_integer_digits = 31, &num_bits_over_unit) */
EDGERNN_EW_INLINE int32_t edgernn_get_reciprocal(int32_t x, int *num_bits_over_unit)
{
    const int headroom_plus_one = edgernn_clz32((uint32_t)x);
    const uint32_t shifted = (uint32_t)x << headroom_plus_one;
    *num_bits_over_unit = 31 - headroom_plus_one;
    return edgernn_one_over_one_plus_x((int32_t)(shifted - ((uint32_t)1 << 31)));
}

EDGERNN_EW_INLINE int32_t edgernn_div_elem(const edgernn_mul_params_t *p, int32_t a, int32_t c)
{
    const int32_t input1_val = p->input1_offset + a;
    const int32_t input2_val = p->input2_offset + c;
    int recip_shift;
    int32_t input2_inv;
    int headroom;
    int32_t unscaled;
    int total_shift;
    int32_t result;
    if (input2_val > 0) {
        input2_inv = edgernn_get_reciprocal(input2_val, &recip_shift);
    } else {
        input2_inv = -edgernn_get_reciprocal(-input2_val, &recip_shift);
    }
    headroom = edgernn_count_leading_sign_bits(input1_val);
    unscaled = edgernn_srdhm((int32_t)((int64_t)input1_val * ((int64_t)1 << headroom)), input2_inv);
    total_shift = p->output_shift - recip_shift - headroom;
    result = edgernn_rdbpot(edgernn_srdhm(unscaled, p->output_multiplier), -total_shift) + p->output_offset;
    return edgernn_clamp(result, p->act_min, p->act_max);
}

#endif /* EDGERNN_ELEMENTWISE_H */
