"""The one error type that reaches the user: a single line, no traceback."""


class EdgeRNNError(Exception):
    """A user-facing failure. ``str(err)`` is the whole message, one line."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class UnsupportedLayerError(EdgeRNNError):
    """A layer that cannot run one step at a time."""


class LinkError(EdgeRNNError):
    """A fault on the serial link or on the device behind it."""

    exit_code = 3


class NoAnswerError(LinkError):
    """The device gave no valid answer to a request, every attempt included (silent, or every answer
    corrupt); a LinkError like any other to the user."""


class DeviceInitError(LinkError):
    """The firmware's edgernn_init() failed: it said so on the link (protocol.INIT_FAILED) before it stopped.
    A device fault, exit code 3, like every LinkError."""
