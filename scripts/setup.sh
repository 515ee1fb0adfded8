#!/usr/bin/env bash
# Installs what edgernn and its tests need on a fresh Debian machine, then edgernn itself with its test
# dependencies. Every system package is named here, and checked by package rather than by command: a
# command can be present while a part of its package family that only a recommendation brings is not
# (clang without its libFuzzer and sanitizer runtimes, for example).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
    gcc g++ make                      # host board, backend tests, the GAP SDK's make rules
    clang libclang-rt-dev             # clang builds; libclang-rt-dev: libFuzzer, ASan and UBSan runtimes
    valgrind                          # instruction counts in bench/ (callgrind)
    gcc-riscv64-unknown-elf           # qemu_riscv32 and the GAP8 firmware (through the GAP SDK's rules)
    picolibc-riscv64-unknown-elf      # the C library of the qemu_riscv32 firmware
    qemu-system-misc                  # qemu-system-riscv32
    gcc-arm-none-eabi                 # qemu_stm32f405 and crazyflie: the Cortex-M4F firmware
    libnewlib-arm-none-eabi           # the Crazyflie firmware's C library (nano.specs), and TFLite Micro's
    libstdc++-arm-none-eabi-newlib    # TFLite Micro (C++), built by bench/bench_tflm.py
    qemu-system-arm                   # qemu-system-arm -M netduinoplus2 (the STM32F405)
    rsync scons cmake zlib1g-dev      # building GVSOC, the GAP8 simulator, from the GAP SDK
    git                               # edgernn setup gvsoc --fetch: upstream gap_sdk, sparse and shallow
    ccache                            # GAP8 builds: every project compiles the same PMSIS/FreeRTOS sources
    chromium                          # the test that renders validate's report.html headless
)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        apt-get install -y -q --no-install-recommends "${missing[@]}"
    else
        echo "setup: missing ${missing[*]}; install them with: sudo apt-get install --no-install-recommends ${missing[*]}" >&2
    fi
fi

python3 -m pip install -q --upgrade pip >/dev/null 2>&1 || true
python3 -m pip install -q -e ".[dev]"
# cflib's CPX module (Bitcraze's Crazyflie library): the framing tests/link/test_cpx.py holds edgernn's WiFi link to.
# Without its dependencies: their pins (packaging~=25, ...) would move what TensorFlow's stack installed, and
# cflib.cpx imports none of them.
python3 -m pip install -q --no-deps "cflib==0.1.34"

# With a GAP SDK named, build its GVSOC (the gvsoc_gap8 board) into edgernn's cache now, once, ending
# with its UART self-test: a cache hit takes a second, a first build 4 to 7 minutes on 2 cores.
if [ -n "${GAP_SDK_HOME:-}" ]; then
    python3 -m edgernn.targets.gap8.sdk
fi

# GreenWaves' NNTool, where it lies beside the repo (../shared/nntool): its own venv for the NNTool tests
if [ -d "${EDGERNN_NNTOOL_HOME:-../shared/nntool}/nntool" ]; then
    bash scripts/setup_nntool.sh
fi
