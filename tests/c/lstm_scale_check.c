/* The fused LSTM's 32-bit gate rescale (edgernn_lstm.c's lstm_scaled, built with
 * -DEDGERNN_LSTM_SCALE32 as on a 32-bit core) against TFLite's MultiplyByQuantizedMultiplier written out
 * (gemmlowp's SaturatingRoundingDoublingHighMul, then RoundingDivideByPOT): the edges of x and 40 million
 * pseudo-random operands, multipliers in QuantizeMultiplier's [2^30, 2^31), shifts -11..1. Prints the
 * number of disagreements (0 expected). */
#include <stdio.h>

#include "edgernn_lstm.c"
#include "../../templates/firmware/edgernn_team.c"

static int32_t ref_mbqm(int32_t x, int32_t multiplier, int32_t shift)
{
    const int left = shift > 0 ? (int)shift : 0;
    const int right = shift > 0 ? 0 : (int)-shift;
    const int32_t a = (int32_t)((uint32_t)x << left);
    const int64_t ab = (int64_t)a * (int64_t)multiplier;
    const int64_t nudge = ab >= 0 ? ((int64_t)1 << 30) : (1 - ((int64_t)1 << 30));
    const int32_t high = (int32_t)((ab + nudge) / ((int64_t)1 << 31));
    const int32_t mask = (int32_t)(((int64_t)1 << right) - 1);
    const int32_t threshold = (mask >> 1) + (high < 0 ? 1 : 0);
    return (high >> right) + ((high & mask) > threshold ? 1 : 0);
}

static uint64_t state = 88172645463325252ull;

static uint32_t next(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (uint32_t)state;
}

static long check(int32_t x, int32_t multiplier, int32_t shift)
{
    const lstm_scale_t s = lstm_scale(multiplier, shift);
    return lstm_scaled(&s, x) != ref_mbqm(x, multiplier, shift);
}

int main(void)
{
    static const int32_t edges[] = {0, 1, -1, 2, -2, INT32_MAX, INT32_MIN, INT32_MIN + 1, 1 << 20, -(1 << 20)};
    long differ = 0;
    long i;
    int32_t shift;
    for (shift = -11; shift <= 1; ++shift) {
        size_t k;
        for (k = 0; k < sizeof edges / sizeof edges[0]; ++k) {
            differ += check(edges[k], 1 << 30, shift) + check(edges[k], INT32_MAX, shift);
        }
    }
    for (i = 0; i < 40000000; ++i) {
        const int32_t multiplier = (int32_t)((1u << 30) + (next() & 0x3FFFFFFFu));
        const uint32_t kind = next();
        int32_t x;
        shift = 1 - (int32_t)(next() % 13u);
        switch (kind & 3u) {
        case 0:
            x = (int32_t)next(); /* any int32 */
            break;
        case 1:
            x = (int32_t)(next() & 0xFFFFFFu) - 0x800000; /* an accumulator's range */
            break;
        case 2:
            x = (int32_t)(next() & 0xFFFu) - 0x800; /* near 0 */
            break;
        default:
            x = (int32_t)(next() % 2000001u) - 1000000;
            break;
        }
        differ += check(x, multiplier, shift);
    }
    printf("%ld\n", differ);
    return differ != 0;
}
