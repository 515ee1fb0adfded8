"""The GAP8 family: the Bitcraze AI-deck (``ai_deck``) and the same project in GVSOC (``gvsoc_gap8``).

Everything only this family needs is in this room:

    adapter.py         the family's verbs for ai_deck: a GAP SDK project, built by the SDK's make, flashed
    gvsoc_adapter.py   the same verbs for gvsoc_gap8: that project run in GreenWaves' simulator
    sdk.py             the user's GAP SDK: a corrected copy in edgernn's cache, GVSOC built from it
    sdk_fixes.py       the corrections applied to that copy (templates/targets/gap8/sdk/overrides beside it)
    toolchain.py       which riscv compiler builds a deck project, through edgernn's wrapper
    gvsoc.py           GVSOC runs: the flash image, the configuration, the UART on a TCP port
    gvsoc_install.py   the cache entry of one GVSOC build
    gvsoc_check.py     the UART self-test that ends every GVSOC build
    gvsoc_trace.py     GVSOC's instruction trace, for ``validate --profile``
    hwloop_check.py    the Xpulp hardware-loop rules that GVSOC does not check, held over the built ELF
    nntool.py          the step model handed to GreenWaves' NNTool, for a second opinion
    nntool_graph.py    NNTool's graph, read back

Its C is in templates/targets/gap8/ (HAL, kernels, SDK corrections, the toolchain wrapper), its boards in
boards/ai_deck.toml and boards/gvsoc_gap8.toml, its manual in docs/boards/ai_deck.md.
"""


def adapters():
    """The family's adapters, for edgernn.targets.device's registry."""
    from edgernn.targets.gap8.adapter import Gap8Adapter
    from edgernn.targets.gap8.gvsoc_adapter import GvsocGap8Adapter

    return (Gap8Adapter, GvsocGap8Adapter)
