#!/usr/bin/env python3
"""Unit tests of the comparison script `run` (no engine is built or run):

    python3 benches/peers/test_run.py
"""

import importlib.machinery
import importlib.util
import tempfile
import unittest
from pathlib import Path


def load_run():
    """The script `run` (no .py suffix) as a module."""
    path = Path(__file__).resolve().parent / "run"
    loader = importlib.machinery.SourceFileLoader("peers_run", str(path))
    spec = importlib.util.spec_from_loader("peers_run", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


run = load_run()


class FakeEngine:
    """An engine whose workloads return fixed figures, recording what was asked of it."""

    def __init__(self, name, ycsb=True):
        self.name, self.calls, self._ycsb = name, [], ycsb
        self.compact_variants = ["default"]

    def can_ycsb(self):
        return self._ycsb

    def chain(self, num, d):
        self.calls.append(("chain", num))
        return {"fillrandom": 1.0}

    def read_while_writing(self, num, d, threads):
        self.calls.append(("readwhilewriting", num, threads))
        return {"ops_per_sec": 2.0, "writes_per_sec": 1.0}


def rww_run(engine, reads, writes):
    """A readwhilewriting entry of results.json's runs."""
    return {"round": 1, "workload": "readwhilewriting", "engine": engine, "variant": None,
            "ops_per_sec": reads, "writes_per_sec": writes}


def results_with(runs):
    """A results.json object holding `runs` of Sluice and Pebble, tables filled in."""
    results = {
        "command": "benches/peers/run", "date": "2026-01-01 00:00 UTC",
        "machine": {"nproc": 2, "cpu": "cpu", "memory": "1 GiB", "kernel": "6",
                    "disk": "disk", "scratch": "/tmp"},
        "num": 1000, "repeat": 1, "versions": {"sluice": "x", "pebble": "v2"},
        "skipped": {}, "settings_differ": {"pebble": ["a note"]}, "db_bench_flags": None,
        "readwhilewriting": {"threads": 1, "reads": 1000, "seed": run.RWW_SEED},
        "runs": runs,
    }
    run.tabulate(results)
    return results


class CumulativeWrites(unittest.TestCase):
    def test_reads_rocksdbs_rounded_counts(self):
        line = "Cumulative writes: {0} writes, {0} keys, {0} commit groups, 1.0 writes per"
        self.assertEqual(run.cumulative_writes("x\n" + line.format("9999") + "\n"), 9999)
        self.assertEqual(run.cumulative_writes(line.format("62K")), 62_000)
        self.assertEqual(run.cumulative_writes(line.format("12M")), 12_000_000)

    def test_refuses_output_without_the_line(self):
        with self.assertRaises(ValueError):
            run.cumulative_writes("readwhilewriting : 1 micros/op")


class Jobs(unittest.TestCase):
    def test_readwhilewriting_alone_runs_the_chain_and_records_only_itself(self):
        engine = FakeEngine("pebble")
        jobs = run.round_jobs([engine], 0, ["readwhilewriting"])
        self.assertEqual(jobs, [("chain", engine, None)])
        with tempfile.TemporaryDirectory() as d:
            measured = run.measure(engine, "chain", None, 1000, Path(d),
                                   ["readwhilewriting"], 3)
        self.assertEqual([w for w, _ in measured], ["readwhilewriting"])
        self.assertEqual(engine.calls, [("chain", 1000), ("readwhilewriting", 1000, 3)])

    def test_the_chain_alone_does_not_run_readwhilewriting(self):
        engine = FakeEngine("pebble")
        with tempfile.TemporaryDirectory() as d:
            measured = run.measure(engine, "chain", None, 1000, Path(d), ["chain"], 1)
        self.assertEqual([w for w, _ in measured], ["chain"])
        self.assertEqual(engine.calls, [("chain", 1000)])

    def test_jobs_follow_the_workload_order_and_rotate_engines(self):
        a, b = FakeEngine("a"), FakeEngine("b", ycsb=False)
        jobs = run.round_jobs([a, b], 1, ["ycsb-a", "readwhilewriting", "chain"])
        self.assertEqual([(w, e.name) for w, e, _ in jobs],
                         [("chain", "b"), ("chain", "a"), ("ycsb-a", "a")])


class Tables(unittest.TestCase):
    def test_only_the_workloads_that_ran_have_rows_and_chart_notes(self):
        results = results_with([rww_run("sluice", 300.0, 100.0), rww_run("pebble", 100.0, 200.0)])
        ratios = results["tables"]["ratios"]
        self.assertEqual([row[0].split()[:2] for row in ratios["rows"]],
                         [["readwhilewriting", "reads"], ["readwhilewriting", "writes"]])
        self.assertEqual([row[1] for row in ratios["rows"]], ["3.00", "0.50"])
        chart = results["chart"]
        self.assertEqual([row["label"] for row in chart["rows"]],
                         ["rww reads", "rww writer"])
        self.assertEqual(len(chart["notes"]), 1)
        self.assertIn("rww: readwhilewriting", chart["notes"][0])


class Docs(unittest.TestCase):
    def test_the_page_embeds_the_charts_it_is_given_and_states_its_units(self):
        results = results_with([rww_run("sluice", 300.0, 100.0), rww_run("pebble", 100.0, 200.0)])
        page = run.docs(results, {"peers_ratio": "benchmarks/peers_ratio.png"})
        self.assertIn(run.UNITS_NOTE, page)
        self.assertIn("MB = 10^6 bytes", page)
        self.assertIn("](benchmarks/peers_ratio.png)", page)
        self.assertNotIn("peers_medians", page)
        self.assertIn("readwhilewriting: 1 reader thread doing 1,000 lookups", page)
        self.assertNotIn("YCSB:", page.split("\n\n")[2])

    def test_charts_go_beside_the_page_and_stale_ones_are_removed(self):
        class Drawer:
            """Draws only the ratio chart, as `sluice chart peers` does without a peer."""

            def chart(self, results_json, out):
                (Path(out) / "peers_ratio.png").write_bytes(b"png")

        results = results_with([rww_run("sluice", 300.0, 100.0)])
        with tempfile.TemporaryDirectory() as tmp:
            page = Path(tmp) / "docs" / "benchmarks.md"
            stale = page.with_suffix("") / "peers_medians.png"
            stale.parent.mkdir(parents=True)
            stale.write_bytes(b"old")
            charts = run.docs_charts(results, page, Drawer())
            self.assertEqual(charts, {"peers_ratio": "benchmarks/peers_ratio.png"})
            self.assertEqual((page.parent / charts["peers_ratio"]).read_bytes(), b"png")
            self.assertFalse(stale.exists())


if __name__ == "__main__":
    unittest.main()
