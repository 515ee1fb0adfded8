"""Stage 1, Keras: load a model, decompose it into layers, build the float step model or the fused
LSTM model, and the float reference the device is compared with.
"""
