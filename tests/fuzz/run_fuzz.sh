#!/bin/sh
# Fuzz the device-side frame parser with libFuzzer, ASan and UBSan.
# Usage: tests/fuzz/run_fuzz.sh [RUNS]   (default 1000000 executions). Needs clang with libFuzzer
# (Debian: clang + libclang-rt-dev for the fuzzer runtime).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RUNS=${1:-1000000}
WORK=${FUZZ_WORK:-$(mktemp -d)}
mkdir -p "$WORK/corpus"
# A small frame limit reaches the overflow path with short inputs.
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -DEDGERNN_LINK_MAX_FRAME=300 -I"$ROOT/templates/firmware" \
    "$HERE/fuzz_frame_parser.c" "$ROOT/templates/firmware/protocol.c" -o "$WORK/fuzz_frame_parser"
python3 "$HERE/seed_corpus.py" "$WORK/corpus"
"$WORK/fuzz_frame_parser" -runs="$RUNS" -max_len=1024 -print_final_stats=1 "$WORK/corpus" 2>&1 | tail -n 25
