"""The control plane reads the program's sizes from its P4Info, never from constants: a program
built with other -D sizes is described by what it was built with.

Compiles the v1model program once with non-default sizes; skips where p4c-bm2-ss is missing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from controller import p4info
from controller.switch_state import Sizes
from tests.requirements import BUILD_DIR, ROOT

pytestmark = pytest.mark.unit

P4C = shutil.which("p4c-bm2-ss")
PROGRAM = ROOT / "p4src" / "v1model" / "netcoll.p4"
DEFINES = {
    "NETCOLL_COMM_SLOTS": 64,
    "NETCOLL_BARRIER_WINDOW": 8,
    "NETCOLL_AGG_WINDOW": 4,
    "NETCOLL_AGG_LANES": 8,
}


def compile_with(defines: dict[str, int], out: Path) -> Path:
    info = out / "netcoll.p4info.txtpb"
    command = [str(P4C), "--std", "p4-16", "--target", "bmv2", "--arch", "v1model"]
    command += [f"-D{name}={value}" for name, value in defines.items()]
    command += ["-o", str(out / "netcoll.json"), "--p4runtime-files", str(info), str(PROGRAM)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr.lower(), result.stderr
    return info


@pytest.mark.skipif(P4C is None, reason="p4c-bm2-ss is not installed (make build)")
def test_sizes_follow_the_defines_the_program_was_built_with(tmp_path: Path) -> None:
    sizes = p4info.sizes_from_p4info(p4info.load_schema(compile_with(DEFINES, tmp_path)))
    assert sizes.comm_slots == 64 and sizes.barrier_window == 8
    assert sizes.agg_window == 4 and sizes.agg_lanes == 8
    assert sizes.agg_slots == 256 and sizes.agg_payload_bytes == 32


@pytest.mark.skipif(
    not (BUILD_DIR / "netcoll.p4info.txtpb").exists(), reason="no build/ program (make build)"
)
def test_the_default_build_has_the_default_sizes() -> None:
    schema = p4info.load_schema(BUILD_DIR / "netcoll.p4info.txtpb")
    assert p4info.sizes_from_p4info(schema) == Sizes()
