// Every int16 input of edgernn's logistic (Q3.12), the gates' tanh (Q3.12) and tanh(c) (0 to 6
// integer bits) against gemmlowp's fixedpoint.h, the code TFLite's PortableApplySigmoid /
// PortableApplyTanh run, and the reciprocal after their exp (Newton-Raphson in gemmlowp, possibly
// another way in edgernn) on every exp value in [0, 1). Prints the number of differing outputs per function and exits non-zero if
// any differs.
#include <cstdint>
#include <cstdio>

#include "fixedpoint/fixedpoint.h"

extern "C" {
int16_t edgernn_fx_tanh(int16_t a, int integer_bits);
int16_t edgernn_fx_tanh_q3(int16_t a);
int16_t edgernn_fx_logistic_q3(int16_t a);
int32_t edgernn_fx_half_reciprocal(int32_t e);
}

// one_over_one_plus_x_for_x_in_0_1 and one_minus_x_over_one_plus_x_for_x_in_0_1 are edgernn's
// reciprocal x (Q2.13) rescaled: min(2x, 1) and min(4(x - 1), 1)
static int reciprocal_differences() {
  int differ = 0;
  for (int v = 0; v <= 32767; ++v) {
    const gemmlowp::FixedPoint<int16_t, 0> e = gemmlowp::FixedPoint<int16_t, 0>::FromRaw(static_cast<int16_t>(v));
    const int32_t x = edgernn_fx_half_reciprocal(v);
    const int32_t logistic = 2 * x < 32767 ? 2 * x : 32767;
    const int32_t tanh = 4 * (x - 8192) < 32767 ? 4 * (x - 8192) : 32767;
    differ += gemmlowp::one_over_one_plus_x_for_x_in_0_1(e).raw() != logistic;
    differ += gemmlowp::one_minus_x_over_one_plus_x_for_x_in_0_1(e).raw() != tanh;
  }
  return differ;
}

template <int IntegerBits>
static int tanh_differences() {
  int differ = 0;
  for (int v = -32768; v <= 32767; ++v) {
    const int16_t raw = static_cast<int16_t>(v);
    const int16_t want = gemmlowp::tanh(gemmlowp::FixedPoint<int16_t, IntegerBits>::FromRaw(raw)).raw();
    differ += want != edgernn_fx_tanh(raw, IntegerBits);
  }
  return differ;
}

int main() {
  int logistic = 0;
  int tanh_q3 = 0;
  for (int v = -32768; v <= 32767; ++v) {
    const int16_t raw = static_cast<int16_t>(v);
    logistic += gemmlowp::logistic(gemmlowp::FixedPoint<int16_t, 3>::FromRaw(raw)).raw() !=
                edgernn_fx_logistic_q3(raw);
    tanh_q3 += gemmlowp::tanh(gemmlowp::FixedPoint<int16_t, 3>::FromRaw(raw)).raw() != edgernn_fx_tanh_q3(raw);
  }
  const int tanh[7] = {tanh_differences<0>(), tanh_differences<1>(), tanh_differences<2>(),
                       tanh_differences<3>(), tanh_differences<4>(), tanh_differences<5>(),
                       tanh_differences<6>()};
  const int reciprocal = reciprocal_differences();
  int total = logistic + tanh_q3 + reciprocal;
  std::printf("reciprocal %d logistic %d tanh_q3 %d tanh", reciprocal, logistic, tanh_q3);
  for (int bits = 0; bits <= 6; ++bits) {
    std::printf(" %d", tanh[bits]);
    total += tanh[bits];
  }
  std::printf("\n");
  return total != 0;
}
