#include <math.h>
#include <string.h>

#include "edgernn_kernels.h"

void edgernn_move_bytes(void *dst, const void *src, size_t n)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    const uintptr_t di = (uintptr_t)d, si = (uintptr_t)s;

    if (n == 0 || d == s) {
        return;
    }
    if (di + n <= si || si + n <= di) {
        memcpy(d, s, n);
    } else if (di < si) {
        while (n--) {
            *d++ = *s++;
        }
    } else {
        d += n;
        s += n;
        while (n--) {
            *--d = *--s;
        }
    }
}

void edgernn_copy_runs(const edgernn_run_t *runs, int n_runs, size_t elem_size, const void *src,
                       void *dst)
{
    int k;
    for (k = 0; k < n_runs; ++k) {
        edgernn_move_bytes((unsigned char *)dst + (size_t)runs[k].dst * elem_size,
                (const unsigned char *)src + (size_t)runs[k].src * elem_size,
                (size_t)runs[k].count * elem_size);
    }
}

void edgernn_sum_f32(const float *in, int outer, int reduced, int inner, float *out)
{
    int o, r, i;
    for (o = 0; o < outer; ++o) {
        for (i = 0; i < inner; ++i) {
            float acc = 0.0f;
            for (r = 0; r < reduced; ++r) {
                acc += in[((size_t)o * reduced + r) * inner + i];
            }
            out[(size_t)o * inner + i] = acc;
        }
    }
}

void edgernn_mean_f32(const float *in, int outer, int reduced, int inner, float *out)
{
    int o, i;
    edgernn_sum_f32(in, outer, reduced, inner, out);
    for (o = 0; o < outer; ++o) {
        for (i = 0; i < inner; ++i) {
            out[(size_t)o * inner + i] /= (float)reduced;
        }
    }
}

void edgernn_softmax_f32(const float *in, int rows, int depth, float beta, float *out)
{
    int r, i;
    for (r = 0; r < rows; ++r) {
        const float *x = in + (size_t)r * depth;
        float *y = out + (size_t)r * depth;
        float max = x[0];
        float sum = 0.0f;
        for (i = 1; i < depth; ++i) {
            max = x[i] > max ? x[i] : max;
        }
        for (i = 0; i < depth; ++i) {
            y[i] = expf((x[i] - max) * beta);
            sum += y[i];
        }
        for (i = 0; i < depth; ++i) {
            y[i] /= sum;
        }
    }
}

/* A word that may alias any object, as the bytes memcpy moves may. */
typedef uint32_t __attribute__((__may_alias__)) edgernn_word_t;

void edgernn_move_words(void *dst, const void *src, size_t n)
{
    /* the state's copy at the end of a step, where it is long enough (model.c.j2): words, four a round, where a
     * small libc's memcpy (GAP SDK's FreeRTOS string.c) moves bytes one by one, some 2 cycles each on a cluster
     * core. Its own function, last in the file: a model with short states never calls it, and the code before
     * it keeps its addresses (GAP8's instruction-cache sets). */
    edgernn_word_t *dw = (edgernn_word_t *)dst;
    const edgernn_word_t *sw = (const edgernn_word_t *)src;
    size_t k = n / 4u;
    for (; k >= 4u; k -= 4u, dw += 4, sw += 4) {
        const edgernn_word_t a = sw[0], b = sw[1], c = sw[2], e = sw[3];
        dw[0] = a;
        dw[1] = b;
        dw[2] = c;
        dw[3] = e;
    }
    for (; k > 0u; --k) {
        *dw++ = *sw++;
    }
}
