"""Boards are data: one TOML file each under boards/, or a path the user gives."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgernn.errors import EdgeRNNError
from edgernn.resources import boards_dir

_REQUIRED = ("name", "description", "cpu", "memory", "toolchain", "serial", "hal")


@dataclass(frozen=True)
class Board:
    name: str
    description: str
    path: Path
    data: dict[str, Any] = field(repr=False)

    @property
    def emulated(self) -> bool:
        return bool(self.data.get("emulated", False))

    @property
    def memories(self) -> list[dict[str, Any]]:
        return list(self.data["memory"])

    def memory(self, name: str) -> dict[str, Any]:
        for mem in self.memories:
            if mem["name"] == name:
                return mem
        raise EdgeRNNError(f"board {self.name}: no memory named {name!r} in {self.path}")

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)


def known_boards() -> list[str]:
    return sorted(p.stem for p in boards_dir().glob("*.toml"))


def load_board(name_or_path: str | Path) -> Board:
    """A board by shipped name (``host``) or by the path of the user's own TOML file."""
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
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise EdgeRNNError(f"board file {path}: {exc}") from None
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise EdgeRNNError(f"board file {path} lacks {', '.join(missing)}")
    return Board(name=data["name"], description=data["description"], path=path, data=data)
