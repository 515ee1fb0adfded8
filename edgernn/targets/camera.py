"""The camera application's preprocessing (``edgernn build --app camera``): how a camera frame becomes the model's
input, planned once at build time, and its host twin, which gives the very bytes the device computes.

A frame is what the AI-deck's Himax HM01B0 gives through the GAP8's CPI: 244 rows of 324 8-bit gray pixels. The
device (templates/targets/gap8/app/main.c):

1. reduces it by an integer ``factor``: each reduced pixel is the rounded mean of a factor x factor block,
   ``(sum + area // 2) // area`` (area = factor**2), a value 0..255;
2. takes a window of the model's input size from the reduced image, its top-left corner at ``crop`` (x, y) in
   reduced pixels;
3. maps each reduced pixel ``m`` to the model's input through a table of 256 entries: ``m * scale + offset``,
   quantized with the model's input scale and zero point (int8, int16), or as float32.

With no option, ``factor`` is the largest that fits the model's input in the frame, the window is centred, and
the units are pixel/255 (``scale`` 1/255, ``offset`` 0). The device divides by ``area`` with a multiply and a
shift, which ``mean_reciprocal`` proves equal to the division for every sum a block can have.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from edgernn.errors import EdgeRNNError

SENSOR_HEIGHT, SENSOR_WIDTH = 244, 324      # the HM01B0's QVGA frame as the GAP8's CPI gives it
SENSOR = (SENSOR_HEIGHT, SENSOR_WIDTH)
TABLE_DTYPES = {"int8": np.int8, "int16": np.int16, "float32": np.float32}


@dataclass(frozen=True)
class AppOptions:
    """What ``edgernn build --app`` was given: the application, its preprocessing options (None: the default, see
    ``plan_preprocess``), and whether the outputs also go to the WiFi host."""

    kind: str = "camera"
    factor: int | None = None
    crop: tuple[int, int] | None = None
    scale: float | None = None
    offset: float | None = None
    wifi: bool = False


@dataclass(frozen=True)
class Preprocess:
    """The preprocessing of one build: the model's input (height, width), the integer factor, the window's
    top-left corner in reduced pixels (crop_x, crop_y), and the units (value = mean * scale + offset)."""

    height: int
    width: int
    factor: int
    crop_x: int
    crop_y: int
    scale: float
    offset: float

    @property
    def origin(self) -> tuple[int, int]:
        """The window's top-left corner in sensor pixels: (x, y)."""
        return self.crop_x * self.factor, self.crop_y * self.factor

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Preprocess":
        try:
            pre = cls(**{k: data[k] for k in cls.__dataclass_fields__})
        except (KeyError, TypeError) as exc:
            raise EdgeRNNError(f"the manifest's app.preprocess is incomplete ({exc}): rebuild with edgernn build") from None
        (x0, y0), f = pre.origin, pre.factor
        if min(pre.height, pre.width, f) < 1 or min(x0, y0) < 0 or y0 + pre.height * f > SENSOR_HEIGHT \
                or x0 + pre.width * f > SENSOR_WIDTH:
            raise EdgeRNNError(f"the manifest's app.preprocess ({data}) leaves the camera's frame: rebuild with edgernn "
                               "build")
        return pre


def image_input(shape) -> tuple[int, int]:
    """The (height, width) of a model input that a gray camera frame can feed: (H, W) or (H, W, 1), after the
    batch and time dimensions; one line for any other."""
    dims = [int(d) for d in shape]
    if len(dims) == 3 and dims[2] == 1:
        dims = dims[:2]
    if len(dims) != 2 or min(dims) < 1:
        raise EdgeRNNError(f"the camera application feeds a gray image of (height, width, 1) to the model; this "
                           f"model's input is {tuple(int(d) for d in shape)}")
    return dims[0], dims[1]


def plan_preprocess(shape, *, factor: int | None = None, crop: tuple[int, int] | None = None,
                    scale: float | None = None, offset: float | None = None) -> Preprocess:
    """The preprocessing of a model whose per-frame input has ``shape`` (H, W[, 1]), with the user's options
    (``None``: the default). One line for options that do not fit the frame."""
    height, width = image_input(shape)
    largest = min(SENSOR_HEIGHT // height, SENSOR_WIDTH // width)
    if largest < 1:
        raise EdgeRNNError(f"the model's input ({height} x {width}) is larger than the camera's frame "
                           f"({SENSOR_HEIGHT} x {SENSOR_WIDTH})")
    if factor is None:
        factor = largest
    if factor < 1 or factor > largest:
        raise EdgeRNNError(f"--pre-factor {factor}: the frame reduced by {factor} no longer holds the model's "
                           f"{height} x {width} input (factors that fit: 1 to {largest})")
    rows, cols = SENSOR_HEIGHT // factor, SENSOR_WIDTH // factor
    if crop is None:
        crop = ((cols - width) // 2, (rows - height) // 2)
    cx, cy = (int(v) for v in crop)
    if not (0 <= cx <= cols - width and 0 <= cy <= rows - height):
        raise EdgeRNNError(f"--pre-crop {cx},{cy}: a {width} x {height} window there leaves the reduced frame "
                           f"({cols} x {rows} at factor {factor}); x goes 0..{cols - width}, y 0..{rows - height}")
    scale = 1.0 / 255.0 if scale is None else float(scale)
    offset = 0.0 if offset is None else float(offset)
    if not (np.isfinite(scale) and np.isfinite(offset)) or scale == 0.0:
        raise EdgeRNNError(f"--pre-scale {scale} --pre-offset {offset}: the scale must be a finite nonzero number "
                           "and the offset finite")
    return Preprocess(height, width, int(factor), cx, cy, scale, offset)


def mean_reciprocal(factor: int) -> tuple[int, int]:
    """(mul, shift) such that ``(s * mul) >> shift == s // factor**2`` for every s in 0 .. 255 * area + area // 2
    (the rounded sums of a block), with ``s * mul`` below 2**32: checked for every s."""
    area = factor * factor
    if area == 1:
        return 1, 0
    top = 255 * area + area // 2
    sums = np.arange(top + 1, dtype=np.uint64)
    for shift in range(1, 32):
        mul = -(-(1 << shift) // area)      # ceil(2**shift / area)
        if top * mul >= 1 << 32:
            break
        if np.array_equal((sums * np.uint64(mul)) >> np.uint64(shift), sums // np.uint64(area)):
            return mul, shift
    raise EdgeRNNError(f"--pre-factor {factor}: no 32-bit reciprocal of {area} is exact over a block's sums")


def check_frames(frames: np.ndarray, what: str = "the data") -> np.ndarray:
    """Camera frames as the app's validation takes them: (sequences, frames, 244, 324) uint8."""
    frames = np.asarray(frames)
    if frames.ndim == 5 and frames.shape[-1] == 1:
        frames = frames[..., 0]             # (sequences, frames, 244, 324, 1): the same frames with a channel
    if frames.dtype != np.uint8 or frames.ndim != 4 or tuple(frames.shape[2:]) != SENSOR:
        raise EdgeRNNError(f"{what} must be camera frames, (sequences, frames, {SENSOR_HEIGHT}, {SENSOR_WIDTH}) uint8 "
                           f"as the Himax gives them; got {frames.shape} {frames.dtype}")
    if frames.shape[0] < 1 or frames.shape[1] < 1:
        raise EdgeRNNError(f"{what} holds no frame (shape {frames.shape})")
    return frames


def block_means(frames: np.ndarray, pre: Preprocess) -> np.ndarray:
    """The reduced window of frames (..., 244, 324) uint8: (..., height, width) uint8, each the rounded mean of
    its block, as the device computes it."""
    f, (x0, y0) = pre.factor, pre.origin
    window = frames[..., y0:y0 + pre.height * f, x0:x0 + pre.width * f].astype(np.uint32)
    blocks = window.reshape(*frames.shape[:-2], pre.height, f, pre.width, f)
    area = f * f
    return ((blocks.sum(axis=(-3, -1)) + area // 2) // area).astype(np.uint8)


def input_table(pre: Preprocess, entry: dict) -> np.ndarray:
    """The 256 model inputs a reduced pixel value maps to, in the input's dtype (``entry``: the manifest's input,
    with its dtype, scale and zero point)."""
    from edgernn.tflite.oracle import quantize

    dtype = entry["dtype"]
    if dtype not in TABLE_DTYPES:
        raise EdgeRNNError(f"the camera application feeds int8, int16 or float32 inputs; this model's is {dtype}")
    values = np.arange(256, dtype=np.float64) * pre.scale + pre.offset
    return quantize(values.astype(np.float32) if dtype == "float32" else values, entry)


def float_inputs(frames: np.ndarray, pre: Preprocess) -> np.ndarray:
    """The float model's input for frames: (..., height, width, 1) float32, mean * scale + offset."""
    means = block_means(frames, pre).astype(np.float64)
    return (means * pre.scale + pre.offset).astype(np.float32)[..., None]


def model_inputs(frames: np.ndarray, pre: Preprocess, entry: dict) -> np.ndarray:
    """The bytes the device feeds its model: (..., height, width, 1) in the input's dtype."""
    return input_table(pre, entry)[block_means(frames, pre)][..., None]
