"""Stage 6, targets: board files, the one compile path, the verbs every board family has, and one room
a family (``native/``, ``gap8/``: its adapters and everything only it needs; its C in
templates/targets/<family>/).
"""
