"""The deck application (``edgernn build MODEL --board ai_deck|gvsoc_gap8 --app camera``): the validation server's
project turned into the firmware a deck owner flies. The camera feeds the model frame after frame, and each frame's
outputs go to the Crazyflie's STM32 as CPX APP packets (and to the WiFi host with ``--app-wifi``, always on the
emulated board, whose host is ``edgernn validate``).

``write_camera_app`` rewrites OUT/firmware/ after the model's C is generated: the application's main.c
(templates/targets/gap8/app/) in place of the server's, its settings in app_config.h (the preprocessing planned by
edgernn.targets.camera, its table, the frame buffers L2 has room for), and without the server's sources. The
transport is link_cpx.c's, which the board's EDGERNN_APP_CAMERA define compiles in.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgernn.errors import EdgeRNNError
from edgernn.link import appmsg
from edgernn.targets import camera

FRAME_BYTES = camera.SENSOR_HEIGHT * camera.SENSOR_WIDTH
SERVER_FILES = ("server.c", "server.h", "protocol.c")     # the validation server's, which the app does not have
RECEIVER_DIR = "crazyflie_app"                              # OUT/crazyflie_app/: the Crazyflie's side


def app_outputs(manifest) -> dict:
    """The tensor entry of what the application sends each frame: the head's output when the model has a head (run
    after every step), else the step's output."""
    return (manifest.head or {}).get("output") or manifest.outputs[0]


def _l2_room(placement: dict | None) -> int | None:
    """The bytes of L2's budget the model leaves free (None: no placement to say)."""
    if not placement:
        return None
    budget = placement.get("budgets", {}).get("l2")
    if budget is None:
        return None
    used = sum(v["bytes"] for v in placement.get("items", {}).values() if v["memory"] == "l2")
    return budget - used


def frame_buffers(placement: dict | None, input_bytes: int, buffer_bytes: int = FRAME_BYTES) -> int:
    """2 frame buffers of ``buffer_bytes`` (the window's rows of a frame) where L2 has room for them beside the
    model, else 1; one line when not even one fits."""
    room = _l2_room(placement)
    if room is None:
        return 2
    for n in (2, 1):
        if n * buffer_bytes + input_bytes <= room:
            return n
    raise EdgeRNNError(f"the camera application needs a {buffer_bytes}-byte frame buffer (the window's rows) and "
                       f"the model's {input_bytes}-byte input in L2; the model leaves {max(room, 0)} B of L2's budget")


def _message_format() -> dict:
    """The message's constants and field offsets for app_config.h, from its one definition (edgernn.link.appmsg)."""
    return {"magic": appmsg.MAGIC, "version": appmsg.VERSION, "flag_overlap": appmsg.FLAG_OVERLAP,
            "header_bytes": appmsg.HEADER_BYTES, "part_bytes": appmsg.PART_BYTES, "offsets": appmsg.OFFSETS}


def _c_values(table: np.ndarray) -> list[str]:
    if table.dtype == np.float32:
        return [np.format_float_scientific(v, unique=True) + "f" for v in table]
    return [str(int(v)) for v in table]


def write_camera_app(out_dir: Path, manifest, options: camera.AppOptions, board, placement: dict | None) -> dict:
    """Turn OUT/firmware/ into the camera application; returns the manifest's ``app`` record."""
    import jinja2

    from edgernn._version import __version__
    from edgernn.resources import templates_dir

    x_entry = manifest.inputs[0]
    pre = camera.plan_preprocess(x_entry["shape"][1:],
                                 factor=options.factor, crop=options.crop, scale=options.scale,
                                 offset=options.offset)
    table = camera.input_table(pre, x_entry)
    mul, shift = camera.mean_reciprocal(pre.factor)
    y_entry = app_outputs(manifest)
    try:
        out_dtype = appmsg.Dtype.named(y_entry["dtype"])
    except ValueError:
        raise EdgeRNNError(f"the camera application sends int8, int16 or float32 outputs; this model's are "
                           f"{y_entry['dtype']}") from None
    input_bytes = pre.height * pre.width * table.itemsize
    buffer_bytes = pre.height * pre.factor * camera.SENSOR_WIDTH
    buffers = frame_buffers(placement, input_bytes, buffer_bytes)
    wait_host = bool(board.emulated)
    wifi = bool(options.wifi or board.emulated)
    fw = Path(out_dir) / "firmware"
    app_dir = templates_dir() / "targets" / "gap8" / "app"
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(app_dir)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    text = env.get_template("app_config.h.j2").render(
        version=__version__, sha256=manifest.model_sha256, pre=pre, origin=pre.origin, mean_mul=mul,
        mean_shift=shift, frame_buffers=buffers, out_dtype_code=int(out_dtype), msg=_message_format(), wifi=wifi,
        wait_host=wait_host, input_dtype=x_entry["dtype"], table=_c_values(table))
    (fw / "app_config.h").write_text(text)
    (fw / "main.c").write_text((app_dir / "main.c").read_text())
    for name in SERVER_FILES:
        (fw / name).unlink(missing_ok=True)
    n_out = int(np.prod(y_entry["shape"][1:])) if len(y_entry["shape"]) > 1 else int(y_entry["shape"][0])
    write_crazyflie_side(Path(out_dir), manifest, y_entry, n_out)
    return {
        "kind": options.kind,
        "preprocess": pre.as_dict(),
        "frame_buffers": buffers,
        "frame_buffer_bytes": buffer_bytes,
        "destinations": ["stm32", *(["wifi"] if wifi else [])],
        "waits_for_host": wait_host,
        "outputs": {"source": "head" if manifest.head else "step", "dtype": y_entry["dtype"], "count": n_out,
                    "scale": y_entry.get("scale"), "zero_point": y_entry.get("zero_point")},
        "message": {"version": appmsg.VERSION, "header_bytes": appmsg.HEADER_BYTES},
        "crazyflie_app": RECEIVER_DIR,
    }


def write_crazyflie_side(out_dir: Path, manifest, y_entry: dict, n_outputs: int) -> Path:
    """OUT/crazyflie_app/: the Crazyflie's app that receives the outputs (edgernn.targets.stm32.receiver), generated
    for this model's output."""
    from edgernn.targets.stm32.receiver import ReceiverSpec, write_receiver

    spec = ReceiverSpec(n_outputs=n_outputs, dtype=y_entry["dtype"], scale=y_entry.get("scale"),
                        zero_point=int(y_entry.get("zero_point") or 0), model_sha256=manifest.model_sha256,
                        model_name=Path(manifest.model_file or "model").stem)
    return write_receiver(Path(out_dir) / RECEIVER_DIR, spec)


def build_crazyflie_side(out_dir: Path) -> list[str]:
    """Build OUT/crazyflie_app/ into a cf2 image where $CRAZYFLIE_BASE names the firmware; the lines to say."""
    import os

    from edgernn.targets.stm32.receiver import BASE_ENV, build_receiver

    app = Path(out_dir) / RECEIVER_DIR
    if not app.is_dir():
        return []
    if not os.environ.get(BASE_ENV):
        return [f"the Crazyflie's receiver app: {app} (not built here: set ${BASE_ENV} to a crazyflie-firmware "
                f"checkout, or `make -C {app} CRAZYFLIE_BASE=/path/to/crazyflie-firmware`)"]
    sizes = build_receiver(app)
    return [f"the Crazyflie's receiver app: {app}, built into {app / 'build' / 'cf2.bin'}", *sizes.lines()]
