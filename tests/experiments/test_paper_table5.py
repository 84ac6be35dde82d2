"""The Table 5 page's reading of C2, and the grid flags that put real GLUE tasks in it."""

from pathlib import Path

from experiments import __main__ as driver
from experiments import paper_table5, scales
from experiments.cells import Score
from experiments.summary import RowSummary, TableSummary
from tests.fixtures import TestCase


def table(scores: dict[str, dict[str, Score]]) -> TableSummary:
    rows = [RowSummary(name, dict(by_column), {"MRPC": paper})
            for (name, by_column), paper in zip(scores.items(), (86.7, 86.5, 77.5, 75.7))]
    return TableSummary("5", "Pre-training tasks", "cpu", 3, "command", ["MRPC", "RTE"],
                        {"MRPC": "MRPC"}, [], rows)


class PaperTable5Test(TestCase):

    def test_c2_counts_a_gap_only_beyond_seed_noise(self):
        made = table({"BERT (MLM + NSP)": {}, "No NSP": {"MRPC": Score(75.0, 1.0, 3),
                                                          "RTE": Score(55.0, 2.0, 3)},
                      "LTR & No NSP": {"MRPC": Score(70.0, 0.5, 3), "RTE": Score(54.0, 1.0, 3)},
                      "+ BiLSTM": {}})
        lines = paper_table5.c2_lines(made)
        self.assertEqual(lines[0], "- MRPC: No NSP 75.0 ± 1.0, LTR & No NSP 70.0 ± 0.5: +5.0 "
                                   "points, bidirectional ahead (the larger standard deviation "
                                   "over 3 seeds is 1.0); the paper: +9.0.")
        self.assertIn("RTE: No NSP 55.0 ± 2.0, LTR & No NSP 54.0 ± 1.0: +1.0 points, level "
                      "within seed noise", lines[1])
        self.assertTrue(lines[2].startswith("- In all: bidirectional ahead beyond seed noise on "
                                            "1 of 2 task(s), left-to-right on 0, level on 1"))

    def test_an_unfinished_column_is_named_not_judged(self):
        made = table({"BERT (MLM + NSP)": {}, "No NSP": {"MRPC": Score(75.0, 1.0, 3)},
                      "LTR & No NSP": {}, "+ BiLSTM": {}})
        self.assertEqual(paper_table5.c2_lines(made)[:2], ["- MRPC: not finished yet.",
                                                           "- RTE: not finished yet."])


class GridFlagsTest(TestCase):

    def test_builtin_tasks_and_glue_cap_are_checked(self):
        args = driver.parse_args(["--table=5", "--builtin_tasks=", "--glue_dir=g",
                                  "--glue_train_examples=10"])
        self.assertEqual((args.builtin_tasks, args.glue_train_examples), ((), 10))
        for bad in (["--table=5", "--builtin_tasks=sentiment,pos"],
                    ["--table=5", "--builtin_tasks="],
                    ["--table=5", "--glue_train_examples=0"]):
            with self.assertRaises(SystemExit):
                driver.parse_args(bad)

    def test_a_glue_folder_is_capped_only_when_larger(self):
        source, work = self.tmp_path() / "SST-2", self.tmp_path()
        source.mkdir()
        (source / "train.tsv").write_text("sentence\tlabel\n" + "a\t1\n" * 5)
        (source / "dev.tsv").write_text("sentence\tlabel\nb\t0\n")
        capped = scales.sentiment_subset(source, work, 3, "SST-2")
        self.assertEqual(capped, work / "SST-2_3")
        self.assertEqual((capped / "train.tsv").read_text(), "sentence\tlabel\n" + "a\t1\n" * 3)
        self.assertEqual((capped / "dev.tsv").read_text(), "sentence\tlabel\nb\t0\n")
        self.assertEqual(scales.sentiment_subset(source, work, 5, "SST-2"), Path(source))
