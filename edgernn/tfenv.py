"""Lazy, quiet access to TensorFlow and the two Keras flavours.

TensorFlow takes seconds to import and logs from C++ straight to file descriptor 2. Commands that do
not convert (``--help``, ``validate``, ``boards``) never come here.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import warnings


def _quiet_env() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def tensorflow():
    _quiet_env()
    with warnings.catch_warnings(), native_stderr_captured():
        warnings.simplefilter("ignore")
        import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    try:
        import absl.logging

        absl.logging.set_verbosity(absl.logging.ERROR)
    except ImportError:
        pass
    return tf


def keras3():
    tensorflow()
    import keras

    return keras


def tf_keras():
    tensorflow()
    try:
        import tf_keras as legacy
    except ImportError:
        return None
    return legacy


def versions() -> dict[str, str]:
    """Versions of the tools that shaped a conversion, for manifests and banners."""
    from importlib import metadata

    found = {}
    for dist in ("tensorflow", "keras", "tf-keras", "ncps", "ai-edge-litert"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return found


@contextlib.contextmanager
def native_stderr_captured():
    """Send what TensorFlow writes to fds 1 and 2 into a buffer; show it only if asked.

    The TFLite converter writes pages of MLIR diagnostics to fd 2 even on success. A user sees them
    only with ``--verbose`` (EDGERNN_VERBOSE=1).
    """
    if os.environ.get("EDGERNN_VERBOSE") == "1":
        yield
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = {fd: os.dup(fd) for fd in (1, 2)}
    except OSError:
        yield
        return
    with tempfile.TemporaryFile() as sink:
        for fd in saved:
            os.dup2(sink.fileno(), fd)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
