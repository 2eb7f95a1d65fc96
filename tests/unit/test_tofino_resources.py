"""The reader of the Tofino compiler's resource reports (controller/tofino/resources.py).

tests/unit/data/tofino/pipe/logs/ holds a small compile report written for these tests, laid
out as the compiler lays it out: resources.json (four of Tofino 1's twelve stages listed, one of
them empty) and metrics.json. Both validate against the schemas in p4c v1.2.5.16's
backends/tofino/compiler_interfaces/schemas (resources 2.4.2, metrics 1.0.0), and the compiler's
own create_mau_resources.py gives the same per-stage counts and totals for it as these tests
expect (exact xbar 2, ternary xbar 1, hash bits 10, gateways 1, SRAM 4, map RAM 2, TCAM 2,
VLIW 3, meter ALUs 3, stats ALUs 1, logical tables 5).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from controller.tofino import resources
from controller.tofino.resources import ResourceReportError, StageUse

pytestmark = pytest.mark.unit

SAMPLE = Path(__file__).resolve().parent / "data" / "tofino"
RESOURCES_JSON = SAMPLE / "pipe" / "logs" / "resources.json"


@pytest.fixture()
def doc() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(RESOURCES_JSON.read_text())
    return loaded


def test_stages_and_per_stage_use(doc: dict[str, Any]) -> None:
    report = resources.parse_resources(doc)
    assert report.n_stages == 12
    assert report.compiler_version.startswith("9.13.4")
    # stages 0, 1 and 3 hold tables; the pipeline needs 4 stages
    assert report.stages_used == 4
    by_stage = {s.stage: s for s in report.stages}
    assert by_stage[0].used == StageUse(
        logical_tables=1, srams=1, exact_xbar_bytes=2, hash_bits=10, vliw=2
    )
    assert by_stage[1].used == StageUse(
        logical_tables=2,
        srams=2,
        map_rams=1,
        tcams=2,
        stateful_alus=1,
        meter_alus=1,
        gateways=1,
        ternary_xbar_bytes=1,
        vliw=1,
    )
    assert not by_stage[2].used.any()
    # a meter ALU that runs no RegisterAction is not a stateful ALU
    assert (by_stage[3].used.stateful_alus, by_stage[3].used.meter_alus) == (1, 2)
    assert by_stage[3].tables == (
        "TnaIngress.netcoll.barrier_state.tbl_barrier_cell_merge_arrival",
        "TnaIngress.netcoll.child_replication.mp_replication",
    )


def test_totals_match_the_compilers_own_log(doc: dict[str, Any]) -> None:
    total = resources.parse_resources(doc).totals()
    assert total == StageUse(
        logical_tables=5,
        srams=4,
        map_rams=2,
        tcams=2,
        stateful_alus=2,
        meter_alus=3,
        stats_alus=1,
        gateways=1,
        exact_xbar_bytes=2,
        ternary_xbar_bytes=1,
        hash_bits=10,
        vliw=3,
    )


def test_capacity_per_stage_is_tofino_1s(doc: dict[str, Any]) -> None:
    capacity = resources.parse_resources(doc).stages[0].available
    assert (capacity.srams, capacity.map_rams, capacity.tcams) == (80, 48, 24)
    assert (capacity.stateful_alus, capacity.logical_tables, capacity.hash_bits) == (4, 16, 416)
    assert (capacity.exact_xbar_bytes, capacity.ternary_xbar_bytes) == (128, 66)


def test_phv_from_metrics_with_the_containers_available() -> None:
    report = resources.read_report(SAMPLE)
    assert report is not None and report.source == str(RESOURCES_JSON)
    assert [(p.width, p.occupied, p.available) for p in report.phv] == [
        (8, 30, 64),
        (16, 40, 96),
        (32, 20, 64),
    ]


def test_formatted_report(doc: dict[str, Any]) -> None:
    report = resources.read_report(SAMPLE)
    assert report is not None
    lines = resources.format_report(report)
    assert lines[0] == "stages: 4 of 12"
    header = lines[1].split()
    assert header[:6] == ["stage", "tables", "SRAM", "mapRAM", "TCAM", "sALU"]
    rows = {line.split()[0]: line.split() for line in lines[2:] if not line.startswith("PHV")}
    assert set(rows) == {"0", "1", "3", "total", "per"}  # empty stage 2 left out
    assert rows["total"][1:6] == ["5", "4", "2", "2", "2"]
    assert rows["per"][2:7] == ["16", "80", "48", "24", "4"]  # "per stage"
    assert "PHV 16-bit containers: 40 of 96 occupied (610 bits)" in lines
    summary = report.summary()
    assert summary["stages_used"] == 4 and summary["stages_available"] == 12
    assert [s["stage"] for s in summary["per_stage"]] == [0, 1, 3]
    json.dumps(summary)  # plain data


def test_missing_fields_are_named(doc: dict[str, Any]) -> None:
    broken = copy.deepcopy(doc)
    del broken["resources"]["mau"]["mau_stages"][1]["meter_alus"]
    with pytest.raises(ResourceReportError, match=r"mau_stages\[1\]: no 'meter_alus'"):
        resources.parse_resources(broken)
    broken = copy.deepcopy(doc)
    broken["resources"]["mau"]["mau_stages"][0]["stage_number"] = -1
    with pytest.raises(ResourceReportError, match="stage -1 is negative"):
        resources.parse_resources(broken)


def test_a_placement_longer_than_the_device_is_reported(doc: dict[str, Any]) -> None:
    """A placement the assembler refuses (more stages than the device has) is read as it is:
    stages_used says how many it takes."""
    longer = copy.deepcopy(doc)
    longer["resources"]["mau"]["mau_stages"][0]["stage_number"] = 15
    report = resources.parse_resources(longer)
    assert (report.stages_used, report.n_stages) == (16, 12)
    assert resources.format_report(report)[0] == "stages: 16 of 12"
    with pytest.raises(ResourceReportError, match="no 'resources'"):
        resources.parse_resources({"schema_version": "2.4.2"})


def test_no_report_without_resources_json(tmp_path: Path) -> None:
    assert resources.read_report(tmp_path) is None
    (tmp_path / "pipe" / "logs").mkdir(parents=True)
    (tmp_path / "pipe" / "logs" / "resources.json").write_text("{not json")
    with pytest.raises(ResourceReportError, match=r"resources\.json"):
        resources.read_report(tmp_path)
