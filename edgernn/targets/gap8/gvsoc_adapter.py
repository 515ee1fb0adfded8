"""The GAP8 family in GVSOC (``gvsoc_gap8``): the very GAP SDK project of ``ai_deck``, built with the
SDK's rules, run in GreenWaves' simulator (edgernn.targets.gap8.gvsoc) with the UART on a loopback TCP port."""

from __future__ import annotations

import os
from pathlib import Path

from edgernn.errors import EdgeRNNError
from edgernn.targets.adapter import Adapter, Device, FirmwareBuild
from edgernn.targets.gap8.adapter import Gap8Adapter


class GvsocGap8Adapter(Gap8Adapter):
    family = "gvsoc_gap8"
    profiler = "GVSOC's instruction trace of the cluster's cores"

    def _next_line(self, out: Path, manifest, build: FirmwareBuild) -> str:
        return (f"built with the GAP SDK ({manifest.build.firmware['compilers'][0]}, code "
                f"{manifest.code_bytes} B) -> {out / manifest.build.firmware['elf']}; "
                f"next: edgernn validate {out}")

    def setup(self, *, force: bool = False, fetch: bool = False, source_url: str | None = None,
              source_commit: str | None = None, log=print) -> list[str]:
        """GVSOC built from $GAP_SDK_HOME (or, with ``fetch``, from upstream gap_sdk cloned into the cache),
        ending with the self-test of its UART."""
        from edgernn.targets.gap8 import sdk
        from edgernn.targets.gap8.gvsoc import gvsoc_marker

        home = sdk.fetch_sdk(source_url, source_commit, log=log) if fetch else None
        install = sdk.build_gvsoc(home, log=log, force=force, rehash=True)
        test = gvsoc_marker(install).get("selftest", {})
        entries = sdk.cache_entries()
        lines = [f"GVSOC ready: {install} (board {self.board.name}; GAP SDK {home or sdk.sdk_home()}; UART "
                 f"self-test: {test.get('bytes', 0)} bytes echoed exactly at {test.get('baud', '?')} baud)",
                 f"cache: {sdk.cache_root()} ({len(entries)} GVSOC entries, "
                 f"{sum(size for _, size in entries) / 1e6:.0f} MB; the {sdk.KEEP_ENTRIES} most recently used "
                 "are kept)"]
        if fetch and not os.environ.get("GAP_SDK_HOME"):
            lines.append(f"edgernn uses this SDK while $GAP_SDK_HOME is unset; to build ai_deck projects by hand: "
                         f"export GAP_SDK_HOME={home}")
        return lines

    def flash(self, out_dir: Path, *, rebuild: bool = False, radio: str | None = None) -> Device:
        """Build the project if needed and start it in GVSOC: ``device.url`` is the UART's TCP port."""
        if radio:
            raise EdgeRNNError(f"board {self.board.name} is not flashed over the radio; --radio is for ai_deck")
        self._require_project(out_dir)
        return Adapter.flash(self, out_dir, rebuild=rebuild)

    def start(self, elf, port: int | None = None) -> Device:
        """GAP8 firmware in GVSOC, its link on 127.0.0.1 (``port``, else a free one): the UART, or for a
        ``--link wifi`` build the deck's ESP32 (CPX over TCP). The flash image and the simulator's
        configuration go beside the ELF, in gvsoc/."""
        from edgernn.targets.gap8 import gvsoc
        from edgernn.targets.gap8.sdk import build_gvsoc

        elf = Path(elf)
        if not elf.is_file():
            raise EdgeRNNError(f"no firmware at {elf}: build it first")
        link = project_link(elf)
        install = build_gvsoc()
        if link == "wifi":
            from edgernn.targets.gap8.cpx_check import require_cpx_self_test

            require_cpx_self_test(install)
        sim = gvsoc.start_gvsoc(elf, elf.parent / "gvsoc", uart_port=port, install=install,
                                timeout=self.board.emulator.start_timeout_s, baud=self.board.serial.baud,
                                readfs_files=_readfs_files(elf), link=link)
        return Device(self.board, sim.url, elf, sim.process, [], sim.command, simulator=sim,
                      restarter=self._restart)

    def start_app(self, out_dir: Path, camera_stream: str) -> Device:
        """OUT's camera application in GVSOC, the camera playing ``camera_stream`` (image files, a path with %d
        for the frame index) and the deck's ESP32 on 127.0.0.1 (``device.url``: cpx://...), where the application
        sends its outputs once a host has connected."""
        from edgernn.targets.gap8 import gvsoc
        from edgernn.targets.gap8.cpx_check import require_cpx_self_test
        from edgernn.targets.gap8.sdk import build_gvsoc

        out_dir = Path(out_dir)
        self._require_project(out_dir)
        elf = self.find_firmware(out_dir)
        if elf is None:
            raise EdgeRNNError(f"{out_dir}/firmware has no built application: build it with `edgernn build MODEL "
                               f"--board {self.board.name} --app camera -o {out_dir}`")
        install = build_gvsoc()
        require_cpx_self_test(install)
        sim = gvsoc.start_gvsoc(elf, Path(elf).parent / "gvsoc", install=install,
                                timeout=self.board.emulator.start_timeout_s, readfs_files=_readfs_files(elf),
                                link="wifi", camera_stream=camera_stream)
        return Device(self.board, sim.url, Path(elf), sim.process, [], sim.command, simulator=sim)

    def start_profiled(self, out_dir: Path, step: int):
        """OUT's firmware in GVSOC's debug build, every cluster core's instructions traced
        (edgernn.targets.gap8.gvsoc_trace.GvsocTracedRun)."""
        from edgernn.targets.gap8.sdk import build_gvsoc
        from edgernn.targets.gap8.gvsoc_trace import GvsocTracedRun

        out_dir = Path(out_dir)
        self._require_project(out_dir)
        elf = Path(self.find_firmware(out_dir) or self.build_elf(out_dir / "firmware").elf)
        return GvsocTracedRun(elf, out_dir / "firmware" / "model.c", self.board, step, install=build_gvsoc(),
                         readfs_files=_readfs_files(elf))

    def _restart(self, device: Device) -> None:
        """A new simulator listens on the same TCP port (the host reconnects, as a USB-UART adapter stays
        while the board behind it resets)."""
        port = device.simulator.port
        device.simulator.stop()
        restarted = self.start(device.elf, port)
        device.simulator, device.process, device.url = restarted.simulator, restarted.process, restarted.url


def _project_dir(elf: Path) -> Path | None:
    """The project folder (its Makefile) that holds the ELF's BUILD/ tree."""
    for folder in Path(elf).resolve().parents:
        if (folder / "Makefile").is_file():
            return folder
    return None


def project_link(elf: Path) -> str:
    """The link the ELF's project was built with: ``wifi`` when its Makefile defines EDGERNN_LINK_WIFI=1 (what
    `edgernn build --link wifi` writes), else ``uart``."""
    folder = _project_dir(elf)
    if folder is not None and "-DEDGERNN_LINK_WIFI=1" in (folder / "Makefile").read_text(errors="replace"):
        return "wifi"
    return "uart"


def _readfs_files(elf: Path) -> list[Path]:
    """The files the project's Makefile puts in the flash image's readfs (READFS_FILES): the streamed
    weights' blob of a model beyond L2 (edgernn/backend/streaming.py), found in the project folder that
    holds the ELF's BUILD/ tree."""
    from edgernn.backend.streaming import BLOB

    for folder in Path(elf).resolve().parents:
        if (folder / "Makefile").is_file():
            blob = folder / BLOB
            return [blob] if blob.is_file() else []
    return []
