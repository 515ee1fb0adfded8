// Every int16 input of edgernn's logistic (Q3.12), the gates' tanh (Q3.12) and tanh(c) (0 to 6
// integer bits) against gemmlowp's fixedpoint.h, the code TFLite's PortableApplySigmoid /
// PortableApplyTanh run. Prints the number of differing outputs per function and exits non-zero if
// any differs.
#include <cstdint>
#include <cstdio>

#include "fixedpoint/fixedpoint.h"

extern "C" {
int16_t edgernn_fx_tanh(int16_t a, int integer_bits);
int16_t edgernn_fx_tanh_q3(int16_t a);
int16_t edgernn_fx_logistic_q3(int16_t a);
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
  int total = logistic + tanh_q3;
  std::printf("logistic %d tanh_q3 %d tanh", logistic, tanh_q3);
  for (int bits = 0; bits <= 6; ++bits) {
    std::printf(" %d", tanh[bits]);
    total += tanh[bits];
  }
  std::printf("\n");
  return total != 0;
}
