"""``--ns3-only`` on real ns-3: given a results file whose only BMv2 cells are [Ragasa]'s
(every rank broadcasting 16 KiB at once), ns-3 simulates the same on the stored links and the
report sets its ratios beside BMv2's. Its own module: ns-3 has one simulator per process."""

from __future__ import annotations

from pathlib import Path

from mininet_topos.experiments.reproduce import runner as reproduce
from mininet_topos.experiments.reproduce.results import Results, Run
from tests.unit.test_reproduce import cell, measurement

LINKS = {
    "rate_mbit": 100.0,
    "global_rate_mbit": 90.0,
    "delay_s": 0.0001,
    "global_delay_s": 0.0001,
    "queue_packets": 1000,
}


def ragasa_file(path: Path) -> None:
    results = Results("df:2,2,1", "quick", 1)
    for name, t in {"innet": 0.02, "ragasa": 0.021, "binomial": 0.06}.items():
        m = measurement(algorithm=name, chosen=name, ranks=12, completion_s=[t, t])
        results.cells[f"ragasa:{name}/16384"] = cell(f"ragasa:{name}/16384", m, members=12)
    env = {"links": LINKS, "mtu": 9000, "dilation": 1000.0, "cores": 2}
    results.runs.append(Run("2026-11-27T05:39:05Z", "python -m ... --only ragasa", "abc", env))
    results.save(path)


def test_ns3_only_puts_ns3s_ragasa_ratios_beside_bmv2s(tmp_path: Path) -> None:
    path, report = tmp_path / "results.json", tmp_path / "results.md"
    ragasa_file(path)
    args = ["--ns3-only", "--topo", "df:2,2,1", "--results", str(path), "--report", str(report)]
    assert reproduce.main([*args, "--img-dir", str(tmp_path / "img")]) == 0
    ns3 = Results.load(path).ns3
    for key in ("all-roots-ragasa", "all-roots-innet"):
        entry = ns3[key]
        assert entry["mode"] == "all_roots" and entry["baseline"] == "binomial"
        assert entry["ratio"] > 1.0  # replication in the routers beats store and forward
        assert entry["times_us"]["binomial"] == entry["slowest_us"]["binomial"]
    text = report.read_text()
    ratio = ns3["all-roots-ragasa"]["ratio"]
    row = "| bcast 16384 B, every rank a root at once: ragasa over the fastest of binomial "
    assert f"{row}| 2.86x | {ratio:.2f}x | 2.99x |" in text
