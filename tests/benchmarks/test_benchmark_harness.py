"""The benchmark harness: medians, ratios, tables and report files."""

import itertools
import os
import sys

import tensorflow as tf

from benchmarks import harness
from tests.fixtures import TestCase


def _fake_timer(ticks):
    values = itertools.accumulate(ticks, initial=0.0)
    return lambda: next(values)


class BenchmarkHarnessTest(TestCase):

    def test_measure_keeps_per_call_seconds_and_skips_warmup(self):
        calls = []
        # Warm-up is not timed; then 3 rounds of 2 calls taking 2, 4 and 10 seconds.
        result = harness.measure("x", lambda: calls.append(1), work=10, repeats=3, warmup=1,
                                 number=2, timer=_fake_timer([2, 0, 4, 0, 10]))
        self.assertLen(calls, 7)
        self.assertEqual(result.seconds, (1.0, 2.0, 5.0))
        self.assertEqual(result.median_seconds, 2.0)
        self.assertEqual(result.throughput, 5.0)
        self.assertEqual(result.throughput_range, (2.0, 10.0))

    def test_comparison_ratio_and_target(self):
        fast = harness.Result("ours", 100, (1.0, 1.0, 1.0))
        slow = harness.Result("peer", 100, (4.0, 5.0, 6.0))
        comparison = harness.Comparison("case", fast, slow, target=5.0)
        self.assertAllClose(comparison.ratio, 5.0, rtol=1e-6, atol=1e-12)
        self.assertTrue(comparison.meets_target)
        self.assertFalse(harness.Comparison("case", slow, fast, target=1.0).meets_target)
        table = harness.comparison_table([comparison], "tokens")
        self.assertIn("5.00x", table)
        self.assertIn(">= 5: met", table)

    def test_invalid_inputs_are_refused(self):
        with self.assertRaisesRegex(ValueError, "no timings"):
            harness.Result("x", 1, ())
        with self.assertRaisesRegex(ValueError, "work per call"):
            harness.Result("x", 0, (1.0,))
        with self.assertRaisesRegex(ValueError, "repeats"):
            harness.measure("x", lambda: None, work=1, repeats=0)
        with self.assertRaisesRegex(ValueError, "3 cells"):
            harness.markdown_table(["a", "b"], [["1", "2", "3"]])

    def test_format_rate(self):
        self.assertEqual(harness.format_rate(1234567), "1.23M")
        self.assertEqual(harness.format_rate(456.0), "456")
        self.assertEqual(harness.format_rate(45600), "45.6k")

    def test_report_written_with_machine_and_tables(self):
        tmp_path = self.tmp_path()
        ours = harness.Result("ours", 10, (1.0,))
        peer = harness.Result("peer", 10, (2.0,))
        report = harness.render_report("Title", "What ran.", harness.machine_info(["pytest"]),
                                       [ours, peer], [harness.Comparison("c", ours, peer)], "items",
                                       notes=["a note"])
        path = harness.write_report("speed", report, results_dir=tmp_path)
        text = path.read_text()
        self.assertTrue(text.startswith("# Title"))
        self.assertIn("- cores:", text)
        self.assertIn("2.00x", text)
        self.assertIn("- a note", text)
        with self.assertRaisesRegex(ValueError, "plain file stem"):
            harness.write_report("../escape", report, results_dir=tmp_path)

    def test_worker_process_answers_each_request_and_reports_its_crash(self):
        tmp_path = self.tmp_path()
        echo = ("import json, sys\n"
                "for line in sys.stdin:\n"
                "    print(json.dumps({'got': line.strip()}), flush=True)\n")
        worker = harness.WorkerProcess("echo", [sys.executable, "-c", echo],
                                       tmp_path / "echo.log", dict(os.environ), tmp_path)
        self.assertEqual(worker.request("3"), {"got": "3"})
        self.assertEqual(worker.request('{"batch": 1}'), {"got": '{"batch": 1}'})
        worker.close()
        self.assertEqual(worker.process.returncode, 0)
        crash = "import sys; sys.exit('no model here')"
        worker = harness.WorkerProcess("broken", [sys.executable, "-c", crash],
                                       tmp_path / "broken.log", dict(os.environ), tmp_path)
        worker.process.wait()  # gone before the request: the pipe is broken too
        with self.assertRaisesRegex(RuntimeError, r"broken worker exited \(1\):\nno model here"):
            worker.request("1")
        worker.close()


if __name__ == "__main__":
    tf.test.main()
