"""The serving profiler's report: a section per label, op types by time with their counts."""

import collections

from benchmarks import profile_serving
from tests.fixtures import TestCase


def _result(wall, ms, counts):
    return {"wall": wall, "ms": collections.Counter(ms), "counts": counts}


class ProfileServingTest(TestCase):

    def test_a_section_lists_wall_time_op_time_and_the_heaviest_op_types(self):
        text = profile_serving.section("after", {
            "minilm, float32, batch 1": _result(
                20.0, {"_MklNativeFusedMatMul": 12.5, "Mul": 0.25, "_MklEinsum": 2.0},
                {"_MklNativeFusedMatMul": 37, "Mul": 40, "_MklEinsum": 24})}, checkout="")
        self.assertIn("| minilm, float32, batch 1 | 20.0 | 14.8 | 101 |", text)
        self.assertIn("- minilm, float32, batch 1: _MklNativeFusedMatMul 12.5 ms (37); "
                      "_MklEinsum 2.0 ms (24); Mul 0.2 ms (40)", text)
        self.assertIn("Model code: this checkout.", text)

    def test_an_overhead_section_gives_each_way_of_calling_beside_the_served_call(self):
        text = profile_serving.overhead_section("overhead", {"minilm, batch 1": {
            "as served": [10.0, 15.0], "empty function": [1.0, 1.5]}})
        self.assertIn("minilm, batch 1:", text)
        self.assertIn("| as served | 10.00 | +0.00 | 15.00 | +0.00 |", text)
        self.assertIn("| empty function | 1.00 | -9.00 | 1.50 | -13.50 |", text)

    def test_sections_replace_their_own_label_only(self):
        path = self.tmp_path() / "profile.md"
        for label, numbers in (("before", "old"), ("after", "first"), ("after", "second")):
            profile_serving.write_section(label, f"## {label}\n\n{numbers} numbers\n", path)
        text = path.read_text()
        self.assertTrue(text.startswith("# Where a served encoder call's time goes\n"))
        self.assertIn("old numbers", text)
        self.assertIn("second numbers", text)
        self.assertNotIn("first numbers", text)
        self.assertLess(text.index("## before"), text.index("## after"))
        self.assertFalse(path.with_suffix(".md.partial").exists())
