"""The front ends people put before a recurrent cell, as small seeded Keras models: a per-frame CNN
(TimeDistributed) feeding a CfC on an AutoNCP wiring, and a causal dilated Conv1D stack (a TCN) feeding a GRU.
With their data: frames of a moving blob, and the smooth trajectories of zoo.py."""

from __future__ import annotations

import numpy as np


def moving_blobs(n_seq: int, steps: int, h: int, w: int, c: int = 1, seed: int = 0) -> np.ndarray:
    """(n_seq, steps, h, w, c) frames in [0, 1]: a Gaussian blob drifting and bouncing off the edges, plus noise."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    out = np.empty((n_seq, steps, h, w, c), np.float32)
    for s in range(n_seq):
        pos = rng.uniform([1, 1], [h - 2, w - 2])
        vel = rng.uniform(-0.8, 0.8, size=2)
        sigma = rng.uniform(1.0, 2.0)
        for t in range(steps):
            pos = pos + vel
            for axis, size in ((0, h), (1, w)):
                if not 0 <= pos[axis] <= size - 1:
                    vel[axis] = -vel[axis]
                    pos[axis] = np.clip(pos[axis], 0, size - 1)
            blob = np.exp(-((yy - pos[0]) ** 2 + (xx - pos[1]) ** 2) / (2 * sigma**2))
            for ch in range(c):
                out[s, t, :, :, ch] = blob * (1.0 - 0.3 * ch)
    out += 0.05 * rng.standard_normal(out.shape).astype(np.float32)
    return np.clip(out, 0.0, 1.0)


def frame_cfc(h: int = 12, w: int = 12, c: int = 1, seed: int = 0):
    """TimeDistributed Conv2D/DepthwiseConv2D/BatchNormalization/ReLU6/MaxPooling2D, Flatten, Dense, then
    CfC(AutoNCP(12, 2)): the shape of a camera policy on the AI-deck, at a test's size."""
    import keras
    import ncps.keras
    from ncps.wirings import AutoNCP

    keras.utils.set_random_seed(seed)
    L = keras.layers
    TD = L.TimeDistributed
    model = keras.Sequential([
        keras.Input((None, h, w, c)),
        TD(L.Conv2D(4, 3, strides=2, padding="same", activation="relu")),
        TD(L.DepthwiseConv2D(3, padding="same")),
        TD(L.BatchNormalization()),
        TD(L.ReLU(max_value=6.0)),
        TD(L.MaxPooling2D(2)),
        TD(L.Flatten()),
        L.Dense(8, activation="tanh"),
        ncps.keras.CfC(AutoNCP(12, 2, seed=seed), return_sequences=True),
    ], name="frame_cfc")
    _randomize_batchnorm(model, seed)
    return model


def depthwise_stack(h: int = 8, w: int = 8, channels: int = 32, seed: int = 0):
    """TimeDistributed Conv2D 3x3 (same) to ``channels``, then three DepthwiseConv2D 3x3 (same; same under a ReLU;
    stride 2 under a ReLU) and Flatten, with no recurrent layer: each step's output is the last convolution's every
    byte, so a wrong byte of any of the four cannot hide behind a saturated cell. The forms GAP8's depthwise planes
    take with a whole quad of channels on each of 8 cores (32 channels) and rows of a multiple of 4 pixels; the
    first convolution, over one input channel, GAP8's stem kernel (edgernn_conv.c's conv_stem_s8) at stride 1."""
    import keras

    keras.utils.set_random_seed(seed)
    L = keras.layers
    TD = L.TimeDistributed
    return keras.Sequential([
        keras.Input((None, h, w, 1)),
        TD(L.Conv2D(channels, 3, padding="same")),
        TD(L.DepthwiseConv2D(3, padding="same")),
        TD(L.DepthwiseConv2D(3, padding="same", activation="relu")),
        TD(L.DepthwiseConv2D(3, strides=2, padding="same", activation="relu")),
        TD(L.Flatten()),
    ], name="depthwise_stack")


CAMERA = (244, 324, 1)   # height, width, channels: a full AI-deck camera frame (HM01B0), 79,056 int8 bytes


def camera_gru(seed: int = 0):
    """A full camera frame into a tiny front end that keeps runs quick: a strided 3x3 convolution and a 4x4
    pooling bring it to 15x20x2, then Dense(8), GRU(6) and Dense(2)."""
    import keras

    keras.utils.set_random_seed(seed)
    L = keras.layers
    TD = L.TimeDistributed
    return keras.Sequential([
        keras.Input((None, *CAMERA)),
        TD(L.Conv2D(2, 3, strides=4, padding="same", activation="relu")),
        TD(L.MaxPooling2D(4)),
        TD(L.Flatten()),
        L.Dense(8, activation="tanh"),
        L.GRU(6, return_sequences=True),
        L.Dense(2),
    ], name="camera_gru")


# 60x60x1 frames (under the link's 4 KiB frames); a first conv of 10 channels at stride 1 makes the arena
# (two 36,000-byte activations alive at once) larger than L1's budget
L2_FRAME = (60, 60, 1)


def frame_cfc_l2(dense: int = 40, seed: int = 0):
    """frame_cfc's layers at a frame whose activations do not fit L1, with a second, strided
    CONV_2D that reads the arena (bands with a halo, padding at the frame's edges). Dense(40) over the
    1,800 features makes the weights (72 KB) too large for L1 too, so each convolution's filter is copied
    into its tiles by DMA; with Dense(8) they are all copied to L1 at init instead."""
    import keras
    import ncps.keras
    from ncps.wirings import AutoNCP

    keras.utils.set_random_seed(seed)
    L = keras.layers
    TD = L.TimeDistributed
    return keras.Sequential([
        keras.Input((None, *L2_FRAME)),
        TD(L.Conv2D(10, 3, strides=1, padding="same", activation="relu")),
        TD(L.DepthwiseConv2D(3, padding="same")),
        TD(L.ReLU(max_value=6.0)),
        TD(L.MaxPooling2D(2)),
        TD(L.Conv2D(8, 3, strides=2, padding="same", activation="relu")),
        TD(L.Flatten()),
        L.Dense(dense, activation="tanh"),
        ncps.keras.CfC(AutoNCP(12, 2, seed=seed), return_sequences=True),
    ], name="frame_cfc_l2")


def camera_gru_l3(h: int = 24, w: int = 32, units: int = 256, seed: int = 0):
    """A camera CNN + GRU over the AI-deck's 320 KiB L2 budget (~700k int8 weights): a 3x3 convolution of 16
    channels and a 2x2 pooling, whose flatten (3,072 values at 24x32) feeds a Dense(128) (393k weights), then
    GRU(256) (295k: its recurrent matrix, 197k, is the second largest) and Dense(4). Small frames keep a run
    over the simulator's UART short; the weights are those of a real frame's flatten."""
    import keras

    keras.utils.set_random_seed(seed)
    L = keras.layers
    TD = L.TimeDistributed
    return keras.Sequential([
        keras.Input((None, h, w, 1)),
        TD(L.Conv2D(16, 3, padding="same", activation="relu")),
        TD(L.MaxPooling2D(2)),
        TD(L.Flatten()),
        L.Dense(128, activation="relu"),
        L.GRU(units, return_sequences=True),
        L.Dense(4),
    ], name="camera_gru_l3")


def tcn_gru(features: int = 3, seed: int = 0):
    """Two causal Conv1D (kernel 3, dilation 1; kernel 2, dilation 2) before a GRU and a per-step Dense."""
    import keras

    keras.utils.set_random_seed(seed)
    L = keras.layers
    return keras.Sequential([
        keras.Input((None, features)),
        L.Conv1D(8, 3, padding="causal", activation="relu"),
        L.Conv1D(8, 2, padding="causal", dilation_rate=2),
        L.GRU(16, return_sequences=True),
        L.Dense(1),
    ], name="tcn_gru")


# ---------------------------------------------------------------- per-frame models with no recurrent layer

def frame_cnn(h: int = 12, w: int = 12, c: int = 1, outputs: int = 3, form: str = "sequential", seed: int = 0):
    """A small CNN with no recurrent layer: each frame to ``outputs`` values, stateless. ``form``: "sequential"
    or "functional" on (H, W, C) frames, "timedistributed" on (None, H, W, C) sequences of them, "add" (a
    residual block joined by Add) or "concatenate" (two branches joined along the channels), both functional."""
    import keras

    keras.utils.set_random_seed(seed)
    L = keras.layers
    if form == "timedistributed":
        TD = L.TimeDistributed
        return keras.Sequential([
            keras.Input((None, h, w, c)),
            TD(L.Conv2D(4, 3, strides=2, padding="same", activation="relu")),
            TD(L.MaxPooling2D(2)),
            TD(L.Flatten()),
            L.Dense(outputs),
        ], name="frame_cnn_td")
    layers = [L.Conv2D(4, 3, strides=2, padding="same", activation="relu"), L.MaxPooling2D(2), L.Flatten(),
              L.Dense(outputs)]
    if form == "sequential":
        return keras.Sequential([keras.Input((h, w, c)), *layers], name="frame_cnn")
    x = keras.Input((h, w, c))
    z = layers[0](x)
    if form == "add":
        branch = L.Conv2D(4, 3, padding="same", activation="relu")(z)
        branch = L.Conv2D(4, 3, padding="same")(branch)
        z = L.ReLU()(L.Add()([z, branch]))
    elif form == "concatenate":
        z = L.Concatenate()([L.Conv2D(3, 1, activation="relu")(z), L.DepthwiseConv2D(3, padding="same")(z)])
    elif form != "functional":
        raise ValueError(f"unknown form {form!r}")
    for layer in layers[1:]:
        z = layer(z)
    return keras.Model(x, z, name=f"frame_cnn_{form}")


def frame_res_gru(h: int = 12, w: int = 12, c: int = 1, rnn: str = "GRU", seed: int = 0):
    """A recurrent model whose per-frame front end branches: TimeDistributed convolutions with a residual Add and a
    Concatenate of two branches, a pooling and flatten per frame, Dense(8), then a GRU (or LSTM) of 6 and
    Dense(2) at every step."""
    import keras

    keras.utils.set_random_seed(seed)
    L = keras.layers
    TD = L.TimeDistributed
    x = keras.Input((None, h, w, c))
    a = TD(L.Conv2D(4, 3, strides=2, padding="same", activation="relu"))(x)
    z = L.Add()([a, TD(L.Conv2D(4, 3, padding="same"))(a)])
    z = L.Concatenate()([z, TD(L.Conv2D(2, 1))(z)])
    z = L.Dense(8, activation="tanh")(TD(L.Flatten())(TD(L.MaxPooling2D(2))(z)))
    z = getattr(L, rnn)(6, return_sequences=True)(z)
    return keras.Model(x, L.Dense(2)(z), name=f"frame_res_{rnn.lower()}")


def frame_cnn_onnx(path, h: int = 12, w: int = 12, seed: int = 0):
    """A torch residual CNN on (1, 1, h, w) images exported to ``path`` (.onnx): a stride-2 convolution of padding
    1 with BatchNorm and ReLU, a residual block joined by an Add, a 1x1 and a depthwise branch joined by a Concat
    along the channels, a max-pool, a flatten in torch's (C, H, W) order and a Linear to 2 outputs."""
    import torch
    import torch.nn as nn

    torch.manual_seed(seed)

    class FrameCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem, self.bn = nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.BatchNorm2d(4)
            self.conv1, self.conv2 = nn.Conv2d(4, 4, 3, padding=1), nn.Conv2d(4, 4, 3, padding=1)
            self.pointwise, self.depthwise = nn.Conv2d(4, 2, 1), nn.Conv2d(4, 4, 3, padding=1, groups=4)
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(6 * (h // 4) * (w // 4), 2)

        def forward(self, x):
            z = torch.relu(self.bn(self.stem(x)))
            z = torch.relu(z + self.conv2(torch.relu(self.conv1(z))))
            z = torch.cat([self.pointwise(z), self.depthwise(z)], 1)
            return self.fc(torch.flatten(self.pool(z), 1))

    module = FrameCNN()
    with torch.no_grad():   # trained statistics, so that the batch norm is not the identity
        module.bn.running_mean.uniform_(-0.2, 0.2)
        module.bn.running_var.uniform_(0.5, 2.0)
    module.eval()
    torch.onnx.export(module, torch.zeros(1, 1, h, w), str(path), dynamo=False, input_names=["x"],
                      output_names=["y"])
    return path


DRONET_FRAME = (200, 200, 1)


# PULP-Dronet's widths (stem, then the three residual blocks), and a quarter of them. The full widths fit the
# AI-deck with the stem fused with its pool and the largest filters streamed from L3 (docs/boards/ai_deck.md, "A
# camera CNN beyond L2"); the quarter fits L2 with neither
DRONET_WIDTHS = (32, 32, 64, 128)
DRONET_WIDTHS_L2 = (8, 16, 32, 64)


def dronet_class(widths: tuple[int, int, int, int] = DRONET_WIDTHS, seed: int = 0):
    """A PULP-Dronet-class CNN (Palossi et al., "A 64mW DNN-based Visual Navigation Engine for Autonomous
    Nano-Drones", 2019): a 200x200x1 frame, a 5x5 stride-2 stem of 32 channels and a 3x3 stride-2 max-pool,
    three ResNet-8 residual blocks (conv3x3 s2 -> BN -> ReLU -> conv3x3, a 1x1 s2 convolution as shortcut,
    joined by Add, then ReLU) of 32, 64 and 128 channels, and a Dense(2) on the flattened 7x7x128 (steering,
    collision): about 0.32 M parameters and 41 M MACs a frame at PULP-Dronet's widths (DRONET_WIDTHS); about
    82 k and 8 M at DRONET_WIDTHS_L2."""
    import keras

    keras.utils.set_random_seed(seed)
    L = keras.layers
    x = keras.Input(DRONET_FRAME)
    z = L.Conv2D(widths[0], 5, strides=2, padding="same", name="stem")(x)
    z = L.MaxPooling2D(3, strides=2, padding="same", name="stem_pool")(z)
    for i, channels in enumerate(widths[1:], start=1):
        branch = L.Conv2D(channels, 3, strides=2, padding="same", name=f"block{i}_conv1")(z)
        branch = L.BatchNormalization(name=f"block{i}_bn")(branch)
        branch = L.ReLU(name=f"block{i}_relu1")(branch)
        branch = L.Conv2D(channels, 3, padding="same", name=f"block{i}_conv2")(branch)
        shortcut = L.Conv2D(channels, 1, strides=2, padding="same", name=f"block{i}_shortcut")(z)
        z = L.ReLU(name=f"block{i}_out")(L.Add(name=f"block{i}_add")([shortcut, branch]))
    y = L.Dense(2, name="steer_collision")(L.Flatten()(z))
    model = keras.Model(x, y, name="dronet_class")
    _randomize_batchnorm(model, seed)
    return model


def _randomize_batchnorm(model, seed: int) -> None:
    """Trained statistics, not the identity a fresh BatchNormalization is, so that folding it is tested."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        inner = getattr(layer, "layer", layer)
        if type(inner).__name__ == "BatchNormalization":
            gamma, beta, mean, var = inner.get_weights()
            inner.set_weights([rng.uniform(0.5, 1.5, gamma.shape).astype(np.float32),
                               rng.uniform(-0.2, 0.2, beta.shape).astype(np.float32),
                               rng.uniform(-0.2, 0.2, mean.shape).astype(np.float32),
                               rng.uniform(0.5, 2.0, var.shape).astype(np.float32)])


def camera_frames(n_seq: int, frames: int, seed: int = 0) -> np.ndarray:
    """(n_seq, frames, 244, 324) uint8, as the AI-deck's Himax gives them: a textured background, sensor noise,
    and a bright blob that moves from frame to frame (so a model's state has something to follow)."""
    rng = np.random.default_rng(seed)
    h, w = 244, 324
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    out = np.empty((n_seq, frames, h, w), np.uint8)
    for s in range(n_seq):
        background = 60 + 40 * np.sin(xx / rng.uniform(9, 25)) * np.cos(yy / rng.uniform(9, 25))
        pos, vel = rng.uniform([40, 40], [h - 40, w - 40]), rng.uniform(-12, 12, size=2)
        for t in range(frames):
            pos = np.clip(pos + vel, 0, [h - 1, w - 1])
            blob = 150 * np.exp(-((yy - pos[0]) ** 2 + (xx - pos[1]) ** 2) / (2 * 18.0 ** 2))
            noise = rng.normal(0, 6, (h, w))
            out[s, t] = np.clip(background + blob + noise, 0, 255).astype(np.uint8)
    return out


def camera_cnn_gru_head(seed: int = 0):
    """A camera CNN + GRU on a 48x64 gray frame (the Himax's frame reduced by 5), the GRU's last state through a
    Dense(3) head: in the camera application the head runs after every frame."""
    import keras

    keras.utils.set_random_seed(seed)
    L, TD = keras.layers, keras.layers.TimeDistributed
    return keras.Sequential([
        keras.Input((None, 48, 64, 1)),
        TD(L.Conv2D(6, 3, strides=2, padding="same", activation="relu")),
        TD(L.MaxPooling2D(2)),
        TD(L.Conv2D(8, 3, strides=2, padding="same", activation="relu")),
        TD(L.Flatten()),
        L.Dense(12, activation="tanh"),
        L.GRU(8),
        L.Dense(3),
    ], name="camera_cnn_gru_head")


def camera_residual_cnn(seed: int = 0):
    """A stateless per-frame CNN on a 36x40 gray frame with a residual join (Add), 2 outputs."""
    import keras

    keras.utils.set_random_seed(seed)
    L = keras.layers
    x = keras.Input((36, 40, 1))
    a = L.Conv2D(4, 3, strides=2, padding="same", activation="relu")(x)
    b = L.Conv2D(4, 3, padding="same", activation="relu")(a)
    y = L.Flatten()(L.MaxPooling2D(2)(L.Add()([a, b])))
    return keras.Model(x, L.Dense(2)(y), name="camera_residual_cnn")
