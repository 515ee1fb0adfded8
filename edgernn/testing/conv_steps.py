"""Step models around one frame, as the per-frame CNN front-end tests and benches build them, without the Keras
front end: x is one (H, W, C) frame, the conv stack's features are flattened and feed a tanh state and a Dense
output, so the conv ops' every byte reaches y and the state. Converted with edgernn's own calibration and
tied-state quantization (edgernn.tflite.quantize), fed frames wider than the calibration range, and run on
qemu_riscv32 by a bare-metal driver that counts each step's retired instructions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

STATES = [{"name": "state", "size": 4}]
N_STATE = 4
STEPS = 12


def layers():
    """keras.layers, with TensorFlow set up as edgernn sets it up."""
    from edgernn import tfenv

    tfenv.tensorflow()
    from keras import layers

    return layers


def step_model(shape, body, seed: int = 0):
    """A step model around one frame: x (one ``shape`` frame) through ``body`` (keras tensor -> keras tensor),
    flattened, feeds a tanh state and a Dense(3) output."""
    from edgernn import tfenv

    tfenv.tensorflow()
    import keras
    from keras import layers as L

    keras.utils.set_random_seed(seed)
    x = keras.Input(shape=shape, batch_size=1, name="x")
    s = keras.Input(shape=(N_STATE,), batch_size=1, name="state")
    f = L.Flatten()(body(x))
    s2 = L.Dense(N_STATE, activation="tanh")(L.Concatenate()([f, s]))
    y = L.Dense(3)(L.Concatenate()([f, s2]))
    model = keras.Model([x, s], {"y": y, "state": s2})
    # BatchNormalization's moving statistics away from (0, 1), so that its fold is not the identity
    for layer in model.layers:
        if isinstance(layer, L.BatchNormalization):
            rng = np.random.default_rng(seed)
            gamma, beta, mean, var = layer.get_weights()
            layer.set_weights([rng.uniform(0.5, 1.5, gamma.shape), rng.uniform(-0.3, 0.3, beta.shape),
                               rng.uniform(-0.2, 0.2, mean.shape), rng.uniform(0.5, 2.0, var.shape)])
    return model


def convert_case(model, shape, quant: str, seed: int = 1) -> bytes:
    """The step model as edgernn's step strategy quantizes it (calibrate, then quantize_with_tied_states)."""
    import warnings

    from edgernn import tfenv
    from edgernn.tflite.quantize import calibrate, quantize_with_tied_states

    tf = tfenv.tensorflow()
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings(), tfenv.native_stderr_captured():
        warnings.simplefilter("ignore")
        converter = tf.lite.TFLiteConverter.from_keras_model(model)
        if quant == "float32":
            return bytes(converter.convert())
        samples = [{"x": rng.uniform(-1, 1, (1,) + shape).astype(np.float32),
                    "state": rng.uniform(-1, 1, (1, N_STATE)).astype(np.float32)} for _ in range(48)]
        calibrated = calibrate(converter, samples)
    quantized, _ = quantize_with_tied_states(calibrated, [("state", "state")], quant)
    return quantized


def frames(folder: Path, shape, steps: int = STEPS, seed: int = 7) -> np.ndarray:
    """Frames wider than the calibration range ([-1, 1]), quantized as the model's input."""
    from edgernn.tflite.interpreter import load_interpreter

    xs = np.random.default_rng(seed).uniform(-1.6, 1.6, (steps,) + shape).astype(np.float32)
    d = load_interpreter(folder / "step.tflite").get_signature_runner("serving_default").get_input_details()["x"]
    if d["dtype"] == np.float32:
        return xs
    scale = d["quantization_parameters"]["scales"][0]
    zp = d["quantization_parameters"]["zero_points"][0]
    info = np.iinfo(d["dtype"])
    return np.clip(np.round(xs / scale) + zp, info.min, info.max).astype(d["dtype"])


# A bare-metal driver for qemu_riscv32: the frames compiled in, each step's output and state bytes and
# its retired instructions (minstret, exact under -icount shift=0) printed in hex over the UART.
RV32_DRIVER = r"""
#include <stdio.h>
#include "hal.h"
#include "model.h"
#include "frames.h"

static void put_hex(const uint8_t *p, int n)
{
    static const char digits[] = "0123456789abcdef";
    char buf[2];
    int i;
    for (i = 0; i < n; ++i) {
        buf[0] = digits[p[i] >> 4];
        buf[1] = digits[p[i] & 15];
        edgernn_hal_uart_write((const uint8_t *)buf, 2);
    }
}

int main(void)
{
    static edgernn_out_t y[EDGERNN_OUTPUT_SIZE];
    static uint8_t state[EDGERNN_STATE_BYTES + 1];
    char line[32];
    int t;
    edgernn_hal_init(0, 0);
    if (edgernn_init() != EDGERNN_OK) {
        edgernn_hal_exit(3);
    }
    for (t = 0; t < N_FRAMES; ++t) {
        uint64_t c0 = edgernn_hal_cycles(), c1;
        if (edgernn_step(frames[t], y) != EDGERNN_OK) {
            edgernn_hal_exit(4);
        }
        c1 = edgernn_hal_cycles();
        edgernn_get_state(state);
        put_hex((const uint8_t *)y, (int)sizeof y);
        put_hex(state, EDGERNN_STATE_BYTES);
        snprintf(line, sizeof line, " %lu\n", (unsigned long)(c1 - c0));
        edgernn_hal_uart_write((const uint8_t *)line, (int)strlen(line));
    }
    edgernn_hal_uart_write((const uint8_t *)"~~~DONE~~~\n", 11);
    edgernn_hal_exit(0);
    return 0;
}
"""


def run_qemu(folder: Path, xq: np.ndarray, record_bytes: int) -> tuple[np.ndarray, list[int]]:
    """The step records of the qemu_riscv32 build and each step's retired instructions."""
    import subprocess

    from edgernn.backend import generate_firmware
    from edgernn.resources import templates_dir
    from edgernn.targets.board import load_board
    from edgernn.targets.compile import Part, compile_firmware

    board = load_board("qemu_riscv32")
    generate_firmware(folder, board)
    work = folder / "rv32"
    work.mkdir(exist_ok=True)
    ctype = {np.dtype(np.int8): "int8_t", np.dtype(np.int16): "int16_t", np.dtype(np.float32): "float"}[xq.dtype]
    flat = xq.reshape(xq.shape[0], -1)
    rows = ",\n".join("{" + ", ".join(repr(float(v)) + "f" if ctype == "float" else str(int(v)) for v in r) + "}"
                      for r in flat)
    (work / "frames.h").write_text(f"#define N_FRAMES {flat.shape[0]}\n"
                                   f"static const {ctype} frames[N_FRAMES][{flat.shape[1]}] = {{\n{rows}\n}};\n")
    (work / "driver.c").write_text(RV32_DRIVER.replace("#include <stdio.h>", "#include <stdio.h>\n#include <string.h>"))
    res = compile_firmware(folder / "firmware", board, part=Part.MODEL,
                           extra_sources=[work / "driver.c", templates_dir() / "targets" / "native" / "hal" / "qemu_riscv32" / "hal.c"],
                           build_dir=work / "build", output_name="driver.elf", cflags=[f"-I{work}"],
                           compilers=[board["toolchain"]["cc"]])
    cmd = [a.replace("{elf}", str(res.elf)) for a in board["emulator"]["command"]] + ["-serial", "stdio"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert lines and lines[-1].strip() == "~~~DONE~~~", proc.stdout[-2000:] + proc.stderr[-2000:]
    records, instr = [], []
    for ln in lines[:-1]:
        hexes, count = ln.split()
        records.append(np.frombuffer(bytes.fromhex(hexes), dtype=np.uint8))
        instr.append(int(count))
    got = np.stack(records)
    assert got.shape == (xq.shape[0], record_bytes)
    return got, instr
