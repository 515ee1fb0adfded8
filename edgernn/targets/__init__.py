"""Stage 4, targets: board files, the one compile path, devices (start, flash, stop), the GAP SDK
and GVSOC.
"""
