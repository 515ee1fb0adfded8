"""The ``edgernn`` command. It parses arguments and calls the package's functions; nothing more.

TensorFlow is imported only inside the commands that convert.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import click

from edgernn._version import __version__
from edgernn.errors import EdgeRNNError

QUANTS = ("float32", "int8", "int16", "auto")
INSPECT_QUANTS = ("float32", "int8", "int16")
MODES = ("auto", "step", "fused")


def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def _say(message: str) -> None:
    _console(stderr=True).print(f"[dim]… {message}[/dim]")


def _warn(message: str) -> None:
    _console(stderr=True).print(f"[bold yellow]{message}[/bold yellow]")


def _say_interrupted(sig: int) -> None:
    click.echo("interrupted" if sig == signal.SIGINT else f"interrupted ({signal.Signals(sig).name})", err=True)


def _exit_if_signalled() -> None:
    """Exit as interrupted when a signal came, even if what it raised was caught on the way."""
    from edgernn import procs

    sig = procs.received()
    if sig is None:
        return
    procs.ignore_signals()
    _say_interrupted(sig)
    sys.exit(128 + sig)


class EdgeRNNGroup(click.Group):
    """Turns every EdgeRNNError into one line on stderr and its exit code; never a traceback."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Click's own usage errors become one ``error: ...`` line and exit 2, like edgernn's."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            result = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.Abort:
            _say_interrupted(signal.SIGINT)
            sys.exit(128 + signal.SIGINT)
        except click.ClickException as exc:
            message = " ".join(exc.format_message().split())
            hint = ""
            if isinstance(exc, click.UsageError) and exc.ctx is not None:
                hint = f" (see {exc.ctx.command_path} --help)"
            click.echo(f"error: {message}{hint}", err=True)
            sys.exit(2)
        sys.exit(result if isinstance(result, int) else 0)

    def invoke(self, ctx):
        from edgernn import procs

        procs.install_signal_handlers()
        try:
            result = super().invoke(ctx)
            procs.raise_if_interrupted()   # a signal whose exception something on the way caught
            return result
        except EdgeRNNError as err:
            _exit_if_signalled()          # an error that a caught signal caused is the signal's
            click.echo(f"error: {err}", err=True)
            for line in getattr(err, "details", None) or []:
                click.echo(line, err=True)
            sys.exit(err.exit_code)
        except OSError as exc:  # a path or disk fault that no stage turned into its own message
            from edgernn.outdir import os_error_message

            if type(exc).__module__.startswith("serial"):
                click.echo(f"error: serial port fault: {' '.join(str(exc).split()) or type(exc).__name__}", err=True)
                sys.exit(3)
            target = exc.filename or "a file"
            click.echo(f"error: {os_error_message(exc, f'use {target}')}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            procs.ignore_signals()
            _say_interrupted(signal.SIGINT)
            sys.exit(128 + signal.SIGINT)
        except procs.Interrupted as stop:
            procs.ignore_signals()
            _say_interrupted(stop.signum)
            sys.exit(128 + stop.signum)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except Exception as exc:  # a bug: still one line, with the way to see more
            _exit_if_signalled()
            if os.environ.get("EDGERNN_DEBUG") == "1":
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            click.echo(f"error: internal error {type(exc).__name__}: {first} (EDGERNN_DEBUG=1 shows the traceback)", err=True)
            sys.exit(4)
        finally:
            # No compiler, emulator or firmware outlives the command, whatever ended it.
            procs.stop_all()


@click.group(cls=EdgeRNNGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="edgernn")
@click.option("-v", "--verbose", is_flag=True, help="Show every stage, compiler command and converter log.")
@click.pass_context
def cli(ctx, verbose):
    """Put trained recurrent Keras models on small devices and prove them correct, step by step."""
    ctx.ensure_object(dict)
    ctx.obj["verbose"] = verbose
    if verbose:
        os.environ["EDGERNN_VERBOSE"] = "1"


def _model_options(func):
    func = click.option("--roll", is_flag=True,
                        help="An .onnx export unrolled over its time steps: take it back to its repeated cell "
                             "(checked against the export) instead of refusing it.")(func)
    func = click.option("--unsafe", is_flag=True, help="Load models with Lambda layers (runs code stored in the file).")(func)
    func = click.option("--calib", type=click.Path(dir_okay=False), default=None,
                        help="Calibration sequences, .npy of shape (sequences, steps, features), or "
                             "(sequences, steps, H, W, C) for a model of frames.")(func)
    func = click.option("--mode", type=click.Choice(MODES), default="auto", show_default=True,
                        help="step: single-step cells; fused: one UNIDIRECTIONAL_SEQUENCE_LSTM per LSTM; "
                             "auto: fused when every RNN layer allows it, else step.")(func)
    func = click.option("--horizon", type=int, default=None, metavar="STEPS",
                        help="The steps over which a recurrent model's ranges are taken and its error judged: the "
                             "calibration sequences chained into streams that long, the state carried across "
                             "(default: five calibration sequences' length).")(func)
    func = click.option("--max-error", "max_error", default="0.02", show_default=True, callback=_max_error,
                        help="--quant auto: the l2r against the float model on the calibration sequences that "
                             "the int8/int16 plan must meet.")(func)
    func = click.option("--quant", type=click.Choice(QUANTS), default="int8", show_default=True,
                        help="int16 means int16 activations with int8 weights (TFLite 16x8); auto: int8 or "
                             "int16 per op, the plan of least estimated cost that meets --max-error.")(func)
    return func


def _max_error(ctx, param, value) -> float:
    from edgernn.tflite.mixed import check_max_error

    try:
        return check_max_error(value)
    except EdgeRNNError as err:
        raise click.BadParameter(str(err).removeprefix("--max-error ")) from None


def _is_build_folder(path: str) -> bool:
    """A folder holding a manifest.json (an edgernn build's, or one that claims to be: read_manifest says
    what is wrong with it); a SavedModel folder has none."""
    from pathlib import Path

    return Path(path).is_dir() and (Path(path) / "manifest.json").is_file()


@cli.command()
@click.argument("model", type=click.Path())
@click.option("--unsafe", is_flag=True, help="Load models with Lambda layers (runs code stored in the file).")
@click.option("--quant", type=click.Choice(INSPECT_QUANTS), default="int8", show_default=True,
              help="The quantization the paths are decided for.")
@click.option("--json", "as_json", is_flag=True, help="Print the inspection as JSON.")
@click.option("--roll", is_flag=True,
                        help="An .onnx export unrolled over its time steps: take it back to its repeated cell "
                             "(checked against the export) instead of refusing it.")
def inspect(model, unsafe, quant, as_json, roll):
    """Show how each layer of MODEL would stream: path and why, parameters, MACs per step, state sizes.

    MODEL may be a build folder (OUT of convert or build): then its quantization, sizes and, for --quant auto,
    the precision plan (which ops and layers are int16, the error reached, the estimated cost)."""
    from edgernn.pipeline.inspection import inspect_build, inspect_model

    if _is_build_folder(model):
        found = inspect_build(model)
        if as_json:
            click.echo(json.dumps(found, indent=2))
            return
        from edgernn.cli.render import print_build_inspection

        print_build_inspection(_console(), found)
        return
    result = inspect_model(model, unsafe=unsafe, quant=quant, roll=roll)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
        return
    from edgernn.cli.render import print_inspection

    print_inspection(_console(), result)


@cli.command()
@click.argument("model", type=click.Path())
@click.option("-o", "--out", required=True, type=click.Path(), help="Output folder.")
@_model_options
@click.pass_context
def convert(ctx, model, out, quant, mode, calib, unsafe, roll, max_error, horizon):
    """Convert MODEL into OUT/step.tflite (x_t, states) -> (y_t, states') and OUT/manifest.json."""
    from edgernn.pipeline.convert import convert as convert_folder
    from edgernn.cli.render import print_conversion

    manifest = convert_folder(model, out, quant=quant, calib=calib, mode=mode, unsafe=unsafe, roll=roll,
                              max_error=max_error, horizon=horizon, log=_say if ctx.obj["verbose"] else None,
                              warn=_warn)
    print_conversion(_console(), manifest, out)


@cli.command()
@click.argument("model", type=click.Path())
@click.option("--board", required=True, help="Board name (see `edgernn boards`) or path of a board .toml.")
@click.option("-o", "--out", required=True, type=click.Path(), help="Output folder.")
@click.option("--link", type=click.Choice(["uart", "wifi"]), default=None,
              help="The validation link the firmware speaks: uart (the board's serial port, the default) or wifi "
                   "(ai_deck: CPX through the deck's ESP32; validate with --port cpx://HOST).")
@click.option("--app", type=click.Choice(["camera"]), default=None,
              help="Write an application instead of the validation server: camera (ai_deck, gvsoc_gap8: the deck's "
                   "camera feeds the model, its outputs go to the Crazyflie as CPX APP packets; docs/app.md).")
@click.option("--pre-factor", type=int, default=None,
              help="--app camera: reduce the frame by this integer factor (each pixel the mean of its block); "
                   "default: the largest that fits the model's input.")
@click.option("--pre-crop", default=None, metavar="X,Y",
              help="--app camera: the model's window in the reduced frame, its top-left corner; default: centred.")
@click.option("--pre-scale", type=float, default=None,
              help="--app camera: the model's input is pixel * scale + offset (default scale 1/255).")
@click.option("--pre-offset", type=float, default=None, help="--app camera: see --pre-scale (default 0).")
@click.option("--app-wifi", is_flag=True,
              help="--app camera: send the outputs to the WiFi host too (always on gvsoc_gap8).")
@_model_options
@click.pass_context
def build(ctx, model, board, out, link, app, pre_factor, pre_crop, pre_scale, pre_offset, app_wifi, quant, mode, calib,
          unsafe, roll, max_error, horizon):
    """Convert MODEL, generate OUT/firmware/ for BOARD, and compile it where the toolchain is present."""
    from edgernn.pipeline.build import build_model
    from edgernn.cli.render import print_build

    options = _app_options(app, pre_factor, pre_crop, pre_scale, pre_offset, app_wifi)
    result = build_model(model, out, board=board, quant=quant, calib=calib, mode=mode, unsafe=unsafe, roll=roll,
                         max_error=max_error, horizon=horizon, link=link, app=options,
                         verbose=ctx.obj["verbose"], log=_say if ctx.obj["verbose"] else None, warn=_warn)
    print_build(_console(), result, out)


def _app_options(app, factor, crop, scale, offset, wifi):
    """--app and its options, as edgernn.targets.camera.AppOptions (None without --app)."""
    given = [name for name, v in (("--pre-factor", factor), ("--pre-crop", crop), ("--pre-scale", scale),
                                  ("--pre-offset", offset), ("--app-wifi", wifi or None)) if v is not None]
    if app is None:
        if given:
            raise EdgeRNNError(f"{given[0]} is an option of --app camera")
        return None
    from edgernn.targets.camera import AppOptions

    where = None
    if crop is not None:
        try:
            x, y = (int(v) for v in crop.split(","))
        except ValueError:
            raise EdgeRNNError(f"--pre-crop {crop!r}: give the corner as X,Y (two whole numbers)") from None
        where = (x, y)
    return AppOptions(kind=app, factor=factor, crop=where, scale=scale, offset=offset, wifi=bool(wifi))


@cli.command()
@click.argument("out", type=click.Path())
@click.option("--port", default=None, help="Serial port for a real board.")
@click.option("--radio", default=None, help="Crazyflie radio URI for over-the-air flashing (ai_deck).")
@click.pass_context
def flash(ctx, out, port, radio):
    """Put OUT's firmware on its board. Emulated boards start and print the port URL; Ctrl-C stops them."""
    from edgernn.targets.device import flash as flash_device

    if port:
        raise EdgeRNNError("--port is not used to flash: emulated boards are started, the ai_deck is flashed "
                           "over JTAG or with --radio URI; pass --port to `edgernn validate`")
    device = flash_device(Path(out), radio=radio)
    if device.process is None:
        click.echo(f"{device.board.name} flashed ({'radio' if radio else 'JTAG'}); validate it with "
                   f"`edgernn validate {out} --port /dev/ttyUSB0` (the USB-UART on its UART pins)")
        return
    click.echo(f"{device.board.name} running; port: {device.url}")
    click.echo("press Ctrl-C to stop it (exit status 130)")
    try:
        device.wait()
    finally:
        device.stop()
        click.echo("stopped")


@cli.command()
@click.argument("out", type=click.Path())
@click.option("--port", default=None,
              help="pyserial URL or device: /dev/ttyUSB0, socket://host:port, a pty; or cpx://HOST[:PORT] for the "
                   "AI-deck's WiFi (CPX, port 5000 by default).")
@click.option("--baud", default=None, type=int, help="Baud rate (default: the board's).")
@click.option("--data", type=click.Path(dir_okay=False), default=None,
              help="Test sequences, .npy (sequences, steps, features), or (sequences, steps, H, W, C) frames.")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="Generate random test sequences of this many steps (default 1000); with --data, use the first N.")
@click.option("--sequences", type=click.IntRange(min=1), default=1, show_default=True,
              help="How many random test sequences (without --data).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="Write the report here instead of OUT/report.json (the folder must exist).")
@click.option("--save", type=click.Path(dir_okay=False), default=None,
              help="Also write the device outputs (y, y_float, cycles) to this .npz, as they arrive.")
@click.option("--profile", is_flag=True,
              help="Also trace one step's instructions on the board (gvsoc_gap8) and report where its cycles go, "
                   "op by op and core by core.")
@click.pass_context
def validate(ctx, out, port, baud, data, steps, sequences, json_path, save, profile):
    """Run OUT's firmware on the device and compare it, step by step, with the interpreter and the float model.

    Exit status: 0 parity PASS, 1 parity FAIL, 2 bad input, 3 device or link fault, 4 internal error."""
    from rich.console import Console

    from edgernn.cli.render import ValidationView
    from edgernn.validate.run import exit_code, validate as run_validation

    report = run_validation(Path(out), port=port, baud=baud, data=data, steps=steps, sequences=sequences,
                            json_path=json_path, save=save, view=ValidationView(Console()), profile=profile)
    sys.exit(exit_code(report))


# What `edgernn setup` builds, by the board whose family builds it.
SETUP_BOARDS = {"gvsoc": "gvsoc_gap8"}


@cli.command()
@click.argument("what", type=click.Choice(sorted(SETUP_BOARDS)))
@click.option("--force", is_flag=True, help="Rebuild even when the cached build is current.")
@click.option("--fetch", is_flag=True,
              help="No GAP SDK? Clone upstream gap_sdk at the tested commit (only the parts edgernn builds) "
                   "into edgernn's cache and build from it.")
@click.option("--sdk-url", default=None, metavar="URL",
              help="With --fetch: the gap_sdk repository to clone (default $EDGERNN_GAP_SDK_URL, else GitHub's).")
@click.option("--sdk-commit", default=None, metavar="COMMIT",
              help="With --fetch: the commit or tag to check out (default: the one edgernn is tested against).")
@click.pass_context
def setup(ctx, what, force, fetch, sdk_url, sdk_commit):
    """Build a tool edgernn needs, once, into its cache: `gvsoc`, the GAP8 simulator, from $GAP_SDK_HOME
    (or, with --fetch, from upstream gap_sdk), ending with a self-test of its UART."""
    from edgernn.targets.device import adapter_for

    if (sdk_url or sdk_commit) and not fetch:
        raise click.UsageError("--sdk-url and --sdk-commit go with --fetch")
    for line in adapter_for(SETUP_BOARDS[what]).setup(force=force, fetch=fetch, source_url=sdk_url,
                                                      source_commit=sdk_commit, log=_say):
        click.echo(line)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the boards as JSON.")
def boards(as_json):
    """List the boards edgernn knows, with their facts."""
    from edgernn.targets.board import known_boards, load_board

    found = [load_board(name) for name in known_boards()]
    if as_json:
        click.echo(json.dumps({b.name: b.data for b in found}, indent=2, default=str))
        return
    from edgernn.cli.render import print_boards

    print_boards(_console(), found)


def main() -> None:
    """The ``edgernn`` console script.

    An interrupted command ends here, at once, with 128 + the signal: its cleanup has run (every
    ``finally``, the staging folders' removal, ``procs.stop_all``) and its line is printed. Python's own
    shutdown is skipped: it would spend a second or more in TensorFlow's teardown with the signals back
    at their defaults, and whatever ran there (a library's exit handler, a second Ctrl-C, an exception
    left behind by a half-imported extension) could still turn exit 130 into death by signal.
    """
    from edgernn import procs

    try:
        cli(prog_name="edgernn")
    except BaseException as end:
        sig = procs.received()
        if sig is None:
            raise
        procs.ignore_signals()
        if isinstance(end, SystemExit) and isinstance(end.code, int) and end.code == 128 + sig:
            code = end.code
        else:   # the signal's exception got past every handler: still the signal's line and code
            code = 128 + sig
            _say_interrupted(sig)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


if __name__ == "__main__":
    main()
