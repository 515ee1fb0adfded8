#!/usr/bin/env bash
# Installs what edgernn needs on a fresh Debian machine: the RISC-V toolchain, QEMU and clang from Debian
# (when run as root and missing), then edgernn itself with its test dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v riscv64-unknown-elf-gcc >/dev/null || need+=(gcc-riscv64-unknown-elf)
[ -e /usr/lib/picolibc/riscv64-unknown-elf/picolibc.specs ] || ls /usr/lib/picolibc/riscv64-unknown-elf/*.specs >/dev/null 2>&1 || need+=(picolibc-riscv64-unknown-elf)
command -v qemu-system-riscv32 >/dev/null || need+=(qemu-system-misc)
command -v clang >/dev/null || need+=(clang)
command -v gcc >/dev/null || need+=(gcc)
command -v valgrind >/dev/null || need+=(valgrind)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        apt-get install -y -q --no-install-recommends "${need[@]}"
    else
        echo "setup: missing ${need[*]}; install them with: sudo apt-get install ${need[*]}" >&2
    fi
fi

python3 -m pip install -q --upgrade pip >/dev/null 2>&1 || true
python3 -m pip install -q -e ".[dev]"
