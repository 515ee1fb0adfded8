#!/usr/bin/env bash
# Set up (see setup.sh), then the main job on an example: train a small sine LSTM, inspect it and convert it
# to an int8 single-step model calibrated on real trajectories.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
work=${EDGERNN_DEMO_DIR:-_work/demo}
mkdir -p "$work"
python3 examples/sine_lstm/train.py --out "$work"
edgernn inspect "$work/sine_lstm.keras"
edgernn convert "$work/sine_lstm.keras" --quant int8 --calib "$work/calib.npy" -o "$work/out"
echo "demo: step model and manifest in $work/out"
