"""Every repository file the code and the docs cite exists: a comment, docstring or page that
names ``tests/unit/test_x.py`` or ``docs/y.md`` is checked against the tree, so moving or
renaming a file cannot leave a stale pointer behind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("p4src", "controller", "mininet_topos", "host_agents", "tests", "docs", ".ci")
TOP_FILES = ("README.md", "Makefile", "pyproject.toml", "Vagrantfile")
SUFFIXES = {".py", ".p4", ".md", ".toml", ".txt", ""}
CITED = re.compile(
    r"(?<![\w/.-])((?:p4src|controller|mininet_topos|host_agents|tests|docs)/[\w./-]*\w\.(?:py|p4|md))\b"
)


def text_files() -> list[Path]:
    files = [ROOT / name for name in TOP_FILES]
    for top in SOURCES:
        files += [
            p
            for p in (ROOT / top).rglob("*")
            if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts
        ]
    this = Path(__file__).resolve()  # its examples are stale on purpose
    return [p for p in files if p.exists() and p.resolve() != this]


def test_cited_files_exist() -> None:
    missing = []
    for path in text_files():
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for cited in CITED.findall(line):
                if not (ROOT / cited).exists():
                    missing.append(f"{path.relative_to(ROOT)}:{lineno} cites {cited}")
    assert not missing, "\n".join(missing)


def test_the_check_sees_a_stale_citation() -> None:
    assert CITED.findall("see tests/unit/test_p4_constants.py.") == [
        "tests/unit/test_p4_constants.py"
    ]
    assert not (ROOT / "tests/unit/test_p4_constants.py").exists()
