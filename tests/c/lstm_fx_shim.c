/* Exposes the 16-bit fixed-point logistic and tanh of edgernn_lstm.c (static there) to
 * lstm_fx_check.cc, which holds them against gemmlowp's own fixedpoint.h: the gates' logistic and
 * tanh (Q3.12, integer bits fixed at compile time), tanh(c) (integer bits known at run time) and the
 * reciprocal both take after the exp.
 * The portable team (serial here) is what the file's team versions split with. */
#include "edgernn_lstm.c"
#include "../../templates/firmware/edgernn_team.c"

int16_t edgernn_fx_tanh(int16_t a, int integer_bits);
int16_t edgernn_fx_tanh_q3(int16_t a);
int16_t edgernn_fx_logistic_q3(int16_t a);
int32_t edgernn_fx_half_reciprocal(int32_t e);

int16_t edgernn_fx_tanh(int16_t a, int integer_bits)
{
    return fx_tanh(a, integer_bits);
}

int16_t edgernn_fx_tanh_q3(int16_t a)
{
    return fx_tanh_q3(a);
}

int16_t edgernn_fx_logistic_q3(int16_t a)
{
    return fx_logistic_q3(a);
}

int32_t edgernn_fx_half_reciprocal(int32_t e)
{
    return fx_newton_half_reciprocal(e);
}
