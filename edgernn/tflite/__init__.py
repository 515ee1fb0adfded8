"""Stage 3, TFLite: the flatbuffer's contents, the LiteRT interpreter, quantization, and the
interpreter reference (the oracle) that the C must reproduce byte for byte.
"""
