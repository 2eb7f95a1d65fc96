"""Result files of the experiments (reproduce, reliability): written whole or not at all, and
read back by a later version of the code."""

from __future__ import annotations

import json
import os
from dataclasses import fields
from pathlib import Path
from typing import Any


def save_atomically(path: Path, data: dict[str, Any]) -> None:
    """A run killed while saving leaves the previous file whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(temporary, path)


def known_fields(kind: type, data: dict[str, Any]) -> dict[str, Any]:
    """The fields ``kind`` has: a file written by a later version still loads."""
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in data.items() if k in names}
