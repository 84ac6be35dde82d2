"""Report-only rendering, the plan prompt and the plots, all in-process with fake or no runs."""

import contextlib
import io
import json
import math
import shutil
import sys
from pathlib import Path
from unittest import mock

import tensorflow as tf
from absl.testing import parameterized
from matplotlib.container import ErrorbarContainer

from experiments import __main__ as driver
from experiments import cells, grid, jobs, plan, report, scales, schedule, summary, tables
from tests.experiments.test_experiments import TOY, FakeRunner, arguments, write_toy_data
from tests.fixtures import REPO

COMMITTED = REPO / "experiments" / "results"


def no_runs(*_, **__):
    raise AssertionError("a run was started")


def toy_summary(figure: bool = False) -> summary.TableSummary:
    """Two rows, a paper column, a missing cell and a not-applicable one, and a loss curve."""
    rows = [summary.RowSummary("first", {"sentiment": cells.Score(61.0, 2.0, 3, "lr 0.001",
                                                                 (59.0, 61.0, 63.0)),
                                         "tagging": None},
                               {"sentiment": 92.7}, series="A", step=1),
            summary.RowSummary("second", {"tagging": cells.Score(80.0, 1.0, 3, "lr 0.001")},
                               {"sentiment": 92.1}, series="A", step=2)]
    return summary.TableSummary("5", "Toy", "toy", 3, "python -m experiments --table=5",
                                ["sentiment", "tagging"], {"sentiment": "SST-2"}, ["A note."],
                                rows, figure=figure, curves={"A": [[1, 9.0], [2, 7.5]]})


class ReportOnlyTest(tf.test.TestCase):

    def render_only(self, argv):
        output = io.StringIO()
        with mock.patch.dict(scales.SCALES, {"toy": TOY}), \
                mock.patch.object(schedule, "run_grid", no_runs), \
                mock.patch.object(jobs, "run_job", no_runs), \
                mock.patch.object(driver, "run", no_runs), contextlib.redirect_stdout(output):
            driver.main(["--report_only", *argv])
        return output.getvalue()

    def test_committed_results_render_to_the_committed_tables_without_a_run(self):
        folder = Path(self.get_temp_dir()) / "committed"
        shutil.copytree(COMMITTED, folder)
        for name in tables.TABLES:  # the loss plots stay: these summaries have no curves
            (folder / f"{summary.file_stem(name, 'cpu')}.png").unlink()
        printed = self.render_only([f"--output_dir={folder}"])
        for name in tables.TABLES:
            stem = summary.file_stem(name, "cpu")
            self.assertEqual((folder / f"{stem}.md").read_text(encoding="utf-8"),
                             (COMMITTED / f"{stem}.md").read_text(encoding="utf-8"))
            self.assertEqual((folder / f"{stem}.png").read_bytes()[:4], b"\x89PNG")
            self.assertIn(f"{summary.heading(name)}: 0 cell(s) without a result", printed)

    def test_missing_cells_and_tables_are_named(self):
        folder = Path(self.get_temp_dir()) / "partial"
        summary.save(toy_summary(), folder / "table5_toy.json")
        printed = self.render_only(["--table=5,6", "--scale=toy", f"--output_dir={folder}"])
        self.assertIn("Table 5: 1 cell(s) without a result\n  no result: second / sentiment",
                      printed)
        self.assertIn(f"Table 6 (toy): no committed results, {folder / 'table6_toy.json'} "
                      "does not exist; nothing drawn", printed)
        text = (folder / "table5_toy.md").read_text(encoding="utf-8")
        self.assertIn("| second | no result | 92.1 | 80.0 ± 1.0 (lr 0.001) |", text)
        self.assertIn("| first | 61.0 ± 2.0 (lr 0.001) | 92.7 | n/a |", text)
        self.assertIn("1 cell(s) have no result", text)
        self.assertTrue((folder / "table5_toy_pretraining.png").is_file())

    def test_no_results_at_all_is_an_error(self):
        errors = io.StringIO()
        with self.assertRaises(SystemExit) as exit_info, contextlib.redirect_stderr(errors):
            self.render_only(["--table=6", f"--output_dir={self.get_temp_dir()}/none"])
        self.assertEqual(exit_info.exception.code, 1)
        self.assertRegex(errors.getvalue(), r"^python -m experiments: error: .* holds no "
                                            r"results of --table=6 at --scale=cpu\n$")

    def test_a_file_that_is_not_a_summary_is_named(self):
        path = Path(self.get_temp_dir()) / "table5_cpu.json"
        path.write_text(json.dumps({"format": 1, "name": "5"}), encoding="utf-8")
        with self.assertRaisesRegex(ValueError, f"{path}: not a results summary"):
            summary.load(path)

    def test_a_run_and_its_report_only_redraw_write_the_same_table(self):
        root = Path(self.get_temp_dir()) / "grid"
        datasets = write_toy_data(root / "data")
        argv = arguments(root, "5")
        with contextlib.redirect_stdout(io.StringIO()):
            written = driver.run(driver.parse_args(argv), "python -m experiments --table=5",
                                 FakeRunner(), TOY, datasets)
        ran = written.read_text(encoding="utf-8")
        stored = summary.load(written.with_suffix(".json"))
        self.assertLen(stored.rows[0].scores["sentiment"].values, 2)  # the seeds' own scores
        self.assertNotEmpty(stored.curves)
        written.unlink()
        self.render_only(["--table=5", "--scale=toy", f"--output_dir={written.parent}"])
        self.assertEqual(written.read_text(encoding="utf-8"), ran)


class PlanPromptTest(tf.test.TestCase):

    def setUp(self):
        super().setUp()
        self.root = Path(self.get_temp_dir()) / self.id().rsplit(".", 1)[-1]
        self.datasets = write_toy_data(self.root / "data", tagging=False)

    def main(self, argv, stdin=""):
        """driver.main on the toy scale and data, with `stdin` as standard input."""
        output, errors = io.StringIO(), io.StringIO()
        with mock.patch.dict(scales.SCALES, {"toy": TOY}), \
                mock.patch.object(scales, "default_datasets", return_value=self.datasets), \
                mock.patch.object(sys, "stdin", io.StringIO(stdin)), \
                mock.patch.object(schedule, "run_grid", no_runs), \
                contextlib.redirect_stdout(output), contextlib.redirect_stderr(errors):
            try:
                driver.main(["--table=6", "--scale=toy", f"--cache_dir={self.root / 'cache'}",
                             f"--output_dir={self.root / 'results'}", *argv])
            except SystemExit as exit_info:
                return exit_info.code, output.getvalue(), errors.getvalue()
        return 0, output.getvalue(), errors.getvalue()

    def test_no_terminal_refuses_naming_yes_and_starts_nothing(self):
        code, printed, error = self.main([])
        self.assertEqual(code, 1)
        self.assertRegex(printed, r"Plan: Table 6 at toy scale, 3 seed\(s\)")
        self.assertRegex(printed, r"\d+ runs: 0 cached, \d+ to run")
        self.assertTrue(printed.endswith("Proceed? [y/N] \n"))
        self.assertEqual(error.count("\n"), 1)
        self.assertIn("pass --yes", error)
        self.assertFalse((self.root / "cache" / "runs").exists())

    def test_no_is_no(self):
        code, _, error = self.main([], stdin="n\n")
        self.assertEqual(code, 1)
        self.assertIn("not confirmed, nothing was started", error)

    def test_yes_runs_the_plan_without_asking(self):
        runner = FakeRunner()
        with mock.patch.object(sys, "stdin", io.StringIO("")), \
                contextlib.redirect_stdout(io.StringIO()) as printed:
            driver.run(driver.parse_args(arguments(self.root, "6")), "python -m experiments",
                       runner, TOY, self.datasets)
        self.assertNotIn("Proceed?", printed.getvalue())
        every = schedule.all_jobs(tables.table("6", grid.GridBuilder(TOY, self.datasets, 2)).jobs)
        self.assertLen(runner.calls, len(every))

    def test_answering_yes_runs_and_a_cached_grid_does_not_ask(self):
        argv = [flag for flag in arguments(self.root, "6") if flag != "--yes"]
        answers = []

        def ask(prompt):
            answers.append(prompt)
            return "y"

        runner = FakeRunner()
        with contextlib.redirect_stdout(io.StringIO()):
            driver.run(driver.parse_args(argv), "command", runner, TOY, self.datasets, ask)
            self.assertEqual(answers, ["Proceed? [y/N] "])
            self.assertNotEmpty(runner.calls)
            driver.run(driver.parse_args(argv), "command", no_runs, TOY, self.datasets, no_runs)


class PlanEstimateTest(tf.test.TestCase):

    def setUp(self):
        super().setUp()
        self.cache = jobs.Cache(self.get_temp_dir())
        self.taggings = [jobs.Job("run_ner.py", {"random_seed": seed}) for seed in range(4)]
        self.pretraining = jobs.Job("run_pretraining.py", {"do_train": True,
                                                           "num_train_steps": 1000})

    def record(self, job, seconds):
        folder = self.cache.folder(job)
        folder.mkdir(parents=True)
        (folder / jobs.RESULT_FILE).write_text(json.dumps({"seconds": seconds}))

    def test_cached_runs_recorded_times_come_first(self):
        self.record(self.taggings[0], 100.0)
        self.record(self.taggings[1], 300.0)
        estimate = plan.make_plan([*self.taggings, self.pretraining], self.cache, "cpu")
        self.assertEqual((estimate.total, estimate.cached, estimate.to_run), (5, 2, 3))
        self.assertEqual(estimate.kinds, {"run_ner.py": 2, "run_pretraining.py (training)": 1})
        self.assertAllClose(estimate.seconds["run_ner.py"], 2 * 200.0)
        constant = plan.RUN_SECONDS["cpu"]["run_pretraining.py (training)"]
        self.assertAllClose(estimate.seconds["run_pretraining.py (training)"], 1000 * constant)
        self.assertEqual(estimate.measured, {"run_ner.py"})
        text = estimate.describe("cpu")
        self.assertIn("2 x run_ner.py: ~7 min in all (recorded by cached runs)", text)
        self.assertIn("(the cpu scale's constant)", text)

    def test_a_scale_without_constants_says_so(self):
        estimate = plan.make_plan(self.taggings, self.cache, "toy")
        self.assertIsNone(estimate.seconds["run_ner.py"])
        self.assertIn("4 x run_ner.py: no estimate", estimate.describe("toy"))
        self.assertNotIn("Estimated time", estimate.describe("toy"))


class PlotTest(parameterized.TestCase, tf.test.TestCase):

    def test_table_plot_has_units_error_bars_the_paper_and_a_zero_baseline(self):
        figure = report.plot(toy_summary())
        sentiment, tagging = figure.axes
        for axis in (sentiment, tagging):
            self.assertNotEmpty(axis.get_ylabel())
            self.assertEqual(axis.get_ylim()[0], 0.0)
            self.assertTrue(any(isinstance(c, ErrorbarContainer) for c in axis.containers))
        self.assertEqual(sentiment.get_ylabel(), "dev accuracy (%)")
        paper = [line for line in sentiment.get_lines() if line.get_label() == "paper: SST-2"]
        self.assertLen(paper, 1)
        self.assertAllClose(paper[0].get_ydata(), [92.7, 92.1])
        self.assertNotEqual(paper[0].get_marker(), "o")
        legend = [text.get_text() for text in sentiment.get_legend().get_texts()]
        self.assertCountEqual(legend, ["paper: SST-2", "ours (mean ± s.d.)"])
        bars = next(c for c in sentiment.containers if isinstance(c, ErrorbarContainer))
        self.assertTrue(bars.has_yerr)
        (segments,) = bars.lines[2]
        self.assertAllClose(segments.get_segments()[0][:, 1], [59.0, 63.0])  # 61 ± 2
        ticks = [label.get_text() for label in sentiment.get_xticklabels()]
        self.assertEqual(ticks, ["first", "second (no result)"])
        self.assertLessEqual(sentiment.get_ylim()[1], 100.0)
        self.assertIn("starts at 0", figure.get_suptitle())

    def test_figure_plot_draws_one_line_with_error_bars_per_series(self):
        figure = report.plot(toy_summary(figure=True))
        axis = figure.axes[0]
        self.assertEqual(axis.get_xlabel(), "pre-training steps")
        self.assertLen([c for c in axis.containers if isinstance(c, ErrorbarContainer)], 1)
        self.assertEqual(axis.get_ylim()[0], 0.0)

    def test_loss_plot_is_labelled(self):
        axis = report.plot_pretraining(toy_summary()).axes[0]
        self.assertIn("loss", axis.get_ylabel())
        self.assertEqual(axis.get_xlabel(), "pre-training steps")
        self.assertEqual(axis.get_ylim()[0], 0.0)

    @parameterized.parameters(("sentiment", "dev accuracy (%)"), ("tagging", "test F1 (%)"),
                              ("tagging (feature-based)", "test F1 (%)"),
                              ("perplexity", "masked-LM perplexity (lower is better)"),
                              ("LM accuracy", "LM accuracy on the records (%)"),
                              ("SQuAD", "dev F1 (%)"), ("MRPC", "dev score (x 100)"))
    def test_y_labels_name_the_unit(self, column, label):
        self.assertEqual(report.y_label(column), label)

    def test_not_a_number_is_stored_as_null_and_read_back(self):
        table = toy_summary()
        table.rows[1].scores["sentiment"] = cells.Score(math.nan, math.nan, 0, "every run diverged")
        path = Path(self.get_temp_dir()) / "nan.json"
        summary.save(table, path)
        self.assertIn('"mean": null', path.read_text(encoding="utf-8"))
        loaded = summary.load(path)
        self.assertTrue(math.isnan(loaded.rows[1].scores["sentiment"].mean))
        self.assertEqual(loaded.rows[0], table.rows[0])


if __name__ == "__main__":
    tf.test.main()
