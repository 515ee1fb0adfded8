#!/usr/bin/env bash
# Set up (see setup.sh), then the main job on the emulated RISC-V board: train the sine LSTM example,
# build int8 firmware for qemu_riscv32 (a real RV32IMC ELF), and validate it step by step over its UART
# against the TFLite interpreter (exact bytes) and the float Keras model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
work=${EDGERNN_DEMO_DIR:-_work/demo}
mkdir -p "$work"
python3 examples/sine_lstm/train.py --out "$work"
edgernn inspect "$work/sine_lstm.keras"
edgernn build "$work/sine_lstm.keras" --board qemu_riscv32 --quant int8 --calib "$work/calib.npy" -o "$work/out"
edgernn validate "$work/out" --data "$work/test.npy" --json "$work/report.json"
echo "demo: firmware in $work/out/firmware, report in $work/report.html and $work/report.json"
