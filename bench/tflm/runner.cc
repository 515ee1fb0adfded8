// TFLite Micro's MicroInterpreter (with CMSIS-NN's kernels) stepping an edgernn step.tflite on qemu_stm32f405,
// for bench/bench_tflm.py: the same start-up, HAL and instruction counter (TIM2 under -icount shift=0) as
// edgernn's firmware for that board. The model, the inputs and the state feedback come from tflm_case.h, which
// the bench renders from tflm_case.h.j2. For each step it writes over USART1 a line
//     S <instructions of Invoke()> <hex of y's bytes> <hex of each state output's bytes>
// then "~~~TFLM DONE~~~", and stops QEMU through semihosting.
#include <stdint.h>
#include <string.h>

#include "tensorflow/lite/micro/cortex_m_generic/debug_log_callback.h"
#include "tensorflow/lite/micro/micro_interpreter.h"
#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"
#include "tensorflow/lite/schema/schema_generated.h"

extern "C" {
#include "hal.h"
void __libc_init_array(void);
// -nostartfiles: the C++ runtime's hooks that crt0 would bring
void _init(void) {}
void _fini(void) {}
}
void* __dso_handle = nullptr;

#include "tflm_case.h"

alignas(16) static uint8_t arena[TFLM_ARENA_BYTES];

static void put(const char* s) { edgernn_hal_uart_write(reinterpret_cast<const uint8_t*>(s), strlen(s)); }

// TFLM's own messages (MicroPrintf: a failed Prepare, an abort's reason) on the same UART, as "TFLM: ..." lines
static void debug_log(const char* s) {
  put("TFLM: ");
  put(s);
}

static void put_u32(uint32_t v) {
  char b[11];
  int n = 10;
  b[n] = '\0';
  do {
    b[--n] = static_cast<char>('0' + v % 10u);
    v /= 10u;
  } while (v != 0u);
  put(b + n);
}

static void put_hex(const uint8_t* p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  char b[2];
  for (size_t i = 0; i < n; ++i) {
    b[0] = digits[p[i] >> 4];
    b[1] = digits[p[i] & 15u];
    edgernn_hal_uart_write(reinterpret_cast<const uint8_t*>(b), 2);
  }
}

static void fail(const char* what) {
  put("TFLM FAILED: ");
  put(what);
  put("\n");
  edgernn_hal_exit(2);
}

int main(int, char**) {
  __libc_init_array();
  edgernn_hal_init(0, nullptr);
  RegisterDebugLogCallback(debug_log);
  const tflite::Model* model = tflite::GetModel(tflm_model);
  // the model's own operators only, so that the image holds the kernels it runs, as edgernn's does
  static tflite::MicroMutableOpResolver<TFLM_OPS> ops;
  TFLM_ADD_OPS(ops);
  static tflite::MicroInterpreter interpreter(model, ops, arena, sizeof arena);
  if (interpreter.AllocateTensors() != kTfLiteOk) fail("AllocateTensors");
  put("arena_used ");
  put_u32(static_cast<uint32_t>(interpreter.arena_used_bytes()));
  put("\n");
  // every state input starts at its zero point, as edgernn's step does
  for (int k = 0; k < TFLM_STATES; ++k) {
    TfLiteTensor* s = interpreter.input(tflm_state_in[k]);
    for (size_t i = 0; i < s->bytes / tflm_state_width[k]; ++i) {
      if (tflm_state_width[k] == 1) {
        s->data.int8[i] = static_cast<int8_t>(tflm_state_zero[k]);
      } else if (tflm_state_width[k] == 2) {
        s->data.i16[i] = static_cast<int16_t>(tflm_state_zero[k]);
      } else {
        s->data.f[i] = 0.0f;
      }
    }
  }
  for (int t = 0; t < TFLM_STEPS; ++t) {
    TfLiteTensor* x = interpreter.input(TFLM_X_INPUT);
    if (x->bytes != TFLM_X_BYTES) fail("x size");
    memcpy(x->data.raw, tflm_xs + static_cast<size_t>(t) * TFLM_X_BYTES, TFLM_X_BYTES);
    const uint64_t start = edgernn_hal_cycles();
    if (interpreter.Invoke() != kTfLiteOk) fail("Invoke");
    const uint64_t stop = edgernn_hal_cycles();
    put("S ");
    put_u32(static_cast<uint32_t>(stop - start));
    put(" ");
    TfLiteTensor* y = interpreter.output(TFLM_Y_OUTPUT);
    put_hex(reinterpret_cast<const uint8_t*>(y->data.raw), y->bytes);
    for (int k = 0; k < TFLM_STATES; ++k) {
      TfLiteTensor* out = interpreter.output(tflm_state_out[k]);
      put(" ");
      put_hex(reinterpret_cast<const uint8_t*>(out->data.raw), out->bytes);
      memcpy(interpreter.input(tflm_state_in[k])->data.raw, out->data.raw, out->bytes);
    }
    put("\n");
  }
  put("~~~TFLM DONE~~~\n");
  edgernn_hal_exit(0);
  return 0;
}
