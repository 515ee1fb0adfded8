"""OUT/nntool/: a script and a host loop for users of GreenWaves' NNTool + AutoTiler flow.

edgernn's own firmware does not use them, and they are not run here (no GAP SDK): the files say so.
"""

from __future__ import annotations

from pathlib import Path

from edgernn.errors import EdgeRNNError
from edgernn.outdir import Manifest

_CTYPES = {"int8": "int8_t", "int16": "int16_t", "float32": "float"}
CNN_NAME = "edgernn"


def write_nntool(out_dir: Path, manifest: Manifest | dict) -> list[str]:
    if isinstance(manifest, dict):          # a manifest as read from JSON
        manifest = Manifest.from_dict(manifest)
    try:
        import jinja2
    except ImportError:
        raise EdgeRNNError("generating the nntool files needs jinja2: pip install jinja2") from None
    from edgernn._version import __version__
    from edgernn.resources import templates_dir

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir() / "nntool")),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    x, y = manifest.inputs[0], manifest.outputs[0]

    def size(entry):
        n = 1
        for d in entry["shape"]:
            n *= int(d)
        return n

    states = [{"name": s["name"], "dtype": s["dtype"], "ctype": _CTYPES[s["dtype"]], "size": size(s),
               "zero_point": int(s.get("zero_point") or 0)} for s in manifest.states]
    context = {
        "version": __version__, "sha256": manifest.model_sha256, "quant": manifest.quant,
        "mode": manifest.mode, "ops": manifest.ops, "states": [s["name"] for s in states],
        "states_info": states, "cnn": f"{CNN_NAME}CNN", "model_c": f"{CNN_NAME}Model.c",
        "header": f"{CNN_NAME}Kernels.h", "input_size": size(x), "output_size": size(y),
        "x_ctype": _CTYPES[x["dtype"]], "y_ctype": _CTYPES[y["dtype"]],
    }
    dest = Path(out_dir) / "nntool"
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for template, name in (("nntool_script.j2", "nntool_script"), ("host_loop.c.j2", "host_loop.c")):
        (dest / name).write_text(env.get_template(template).render(**context))
        written.append(name)
    return written
