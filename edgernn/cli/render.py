"""Terminal tables for the commands' results (Rich). Data in, text out; no logic here."""

from __future__ import annotations

from typing import Any

from edgernn.outdir import Manifest
from edgernn.validate.report import bytes_text, count_words


def _table(title: str, *columns: str, **kwargs):
    from rich.table import Table

    table = Table(title=title, title_justify="left", **kwargs)
    for column in columns:
        justify = "right" if column in ("params", "MACs/step", "bytes", "act bytes", "scale", "zero point",
                                        "size", "cycles", "share", "MAC/cycle") else "left"
        table.add_column(column, justify=justify)
    return table


def _bytes(n: int | None) -> str:
    return bytes_text(n, none="-")


def print_inspection(console, result) -> None:
    step = ", ".join(str(d) for d in (result.input_shape or (result.features,)))
    act = {"float32": 4, "int16": 2}.get(result.quant, 1)
    table = _table(f"{result.model_name} ({result.keras}): input (batch, {result.steps or 'any'}, {step})",
                   "layer", "class", "path", "why", "params", "MACs/step", "output", "act bytes", "state")
    for row in result.rows:
        states = ", ".join(f"{s['name']}[{s['size']}]" for s in row["states"])
        shape = "x".join(str(d) for d in row.get("output_shape", []))
        elements = row.get("activation_elements", 0)
        table.add_row(row["name"], row["class"], row["path"], row["why"], f"{row['params']:,}",
                      f"{row['macs_per_step']:,}", shape, _bytes(elements * act) if elements else "", states)
    console.print(table)
    console.print(f"paths for --quant {result.quant} --mode {result.mode} (convert; build also needs the C kernels):")
    for line in result.plan_lines:
        console.print(f"  {line}")
    console.print(
        f"output: {result.sequence_output}; params {result.params:,}; MACs per step ≈ {result.macs_per_step:,}; "
        f"state elements {result.state_elements:,}; activation peak ≈ {result.activation_peak_elements:,} elements "
        f"({_bytes(result.activation_peak_elements * act)} at {result.quant}; build plans the real arena)"
    )
    if result.boards:
        fit = _table("memory for weights + state + activation peak, by quantization: an estimate before conversion, "
                     "placed by the board's rule (a board with a stream memory streams the int8 fused LSTMs' gate "
                     "matrices that do not fit; build plans the real arrays)",
                     "board", "memory", "float32", "int8", "int16")
        for entry in result.boards:
            cells = []
            for quant in ("float32", "int8", "int16"):
                verdict = entry.get("fit", {}).get(quant)
                if verdict is None:
                    fits, streamed = entry[quant] <= entry["memory_bytes"], 0
                else:
                    fits, streamed = verdict["fits"], verdict["streamed_bytes"]
                if not fits:
                    mark = " [red](too big)[/red]"
                elif streamed:
                    mark = f" (fits, {_bytes(streamed)} streamed from {entry['stream_memory']})"
                else:
                    mark = ""
                cells.append(_bytes(entry[quant]) + mark)
            memory = _bytes(entry["memory_bytes"])
            if entry.get("stream_memory"):
                memory += f" + {entry['stream_memory']} {_bytes(entry['stream_memory_bytes'])}"
            fit.add_row(entry["board"], memory, *cells)
        console.print(fit)


def _io_rows(table, role: str, entries: list[dict]) -> None:
    for entry in entries:
        scale = entry.get("scale")
        table.add_row(role, entry["name"], str(entry["shape"]), entry["dtype"],
                      "-" if scale is None else f"{scale:.6g}" if isinstance(scale, float) else str(scale),
                      "-" if entry.get("zero_point") is None else str(entry["zero_point"]))


def print_conversion(console, manifest: Manifest, out: Any) -> None:
    table = _table(f"{out}/step.tflite ({manifest.quant}, mode {manifest.mode})",
                   "role", "name", "shape", "dtype", "scale", "zero point")
    _io_rows(table, "input", manifest.inputs)
    _io_rows(table, "state", manifest.states)
    _io_rows(table, "output", manifest.outputs)
    console.print(table)
    for path in manifest.rnn_paths or []:
        why = f", because {path['why']}" if path["path"] == "step" else ""
        console.print(f"plan: {path['layer']} ({path['class']}): {path['path']}{why}")
    if manifest.mode == "fused":
        io = manifest.files.get("fused_states_io")
        console.print("the LSTM states live in step.tflite's variable tensors (one invoke per step)"
                      + (f"; {io} has them as inputs and outputs" if io else ""))
    head = manifest.head
    extra = f"; head.tflite runs once after the last step" if head else ""
    check = manifest.float_self_check_rel
    check_text = f"; float step model vs Keras: {check:.1e} relative" if check is not None else ""
    console.print(
        f"ops: {', '.join(manifest.ops)}\n"
        f"MACs per step {manifest.macs_per_step:,}; weights {_bytes(manifest.weight_bytes)}; "
        f"calibration: {manifest.calibration['source']} ({manifest.calibration['samples']} steps){check_text}{extra}"
    )
    _print_precision(console, manifest.precision)


def _print_precision(console, precision: dict | None) -> None:
    """--quant auto: the error reached against the budget, and which ops are int16."""
    if not precision:
        return
    if not isinstance(precision.get("plan"), list):
        console.print(f"precision: {precision.get('plan')}; {precision.get('note')}", soft_wrap=True)
        return
    note = f"; {precision['note']}" if precision.get("note") else ""
    console.print(f"precision: error {precision['error']:.4f} (budget {precision['max_error']:g}; int8 "
                  f"{precision['int8_error']:.4f}, int16 {precision['int16_error']:.4f}); {precision['int16_ops']} of "
                  f"{precision['int16_ops'] + precision['int8_ops']} ops int16, {precision['quantize_ops']} QUANTIZE"
                  f"{note}", soft_wrap=True)
    by_layer: dict = {}
    for row in precision["plan"]:
        if row["dtype"] == "int16":
            by_layer.setdefault(row["layer"] or "(graph)", []).append(row["name"])
    for layer, ops in by_layer.items():
        console.print(f"  int16 in {layer}: {len(ops)} ops ({', '.join(sorted(set(ops)))})", soft_wrap=True)


def _print_horizon(console, horizon: dict | None) -> None:
    """The horizon the quantization was judged over, and the states whose range it widened."""
    if not horizon:
        return
    error = f": error {horizon['error']:.4f}" if horizon.get("error") is not None else ""
    console.print(f"horizon: {horizon['streams']} streams of {horizon['steps']} steps (the calibration sequences "
                  f"chained, the state carried){error}", soft_wrap=True)
    for name, r in (horizon.get("widened") or {}).items():
        (wl, wh), (hl, hh) = r["windows"], r["horizon"]
        console.print(f"  state {name}: range [{wl:.4g}, {wh:.4g}] on the calibration sequences, [{hl:.4g}, {hh:.4g}] "
                      "over the horizon (quantized to the latter)", soft_wrap=True)


def print_build_inspection(console, result: dict) -> None:
    """``edgernn inspect OUT/``: the build, then its precision plan (--quant auto) op by op."""
    board = f" for {result['board']}" if result.get("board") else ""
    l2r = f"; l2r {result['l2r']:.4f} against the float model" if result.get("l2r") is not None else ""
    console.print(f"{result['folder']}: {result.get('model') or 'model'}{board}, --quant {result['quant']}, mode "
                  f"{result['mode']}; {result['ops']} kinds of op; weights {_bytes(result.get('weight_bytes'))}, arena "
                  f"{_bytes(result.get('arena_bytes'))}{l2r}", soft_wrap=True)
    _print_horizon(console, result.get("horizon"))
    p = result.get("precision")
    if p is None:
        console.print(f"precision: every op {result['quant']} (no plan: built with --quant {result['quant']})")
        return
    if "layers" not in p:
        console.print(f"precision: {p.get('plan')}; {p.get('note')}", soft_wrap=True)
        return
    met = "met" if p["met"] else "[red]missed[/red]"
    console.print(f"precision plan: error {p['error']:.4f}, budget {p['max_error']:g} {met} (int8 {p['int8_error']:.4f}, "
                  f"int16 {p['int16_error']:.4f}; on {p['on']})" + (f"; {p['note']}" if p.get("note") else ""),
                  soft_wrap=True)
    console.print(f"  {p['int16_ops']} ops int16, {p['int8_ops']} int8, {p['quantize_ops']} QUANTIZE; x {p['x']}, "
                  f"y {p['y']}, states " + ", ".join(f"{k} {v}" for k, v in (p.get("states") or {}).items()),
                  soft_wrap=True)
    head = p.get("head")
    if head:
        form = "16x8 behind a QUANTIZE from the int8 step output" if head.get("input") else head["dtype"]
        other = head.get("int8_error", head.get("int16_error"))
        console.print(f"  head: {form}; the model's output {head['error']:.4f} on {head['on']} "
                      f"({'int8' if head.get('input') else 'int16'} head {other:.4f})", soft_wrap=True)
    e = p.get("estimate") or {}
    if all(e.get(k) for k in ("int8", "int16", "auto")):
        console.print(f"  the plan chosen by: {e.get('chosen_by')}")
        table = _table("estimated cost", "plan", "cycles", "bytes")
        for k in ("int8", "int16", "auto"):
            table.add_row(k, f"{e[k]['cycles_per_step']:,}", f"{e[k]['bytes']:,}")
        console.print(table)
    layers = _table("precision by layer", "layer", "int16", "int8", "int16 ops")
    for row in p["layers"]:
        layers.add_row(row["layer"], str(row["int16"]), str(row["int8"]), ", ".join(row["int16_ops"]))
    console.print(layers)
    ops = _table("ops", "op", "name", "output", "dtype", "sensitivity", "why")
    for row in p["plan"]:
        sens = row.get("sensitivity")
        dtype = "float32 (16x8 plan)" if row.get("float32") else row["dtype"]
        dtype = f"[bold]{dtype}[/bold]" if row["dtype"] == "int16" else dtype
        ops.add_row(str(row["op"]), row["name"], row["output"], dtype, "" if sens is None else f"{sens:+.4f}",
                    row.get("why") or "")
    console.print(ops)


def print_build(console, result: dict, out: Any) -> None:
    print_conversion(console, Manifest.from_dict(result["manifest"]), out)
    for line in result.get("messages", []):
        console.print(line, soft_wrap=True)


def print_boards(console, boards: list) -> None:
    table = _table("boards", "name", "description", "cpu", "cores", "FPU", "memories", "toolchain")
    for board in boards:
        cpu = board.cpu
        mems = ", ".join(f"{m.name} {_bytes(m.size)}" for m in board.memories_typed)
        table.add_row(board.name, board.description, cpu.isa, str(cpu.cores),
                      "yes" if cpu.fpu else "no", mems, board.toolchain.cc or "")
    console.print(table)


def print_app_validation(console, report: dict) -> None:
    """A camera application's verdict (edgernn.validate.app)."""
    from rich.table import Table

    ref, flt, app = report["reference"], report["float"], report["app"]
    cyc = app["cycles_per_frame"]
    table = Table(title=f"edgernn validate — camera application on {report['board']} ({report['quant']})",
                  show_header=False)
    table.add_column("what")
    table.add_column("value")
    table.add_row("parity with the interpreter", "[green]PASS[/green]" if report["pass"] else "[red]FAIL[/red]")
    table.add_row("frames × sequences", f"{report['steps']} × {report['sequences']}")
    table.add_row("output mismatches", f"{ref['mismatches']} of {ref['compared_values']} "
                  f"(max {ref['max_abs_lsb']} LSB)")
    if flt.get("rmse") is not None:
        table.add_row("vs the float model", f"rmse {flt['rmse']:.4g}  max {flt['max_abs']:.4g}  l2r {flt['l2r']:.4g}")
    else:
        table.add_row("vs the float model", f"skipped: {flt.get('skipped')}")
    fps = app.get("frames_per_second")
    table.add_row("frames per second", f"{fps:,.1f} at {app['clock_hz'] / 1e6:g} MHz, "
                  f"{'camera' if app['camera_bound'] else 'compute'}-bound; the GAP8's work alone: "
                  f"{app['compute_frames_per_second']:,.1f}" if fps else "-")
    table.add_row("per frame (cycles)", f"capture {cyc['capture']:,.0f} · preprocessing {cyc['preprocess']:,.0f} · "
                  f"model {cyc['model']:,.0f}")
    table.add_row("capture overlapped compute", "yes" if app["capture_overlapped_compute"] else "no")
    table.add_row("timing", app["timing"])
    console.print(table)


def print_validation(console, report: dict) -> None:
    """validate's verdict table (stdout) and its notes."""
    from rich.table import Table

    ref, flt, dev = report["reference"], report["float"], report["device"]
    table = Table(title=f"edgernn validate — {report['board']} ({report['quant']})", show_header=False)
    table.add_column("what")
    table.add_column("value")
    verdict = "[green]PASS[/green]" if report["pass"] else "[red]FAIL[/red]"
    table.add_row("parity with the interpreter", verdict)
    table.add_row("steps × sequences", f"{report['steps']} × {report['sequences']}")
    table.add_row("output mismatches", f"{ref['mismatches']} of {ref['compared_values']} "
                  f"(max {ref['max_abs_lsb']} LSB, {ref['max_abs']:.3g})")
    if "state_mismatches" in ref:
        table.add_row("state mismatches", str(ref["state_mismatches"]))
    if flt.get("rmse") is not None:
        table.add_row("vs the float model", f"rmse {flt['rmse']:.4g}  mae {flt['mae']:.4g}  max {flt['max_abs']:.4g}"
                      f"  l2r {flt['l2r']:.4g}  cos {flt['cos']:.5f}")
    else:
        table.add_row("vs the float model", f"skipped: {flt.get('skipped')}")
    budget = report.get("error_budget")
    if budget and not budget["met"]:
        where = (f"over {report['steps']} steps, beyond the {budget['horizon']}-step horizon the plan was judged on"
                 if budget.get("beyond_horizon") else f"over {report['steps']} steps")
        table.add_row("error budget", f"[red]missed[/red]: l2r {budget['l2r']:.4g} > {budget['max_error']:g} {where} "
                      "(parity is not affected)")
    plan = report.get("precision")
    if plan:
        layers = ", ".join(f"{n} in {layer}" for layer, n in plan["int16_ops_by_layer"].items()) or "none"
        reached = f"l2r {plan['l2r_reached']:.4g} here; " if plan.get("l2r_reached") is not None else ""
        table.add_row("precision (--quant auto)",
                      f"{plan['int16_ops']} of {plan['int16_ops'] + plan['int8_ops']} ops int16 ({layers}); "
                      f"{reached}error {plan['calibration_l2r']:.4g} on calibration (budget {plan['max_error']:g}; "
                      f"int8 {plan['int8_l2r']:.4g}, int16 {plan['int16_l2r']:.4g}); x {plan['x']}, y {plan['y']}, "
                      f"states {', '.join(f'{k} {v}' for k, v in (plan['states'] or {}).items()) or 'none'}"
                      + (f"; weights: {plan['weights']}" if plan.get("weights") else ""))
    for row in report.get("drift") or []:
        if row.get("rmse") is not None:
            table.add_row(f"drift, steps {row['label']}", f"rmse {row['rmse']:.4g}  max {row['max_abs']:.4g}")
    table.add_row(f"{count_words(dev)[0]} per step",
                  f"{dev['cycles_per_step']:.1f} ({dev.get('cycle_counter') or 'board counter'})")
    link = report["link"]
    table.add_row("link", f"{link['frames']} frames, {link['retries']} retries, {link['steps_per_second']} steps/s")
    table.add_row("report", report["files"]["html"])
    console.print(table)
    if report.get("profile"):
        print_profile(console, report["profile"], report["device"])
    for note in report.get("notes") or []:
        console.print(f"note: {note}", highlight=False, soft_wrap=True)


def print_profile(console, profile: dict, device: dict | None = None) -> None:
    """validate --profile: each op's cycles, share and MAC/cycle, and the cores at work in it (the fewest and
    the most cycles one of them worked); then each core's cycles waiting. In the device's count unit
    (``device.count_unit``: cycles, or instructions (QEMU))."""
    unit, one = count_words(device or {})
    cores = profile["cores"]
    table = _table(f"where step {profile['step'] + 1}'s {unit} go: {profile['source']}", "op", unit, "share",
                   f"MAC/{one}", "cores at work")
    for row in profile["ops"]:
        mpc = f"{row['macs_per_cycle']:.3g}" if row.get("macs_per_cycle") else "-"
        busy = [w for w in row["work"] if w]
        spread = f" ({min(busy):,}-{max(busy):,})" if len(busy) > 1 else ""
        table.add_row(row["label"], f"{row['cycles']:,}", f"{100 * row['share']:.1f} %", mpc,
                      f"{len(busy)} of {len(cores)}{spread}")
    console.print(table)
    if len(cores) > 1:
        console.print(f"waiting, core by core: {', '.join(f'{w:,}' for w in profile['wait'])}", highlight=False,
                      soft_wrap=True)
    counted = profile.get("counted_cycles")
    traced = profile.get("traced_cycles", profile["cycles"])
    if counted:
        console.print(f"the rows add up to {profile['cycles']:,} {unit}, the whole step as the firmware counted it; "
                      f"the traced body's ops to {traced:,}, against the firmware's count of the body {counted:,} "
                      f"({100 * (traced - counted) / counted:+.2f} %)", highlight=False, soft_wrap=True)


class ValidationView:
    """How ``edgernn validate`` shows a run: a transient progress bar on stderr while the steps
    stream, then the verdict table on stdout (see ``edgernn.validate.run.validate``)."""

    def __init__(self, console):
        self.console = console

    def progress(self, total: int):
        import contextlib

        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        @contextlib.contextmanager
        def bar():
            with Progress(TextColumn("validating"), BarColumn(), MofNCompleteColumn(), TextColumn("steps"),
                          TimeRemainingColumn(), console=Console(stderr=True), transient=True) as progress:
                task = progress.add_task("steps", total=total)
                yield lambda n: progress.advance(task, n)

        return bar()

    def note(self, line: str) -> None:
        """A line about what the run does next (stderr: stdout holds the verdict)."""
        from rich.console import Console

        Console(stderr=True).print(line, highlight=False, soft_wrap=True)

    def summary(self, report: dict) -> None:
        if "app" in report:
            print_app_validation(self.console, report)
        else:
            print_validation(self.console, report)
