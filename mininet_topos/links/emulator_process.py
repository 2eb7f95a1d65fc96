"""The link emulator as a process of a running network: started between the two ends of every
emulated link, told which faults to apply, asked what it did."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mininet_topos.links.bringup import LinkPlan
from mininet_topos.links.linkemu import EmulatorClient, LinkSpec
from mininet_topos.links.linkfaults import Impairment
from mininet_topos.tooling.registry import RunRegistry

START_TIMEOUT_S = 20.0


class EmulatorStartError(RuntimeError):
    pass


def start_emulator(
    run_dir: Path,
    control: Path,
    links: Sequence[LinkSpec],
    seed: int,
    faults: Impairment | None,
    registry: RunRegistry,
) -> subprocess.Popen[bytes]:
    """The seeded link emulator between the two ends of every link of ``links``, listening on
    ``control``; recorded in ``registry`` so ``make stop`` ends it after a crash."""
    config = run_dir / "links.json"
    config.write_text(
        json.dumps(
            {
                "seed": seed,
                "faults": asdict(faults) if faults else None,
                "links": [asdict(s) for s in links],
            }
        )
    )
    log_path = run_dir / "linkemu.log"
    argv = [sys.executable, "-m", "mininet_topos.links.linkemu"]
    argv += ["--config", str(config), "--control", str(control)]
    with log_path.open("wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=str(Path.cwd()))
    registry.record_process(process.pid, "link emulator")
    deadline = time.monotonic() + START_TIMEOUT_S
    while not control.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise EmulatorStartError(
                f"the link emulator did not start: {log_path.read_text()[-300:]}"
            )
        time.sleep(0.05)
    return process


def set_faults(
    control: Path,
    emulated: Sequence[LinkSpec],
    plan: LinkPlan,
    impairment: Impairment,
    links: list[str] | None = None,
) -> int:
    """Impair every emulated link, or only ``links`` (by name); a delayed link keeps its
    propagation delay under any setting. Returns how many links the emulator changed."""
    by_kind: dict[str, list[str]] = {}
    for spec in emulated:
        if links is None or spec.name in links:
            by_kind.setdefault(spec.kind, []).append(spec.name)
    client = EmulatorClient(control)
    count = 0
    try:
        for kind, names in by_kind.items():
            setting = plan.with_base_delay(impairment, kind)
            count += int(client.call(op="set", faults=asdict(setting), links=names)["links"])
    finally:
        client.close()
    return count


def stats(control: Path) -> dict[str, Any]:
    client = EmulatorClient(control)
    try:
        return client.call(op="stats")
    finally:
        client.close()
