/* HOST EMULATION of the Xpulp builtins used by edgernn's kernels, in plain C99.
 *
 * On GAP8 the kernels call the PULP builtins themselves (edgernn_dot.h). This header
 * stands in for them when the SIMD path is compiled for another machine with
 * -DEDGERNN_XPULP_EMULATE, so that path can be built, run and compared byte for byte on the host.
 * It is never used on the device.
 */
#ifndef EDGERNN_XPULP_EMUL_H
#define EDGERNN_XPULP_EMUL_H

#include <stdint.h>

/* v4s: four int8 lanes in one 32-bit word, filled by memcpy from four consecutive bytes. Lane k
 * is byte k on a little-endian machine (as on GAP8); on a big-endian one both operands of a dot
 * product are permuted alike, which leaves the sum unchanged. */
typedef uint32_t edgernn_v4s;

static inline int32_t edgernn_emul_lane(edgernn_v4s v, int k)
{
    return (int32_t)((v >> (8 * k)) & 0xFFu) - (int32_t)(((v >> (8 * k)) & 0x80u) << 1);
}

/* __builtin_pulp_sdotsp4(a, b, acc), the instruction pv.sdotsp.b: acc plus the sum over the four
 * lanes of a[k] * b[k], signed times signed, in 32 bits. */
static inline int32_t edgernn_emul_sdotsp4(edgernn_v4s a, edgernn_v4s b, int32_t acc)
{
    return acc + edgernn_emul_lane(a, 0) * edgernn_emul_lane(b, 0) + edgernn_emul_lane(a, 1) * edgernn_emul_lane(b, 1) +
           edgernn_emul_lane(a, 2) * edgernn_emul_lane(b, 2) + edgernn_emul_lane(a, 3) * edgernn_emul_lane(b, 3);
}

#define EDGERNN_SDOTSP4(a, b, acc) edgernn_emul_sdotsp4((a), (b), (acc))

#endif /* EDGERNN_XPULP_EMUL_H */
