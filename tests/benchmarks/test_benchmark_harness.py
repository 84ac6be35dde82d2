"""The benchmark harness: medians, ratios, tables and report files."""

import itertools

import pytest

from benchmarks import harness


def _fake_timer(ticks):
    values = itertools.accumulate(ticks, initial=0.0)
    return lambda: next(values)


def test_measure_keeps_per_call_seconds_and_skips_warmup():
    calls = []
    # Warm-up is not timed; then 3 rounds of 2 calls taking 2, 4 and 10 seconds.
    result = harness.measure("x", lambda: calls.append(1), work=10, repeats=3, warmup=1,
                             number=2, timer=_fake_timer([2, 0, 4, 0, 10]))
    assert len(calls) == 7
    assert result.seconds == (1.0, 2.0, 5.0)
    assert result.median_seconds == 2.0
    assert result.throughput == 5.0
    assert result.throughput_range == (2.0, 10.0)


def test_comparison_ratio_and_target():
    fast = harness.Result("ours", 100, (1.0, 1.0, 1.0))
    slow = harness.Result("peer", 100, (4.0, 5.0, 6.0))
    comparison = harness.Comparison("case", fast, slow, target=5.0)
    assert comparison.ratio == pytest.approx(5.0)
    assert comparison.meets_target
    assert not harness.Comparison("case", slow, fast, target=1.0).meets_target
    table = harness.comparison_table([comparison], "tokens")
    assert "5.00x" in table and ">= 5: met" in table


def test_invalid_inputs_are_refused():
    with pytest.raises(ValueError, match="no timings"):
        harness.Result("x", 1, ())
    with pytest.raises(ValueError, match="work per call"):
        harness.Result("x", 0, (1.0,))
    with pytest.raises(ValueError, match="repeats"):
        harness.measure("x", lambda: None, work=1, repeats=0)
    with pytest.raises(ValueError, match="3 cells"):
        harness.markdown_table(["a", "b"], [["1", "2", "3"]])


def test_format_rate():
    assert harness.format_rate(1234567) == "1.23M"
    assert harness.format_rate(456.0) == "456"
    assert harness.format_rate(45600) == "45.6k"


def test_report_written_with_machine_and_tables(tmp_path):
    ours = harness.Result("ours", 10, (1.0,))
    peer = harness.Result("peer", 10, (2.0,))
    report = harness.render_report("Title", "What ran.", harness.machine_info(["pytest"]),
                                   [ours, peer], [harness.Comparison("c", ours, peer)], "items",
                                   notes=["a note"])
    path = harness.write_report("speed", report, results_dir=tmp_path)
    text = path.read_text()
    assert text.startswith("# Title")
    assert "- cores:" in text and "2.00x" in text and "- a note" in text
    with pytest.raises(ValueError, match="plain file stem"):
        harness.write_report("../escape", report, results_dir=tmp_path)
