"""Stage 7, the pipeline: the stages joined into the commands: ``convert`` (Keras to a step or fused model folder),
``build`` (convert, generate C, compile for a board) and ``inspect``.
"""
