"""The STM32 family: the Crazyflie's MCU, an STM32F405 (Cortex-M4F). ``qemu_stm32f405`` is the chip bare metal
in QEMU's netduinoplus2 machine, which edgernn compiles and validates like qemu_riscv32; ``crazyflie`` is the
real Crazyflie 2.x, the model in an app of Bitcraze's firmware, compiled with the same flags.

    adapter.py       the family's verbs
    crazyflie.py     the verbs of ``crazyflie``: an out-of-tree app of the Crazyflie firmware, its cf2 image
    insn_plugin.py   the TCG plugin that counts the instructions QEMU runs (its C: templates/targets/stm32/qemu_plugin/)
    receiver.py      the Crazyflie app that receives the AI-deck camera application's outputs (write_receiver,
                     build_receiver; its C: templates/targets/stm32/receiver/), for ``--app camera``

Its C is in templates/targets/stm32/ (the HAL with its start-up and linker script, one folder a board), its
boards in boards/qemu_stm32f405.toml and boards/crazyflie.toml, its manual in docs/boards/stm32.md.
"""


def adapters():
    """The family's adapters, for edgernn.targets.device's registry."""
    from edgernn.targets.stm32.adapter import Stm32Adapter
    from edgernn.targets.stm32.crazyflie import CrazyflieAdapter

    return (Stm32Adapter, CrazyflieAdapter)
