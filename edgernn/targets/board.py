"""Boards are data: one TOML file each under boards/, or a path the user gives.

A board file is read once (``load_board``), its ``extends`` resolved, and checked against the schema
below: every table and key edgernn knows, its type, and its default. A key that is not in the schema,
a required key that is missing, or a value of the wrong type is a one-line EdgeRNNError (exit code 2)
naming the file and the key. The defaults live here and nowhere else; docs/boards/format.md lists
every key.

``Board`` gives typed sections (``board.serial.baud``, ``board.emulator.start_timeout_s``, ...) with the
defaults filled in, and the facts derived from them (``board.link``). The backend reads only these.
``board["gap_sdk"]["config"]`` still reads the file's tables as written (after ``extends``), for the HAL's
Jinja templates (templates/targets/<family>/hal/*.j2) and the benches.
"""

from __future__ import annotations

import copy
import dataclasses
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from edgernn.errors import EdgeRNNError
from edgernn.link.framing import DEFAULT_MAX_FRAME
from edgernn.resources import boards_dir

REQUIRED = object()     # a key without a default


def _key(default: Any = REQUIRED, doc: str = "") -> Any:
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda value=default: type(value)(value), metadata={"doc": doc})
    if default is REQUIRED:
        return field(metadata={"doc": doc, "required": True})
    return field(default=default, metadata={"doc": doc})


StrOrList = Union[str, list]


@dataclass(frozen=True, kw_only=True)
class Cpu:
    arch: str = _key(doc="`native` (the firmware is a host process) or a cross architecture (`riscv32`)")
    isa: str = _key("", "the instruction set, for people")
    cores: int = _key(1, "cores, for people")
    fpu: bool = _key(False, "whether the CPU has an FPU (shown by `edgernn boards`)")
    clock_hz: int = _key(0, "the clock `cycle_counter` counts in; 0: not a clock")
    cycle_counter: str = _key("", "what `cycles_per_step` of report.json counts")
    count_unit: str = _key("cycles", "what one count of `cycle_counter` is, in the reports' words (report.json's "
                                     "`device.count_unit`, the labels of validate's table and report.html): "
                                     "`cycles`, or `instructions (QEMU)` where an emulator counts instructions")
    team_cycle_counter: str = _key("", "what `cluster_cycles_per_step` of report.json counts (a board whose HAL "
                                       "counts its team's own cycles too: EDGERNN_HAL_TEAM_CYCLES=1)")
    fc_cores: Optional[int] = _key(None, "GAP8: cores of the fabric controller")
    cluster_cores: Optional[int] = _key(None, "GAP8: cores of the cluster")
    fc_hz: Optional[int] = _key(None, "GAP8: the FC clock the firmware sets (EDGERNN_FC_HZ)")
    fc_mv: int = _key(1200, "GAP8: the FC supply in mV, set before fc_hz (EDGERNN_FC_MV)")
    cluster_hz: Optional[int] = _key(None, "GAP8: the cluster clock the firmware sets (EDGERNN_CLUSTER_HZ)")
    fc_max_hz: Optional[int] = _key(None, "GAP8: the FC's highest clock, for people")
    cluster_max_hz: Optional[int] = _key(None, "GAP8: the cluster's highest clock, for people")
    boot_hz: Optional[int] = _key(None, "GAP8: the clock both domains boot at, for people")


@dataclass(frozen=True, kw_only=True)
class Memory:
    name: str = _key(doc="the memory's name, used by [placement]")
    size: int = _key(doc="bytes")
    reserved: int = _key(0, "bytes kept out of the budget (runtime, code, stacks, link buffers)")
    holds: list = _key([], "what goes there, for people")
    team_memory: bool = _key(False, "taken at init through edgernn_team_fast_alloc (GAP8's cluster L1)")
    origin: Optional[int] = _key(None, "the address it starts at, for people")

    @property
    def budget(self) -> int:
        return self.size - self.reserved


@dataclass(frozen=True, kw_only=True)
class Placement:
    weights_memory: Optional[StrOrList] = _key(None, "where the constants go (default: the first memory)")
    state_memory: Optional[StrOrList] = _key(None, "where the state goes (default: the first memory)")
    arena_memory: Optional[StrOrList] = _key(None, "where the arena goes (default: the first memory)")
    weights_section: str = _key("", "the section attribute of every constant (\"\": plain .rodata)")
    weights_attribute: str = _key("", "the SDK's placement macro for constants, instead of a section")
    weights_attribute_header: str = _key("", "the header that defines weights_attribute")
    dma_tiles_memory: Optional[str] = _key(None, "the memory of the banded convolutions' DMA tiles")
    dma_source: Optional[str] = _key(None, "the banded convolutions' C source under templates/")
    weights_stream_memory: Optional[str] = _key(None, "where weight arrays that do not fit their home are read "
                                                      "from in chunks (the AI-deck's HyperRAM); none: refused")
    stream_tiles_memory: Optional[str] = _key(None, "the memory of the streamed chunks' double buffers")
    conv_pool: str = _key("to_fit", "when an int8 CONV_2D is fused with the MAX_POOL_2D after it (its output never "
                                    "whole, edgernn/backend/conv_pool.py): \"to_fit\", only when the model does not "
                                    "fit otherwise; \"always\", whenever its output is large enough")
    stream_source: Optional[str] = _key(None, "the streamed kernels' C source under templates/")
    link_memory: Optional[str] = _key(None, "the memory that holds the server's link buffers: what a step's frames "
                                            "need beyond the board's (EDGERNN_LINK_MAX_FRAME) is charged there "
                                            "(item `link`); default: the memory whose `holds` lists "
                                            "\"link buffers\", else none (not charged)")


@dataclass(frozen=True, kw_only=True)
class Parallel:
    team: Optional[str] = _key(None, "the team implementation under templates/ (default firmware/edgernn_team.c)")
    workers: Optional[int] = _key(None, "the team's cores; 1: no op is shared")
    min_count: int = _key(16, "an op of at least this many outputs runs through its team kernel")
    split_cycles: Optional[int] = _key(None, "share an op by cost instead: when its estimated one-core cycles exceed "
                                             "its busiest worker's share plus this, what one split costs "
                                             "(edgernn/backend/parallel.py)")


QUANT_POLICIES = ("ok", "warn", "refuse")


@dataclass(frozen=True, kw_only=True)
class Quant:
    float32: str = _key("ok", "`ok`, `warn` (build, with float32_reason as a warning) or `refuse`")
    float32_reason: str = _key("", "why float32 is warned about or refused")
    int8: str = _key("ok", "as float32, for int8")
    int8_reason: str = _key("", "why int8 is warned about or refused")
    int16: str = _key("ok", "as float32, for int16")
    int16_reason: str = _key("", "why int16 is warned about or refused")

    def policy(self, quant: str) -> tuple[str, str]:
        """(``ok`` | ``warn`` | ``refuse``, the reason given, or "")."""
        return getattr(self, quant, "ok"), getattr(self, f"{quant}_reason", "")


@dataclass(frozen=True, kw_only=True)
class Toolchain:
    kind: str = _key("cc", "`cc`: edgernn compiles the firmware; `gap_sdk`: the GAP SDK's make builds the project")
    cc: Optional[str] = _key(None, "the compiler")
    also: list = _key([], "more compilers that must accept the same C, each built when installed")
    cflags: list = _key([], "compiler flags")
    cflags_size: list = _key([], "the flags of the size-optimized variant the firmware tests build")
    ldflags: list = _key([], "linker flags, after the objects")
    defines: list = _key([], "-D definitions of every build")
    size: str = _key("size", "the tool that reads an ELF's text/data/bss")
    optional: bool = _key(False, "`true`: without the toolchain, `edgernn build` still writes the sources")
    xpulp: bool = _key(False, "GAP8: the int8 dot products use Xpulp (EDGERNN_XPULP)")
    kernels: str = _key("reference", "the kernel set: `reference` (templates/kernels/, the portable C) or a family's "
                                     "optimized set (templates/targets/<set>/kernels/: its files replace the "
                                     "reference ones of the same name, the others are added)")
    check_cc: Optional[str] = _key(None, "the compiler that checks the portable sources where the SDK is absent")
    check_cflags: list = _key([], "check_cc's flags")
    install_hint: str = _key("install it", "what to install when the toolchain is missing")


@dataclass(frozen=True, kw_only=True)
class GapSdk:
    home_env: str = _key("GAP_SDK_HOME", "the variable naming the SDK's folder")
    config: str = _key(doc="the SDK's board configuration, sourced before every make")
    os: str = _key("freertos", "PMSIS_OS")
    io: str = _key("disable", "the SDK's io setting (no printf on the link's UART)")
    app: str = _key("edgernn", "APP of the Makefile")
    build: list = _key(doc="the make command that builds the project")
    elf: str = _key(doc="the ELF, relative to the project")
    image: str = _key(doc="the flash image, relative to the project")
    gap_cc: str = _key("riscv32-unknown-elf-gcc", "GAP's compiler")
    debian_cc: str = _key("riscv64-unknown-elf-gcc", "Debian's compiler, through edgernn's wrapper")
    debian_hint: str = _key("install it", "how to install debian_cc")
    make_vars: dict = _key({}, "variables on make's command line for every build")


@dataclass(frozen=True, kw_only=True)
class Flash:
    default: str = _key("jtag", "the way `edgernn flash` uses without --radio")
    jtag: list = _key([], "the JTAG flash command (run in the project)")
    jtag_cable: str = _key("", "GAPY_OPENOCD_CABLE for jtag")
    radio: list = _key([], "the radio flash command, with {image} and {uri}")
    radio_hint: str = _key("install it", "what to install for radio")
    radio_example: str = _key("", "an example radio URI")
    command: str = _key("see the board file", "how a board without an adapter of its own is flashed, for people")


EMULATOR_KINDS = ("fd", "announce", "gvsoc")


@dataclass(frozen=True, kw_only=True)
class Emulator:
    kind: str = _key("", "`fd` (the command takes the master side of a pty as {fd}), `announce` (it prints its "
                         "UART's path, matched by serial_announce) or `gvsoc`; default: `announce` when "
                         "serial_announce is given, else `fd`")
    command: list = _key([], "the command, with {elf} (and {fd})")
    serial_args: list = _key([], "arguments after the command that expose the UART")
    serial_announce: str = _key("", "a regular expression whose group 1 is the UART's path in the output")
    serial_url: str = _key("{announced}", "the port URL made of what serial_announce matched ({announced}): "
                                          "`socket://{announced}` for a UART on a TCP port")
    start_timeout_s: float = _key(60.0, "how long to wait for the board to start (UART announced, ready byte)")
    target: str = _key("", "GVSOC: gapy's --target")
    install_hint: str = _key("install it", "what to install when the emulator is missing")


@dataclass(frozen=True, kw_only=True)
class Serial:
    transport: str = _key("pty", "`pty`, `tcp` or `uart`, for people")
    baud: int = _key(115200, "the default of `validate --baud`")
    timeout_s: float = _key(5.0, "how long validate waits for an answer beyond its line time")
    links: list = _key(["uart"], "the links a firmware can be built with (`edgernn build --link`), the default first: "
                                 "`uart` (this serial port), `wifi` (the AI-deck's CPX through its ESP32)")


@dataclass(frozen=True, kw_only=True)
class Hal:
    template: str = _key(doc="the HAL folder under templates/")
    done_line: str = _key("~~~EDGERNN SERVER DONE~~~", "the line the firmware prints last")
    ready_byte: bool = _key(False, "the HAL sends one 0x00 once it receives; a host that started it waits for it")


@dataclass(frozen=True)
class LinkFrames:
    """The link's frames the firmware is built with, from ``toolchain.defines`` (what the compiler reads; not
    keys of their own): EDGERNN_LINK_MAX_FRAME, and EDGERNN_LINK_FIXED_FRAME (templates/firmware/protocol.h)."""

    max_frame: int = DEFAULT_MAX_FRAME     # the board's frame limit, both ways (else the protocol's default)
    fixed: bool = False                    # the frames stay at max_frame even where a model's step needs more


def _link_frames(path: Path, defines: list) -> LinkFrames:
    values = dict(str(d).split("=", 1) if "=" in str(d) else (str(d), "1") for d in defines)
    raw = values.get("EDGERNN_LINK_MAX_FRAME")
    try:
        max_frame = DEFAULT_MAX_FRAME if raw is None else int(raw, 0)
    except ValueError:
        raise EdgeRNNError(f"board file {path}: toolchain.defines: EDGERNN_LINK_MAX_FRAME must be a whole number, "
                           f"not {raw!r}") from None
    return LinkFrames(max_frame=max_frame, fixed=values.get("EDGERNN_LINK_FIXED_FRAME", "0") != "0")


def _link_memory(path: Path, placement: Placement, memories: tuple[Memory, ...]) -> Placement:
    """``placement`` with its link_memory resolved: as given (a memory of the board), else the memory whose
    ``holds`` lists "link buffers" (what board files said before the key), else none."""
    names = [m.name for m in memories]
    if placement.link_memory is not None:
        if placement.link_memory not in names:
            raise EdgeRNNError(f"board file {path}: placement.link_memory names no memory {placement.link_memory!r}")
        return placement
    legacy = next((m.name for m in memories if "link buffers" in m.holds), None)
    return dataclasses.replace(placement, link_memory=legacy)


# table name -> (its dataclass, required table)
SECTIONS: dict[str, tuple[type, bool]] = {
    "cpu": (Cpu, True), "toolchain": (Toolchain, True), "serial": (Serial, True), "hal": (Hal, True),
    "placement": (Placement, False), "parallel": (Parallel, False), "quant": (Quant, False),
    "flash": (Flash, False), "gap_sdk": (GapSdk, None), "emulator": (Emulator, None),
}   # required: True (the table must be there), False (absent: all defaults), None (absent: no such part)
TOP_LEVEL = {"name": str, "description": str, "emulated": bool, "family": str, "memory": list, **{s: dict for s in SECTIONS}}
TOP_REQUIRED = ("name", "description", "cpu", "memory", "toolchain", "serial", "hal")


def _type_ok(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_type_ok(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


_WORDS = {str: "a string", int: "a whole number", float: "a number", bool: "true or false", list: "an array",
          dict: "a table"}


def _type_words(hint: Any) -> str:
    if typing.get_origin(hint) in (Union, types.UnionType):
        return " or ".join(_type_words(h) for h in typing.get_args(hint) if h is not type(None))
    return _WORDS.get(hint, str(hint))


def _typed(cls: type, table: dict, path: Path, where: str):
    """The dataclass ``cls`` from a TOML table: every key known, every required key present, each of its type."""
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    for key in table:
        if key not in known:
            raise EdgeRNNError(f"board file {path}: unknown key {where}.{key} (known: {', '.join(known)}; "
                               "docs/boards/format.md)")
    for name, f in known.items():
        if name in table:
            if not _type_ok(table[name], hints[name]):
                raise EdgeRNNError(f"board file {path}: {where}.{name} must be {_type_words(hints[name])}, "
                                   f"not {table[name]!r}")
        elif f.metadata.get("required"):
            raise EdgeRNNError(f"board file {path} lacks {where}.{name}")
    values = {k: (float(v) if hints[k] is float else v) for k, v in table.items()}
    return cls(**values)


def schema() -> dict[str, list[tuple[str, str, Any, str]]]:
    """Every table's keys: (key, type, default or REQUIRED, what it means); docs/boards/format.md's source."""
    out = {}
    for section, cls in [("memory", Memory), *((s, c) for s, (c, _) in SECTIONS.items())]:
        hints = typing.get_type_hints(cls)
        rows = []
        for f in dataclasses.fields(cls):
            if f.metadata.get("required"):
                default = REQUIRED
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = f.default
            rows.append((f.name, _type_words(hints[f.name]), default, f.metadata.get("doc", "")))
        out[section] = rows
    return out


@dataclass(frozen=True)
class Board:
    """A board file, read and checked: typed sections with their defaults, and the tables as written.
    ``Board(name, description, path, data)`` checks ``data`` as load_board does."""

    name: str
    description: str
    path: Path
    data: dict[str, Any] = field(repr=False)
    emulated: bool = field(init=False, repr=False)
    family: str = field(init=False, repr=False)
    cpu: Cpu = field(init=False, repr=False)
    memories_typed: tuple = field(init=False, repr=False)
    toolchain: Toolchain = field(init=False, repr=False)
    serial: Serial = field(init=False, repr=False)
    hal: Hal = field(init=False, repr=False)
    placement: Placement = field(init=False, repr=False)
    parallel: Parallel = field(init=False, repr=False)
    quant: Quant = field(init=False, repr=False)
    gap_sdk: Optional[GapSdk] = field(init=False, repr=False)
    flash: Flash = field(init=False, repr=False)
    emulator: Optional[Emulator] = field(init=False, repr=False)
    link: LinkFrames = field(init=False, repr=False)

    def __post_init__(self):
        for key, value in _checked(self.path, self.data).items():
            object.__setattr__(self, key, value)

    @property
    def memories(self) -> list[dict[str, Any]]:
        """The [[memory]] tables as written (the code generator reads these)."""
        return list(self.data["memory"])

    def memory(self, name: str) -> dict[str, Any]:
        for mem in self.memories:
            if mem["name"] == name:
                return mem
        raise EdgeRNNError(f"board {self.name}: no memory named {name!r} in {self.path}")

    def memory_typed(self, name: str) -> Memory:
        for mem in self.memories_typed:
            if mem.name == name:
                return mem
        raise EdgeRNNError(f"board {self.name}: no memory named {name!r} in {self.path}")

    @property
    def elf_name(self) -> str:
        """The file name of a compiled firmware: an executable on the host, an ELF on a cross board."""
        return "firmware" if self.cpu.arch == "native" else "firmware.elf"

    def quant_rule(self, quant: str) -> tuple[str, str]:
        """(``ok`` | ``warn`` | ``refuse``, why) for a quantization on this board."""
        policy, reason = self.quant.policy(quant)
        return policy, reason or f"board {self.name} does not support {quant}"

    # The tables as written, for the HAL's Jinja templates (board["gap_sdk"]["config"] in
    # templates/targets/gap8/hal/Makefile.j2), and benches and tests written against them; the backend reads the
    # typed sections.
    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)


LINKS = ("uart", "wifi")


def with_link(board: Board, link: str | None) -> Board:
    """The board as a build over ``link`` sees it: unchanged for its default link (or None); for another of its
    links, every build also defines EDGERNN_LINK_<LINK>=1 (the HAL picks its link by it). One line for a link
    the board does not have."""
    if link is None or link == board.serial.links[0]:
        return board
    if link not in board.serial.links:
        raise EdgeRNNError(f"board {board.name} has no {link!r} link (its links: {', '.join(board.serial.links)})")
    data = copy.deepcopy(board.data)
    toolchain = data.setdefault("toolchain", {})
    toolchain["defines"] = [*toolchain.get("defines", []), f"EDGERNN_LINK_{link.upper()}=1"]
    return board_from_data(board.path, data)


APP_DEFINE = "EDGERNN_APP_CAMERA=1"


def with_app(board: Board, app: str | None) -> Board:
    """The board as the build of an application sees it (``edgernn build --app camera``): every build defines
    EDGERNN_APP_CAMERA=1, and the CPX transport (EDGERNN_LINK_WIFI=1) that the application sends its outputs
    through. Unchanged without an application; which boards have one is their family's (Adapter.app_kinds)."""
    if app is None:
        return board
    data = copy.deepcopy(board.data)
    toolchain = data.setdefault("toolchain", {})
    defines = [d for d in toolchain.get("defines", []) if d != "EDGERNN_LINK_WIFI=1"]
    toolchain["defines"] = [*defines, "EDGERNN_LINK_WIFI=1", APP_DEFINE]
    return board_from_data(board.path, data)


def known_boards() -> list[str]:
    return sorted(p.stem for p in boards_dir().glob("*.toml"))


def load_board(name_or_path: str | Path | Board) -> Board:
    """A board by shipped name (``host``) or by the path of the user's own TOML file, checked."""
    if isinstance(name_or_path, Board):
        return name_or_path
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" and candidate.is_file():
        path = candidate
    else:
        path = boards_dir() / f"{name_or_path}.toml"
        if not path.is_file():
            raise EdgeRNNError(
                f"unknown board {str(name_or_path)!r}: known boards are {', '.join(known_boards())}, "
                "or pass the path of a board .toml file"
            )
    data = _read_board_file(path, seen=())
    return board_from_data(path, data)


def board_from_data(path: Path, data: dict[str, Any]) -> Board:
    """The checked Board of a board file's data (``extends`` already resolved)."""
    missing = [key for key in TOP_REQUIRED if key not in data]
    if missing:
        raise EdgeRNNError(f"board file {path} lacks {', '.join(missing)}")
    if not isinstance(data["name"], str) or not data["name"]:
        raise EdgeRNNError(f"board file {path}: name must be a string")
    return Board(name=data["name"], description=data["description"], path=path, data=data)


def _checked(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The typed sections of a board file's data, every key and type checked; a one-line error else."""
    missing = [key for key in TOP_REQUIRED if key not in data]
    if missing:
        raise EdgeRNNError(f"board file {path} lacks {', '.join(missing)}")
    for key, value in data.items():
        if key not in TOP_LEVEL:
            raise EdgeRNNError(f"board file {path}: unknown key {key} (known: {', '.join(TOP_LEVEL)}; "
                               "docs/boards/format.md)")
        kind = TOP_LEVEL[key]
        if not _type_ok(value, kind):
            what = "a table" if kind is dict else _type_words(kind)
            raise EdgeRNNError(f"board file {path}: {key} must be {what}")
    memories = _memories(path, data["memory"])
    sections = {name: _typed(cls, data[name], path, name) if name in data else (cls() if required is False else None)
                for name, (cls, required) in SECTIONS.items()}
    if sections["emulator"] is not None:
        sections["emulator"] = _emulator(path, sections["emulator"])
    sections["placement"] = _link_memory(path, sections["placement"], memories)
    if sections["toolchain"].kind == "gap_sdk" and sections["gap_sdk"] is None:
        raise EdgeRNNError(f"board file {path}: toolchain.kind = \"gap_sdk\" needs a [gap_sdk] table")
    links = sections["serial"].links
    if not links or any(link not in LINKS for link in links) or len(set(links)) != len(links):
        raise EdgeRNNError(f"board file {path}: serial.links must list links of {', '.join(LINKS)}, each once "
                           f"(got {links})")
    for quant in ("float32", "int8", "int16"):
        policy = sections["quant"].policy(quant)[0]
        if policy not in QUANT_POLICIES:
            raise EdgeRNNError(f"board file {path}: quant.{quant} must be one of {', '.join(QUANT_POLICIES)}, "
                               f"not {policy!r}")
    return {**sections, "memories_typed": memories, "link": _link_frames(path, sections["toolchain"].defines),
            "emulated": bool(data.get("emulated", False)),
            "family": data.get("family") or _family(sections)}


def _family(sections: dict[str, Any]) -> str:
    """The adapter family of a board file that names none: its toolchain and emulator say it."""
    if sections["toolchain"].kind == "gap_sdk":
        emulator = sections.get("emulator")
        return "gvsoc_gap8" if emulator is not None and emulator.kind == "gvsoc" else "gap8"
    return "native"


def _emulator(path: Path, emulator: Emulator) -> Emulator:
    kind = emulator.kind or ("announce" if emulator.serial_announce else "fd")
    if kind not in EMULATOR_KINDS:
        raise EdgeRNNError(f"board file {path}: emulator.kind must be one of {', '.join(EMULATOR_KINDS)}, "
                           f"not {kind!r}")
    if kind != "gvsoc" and not emulator.command:
        raise EdgeRNNError(f"board file {path} lacks emulator.command")
    if kind == "fd" and not any("{fd}" in a for a in emulator.command):
        raise EdgeRNNError(f"board file {path}: emulator.command of kind \"fd\" must pass {{fd}}")
    if kind == "announce" and not emulator.serial_announce:
        raise EdgeRNNError(f"board file {path}: emulator.kind \"announce\" needs emulator.serial_announce")
    return dataclasses.replace(emulator, kind=kind)


def _memories(path: Path, memories: Any) -> tuple[Memory, ...]:
    if not isinstance(memories, list) or not memories:
        raise EdgeRNNError(f"board file {path}: memory must be a list of [[memory]] tables")
    typed = []
    for index, mem in enumerate(memories):
        if not isinstance(mem, dict):
            raise EdgeRNNError(f"board file {path}: memory entry {index + 1} is not a [[memory]] table")
        for key, kind in (("name", str), ("size", int)):
            if key not in mem:
                raise EdgeRNNError(f"board file {path}: memory entry {index + 1} lacks memory.{key}")
            if not isinstance(mem[key], kind) or isinstance(mem[key], bool):
                raise EdgeRNNError(f"board file {path}: memory.{key} of entry {index + 1} must be "
                                   f"{'a string' if kind is str else 'a whole number of bytes'}")
        if mem["size"] <= 0:
            raise EdgeRNNError(f"board file {path}: memory.size of {mem['name']} must be positive")
        typed.append(_typed(Memory, mem, path, f"memory[{mem['name']}]"))
    return tuple(typed)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Tables merge key by key; anything else (a value, an array) in ``over`` replaces ``base``'s."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_board_file(path: Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    """A board file's data, with ``extends = "other"`` resolved: the other board's data (a shipped
    name, or a path relative to this file), overridden table by table by this file's."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise EdgeRNNError(f"board file {path}: {exc}") from None
    _follow_moved_templates(data)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise EdgeRNNError(f"board file {path}: extends must name a board, not {parent!r}")
    parent_path = path.parent / parent if parent.endswith(".toml") else boards_dir() / f"{parent}.toml"
    if not parent_path.is_file():
        raise EdgeRNNError(f"board file {path} extends {parent!r}, which is not a board file ({parent_path})")
    if parent_path.resolve() in seen:
        raise EdgeRNNError(f"board file {path}: extends goes round in a circle through {parent_path.name}")
    base = _read_board_file(parent_path, seen + (path.resolve(),))
    return _merge(base, data)


# Template paths that board files written for edgernn 0.x name, and where those templates are now (each
# family's C is in its room, templates/targets/<family>/).
MOVED_TEMPLATES = {
    "hal/ai_deck": "targets/gap8/hal",
    "hal/host": "targets/native/hal/host",
    "hal/qemu_riscv32": "targets/native/hal/qemu_riscv32",
    "hal/posix/edgernn_team.c": "firmware/edgernn_team.c",
}


def _follow_moved_templates(data: dict[str, Any]) -> None:
    """A board file's template paths (hal.template, placement's dma_source and stream_source, parallel.team)
    written before the templates moved into family rooms, read as where they are now."""
    for table, key in (("hal", "template"), ("placement", "dma_source"), ("placement", "stream_source"),
                       ("parallel", "team")):
        value = data.get(table, {}).get(key) if isinstance(data.get(table), dict) else None
        if not isinstance(value, str):
            continue
        for old, new in MOVED_TEMPLATES.items():
            if value == old or value.startswith(old + "/"):
                data[table][key] = new + value[len(old):]
                break
