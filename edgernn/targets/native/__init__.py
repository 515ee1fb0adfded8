"""The native family: ``host`` (the firmware as a process of this machine) and ``qemu_riscv32`` (bare-metal
RV32 in QEMU). edgernn compiles the firmware itself (edgernn.targets.compile), and the board runs it on a pty
or in an emulator whose UART is a TCP port.

    adapter.py    the family's verbs

Its C is in templates/targets/native/ (one HAL a board), its boards in boards/host.toml and
boards/qemu_riscv32.toml.
"""


def adapters():
    """The family's adapters, for edgernn.targets.device's registry."""
    from edgernn.targets.native.adapter import NativeAdapter

    return (NativeAdapter,)
