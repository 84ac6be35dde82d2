"""experiments.paper_tasks and its report: the queue's order and choices, the results file.

No fine-tuning runs here: results are written into a cache the way
`experiments.jobs` leaves them, and the queue and report read them back.
"""

import contextlib
import io
import json
import math

from experiments import paper_tasks, paper_tasks_render
from experiments.jobs import Cache, RESULT_FILE
from tests.fixtures import TestCase


def sweep_result(scores: dict[float, float]) -> dict:
    return {"sweep": [[rate, 0, score] for rate, score in scores.items()]}


class PaperTasksTest(TestCase):

    def setUp(self):
        super().setUp()
        root = self.tmp_path()
        self.glue = root / "glue"
        for cell in paper_tasks.CELLS:
            folder = self.glue / cell.task
            folder.mkdir(parents=True, exist_ok=True)
            rows = [f"row {i}\t{i % 2}" for i in range(7000 if cell.train_subset else 10)]
            (folder / "train.tsv").write_text("\n".join(["sentence\tlabel", *rows]) + "\n")
        model = root / "model"
        model.mkdir()
        (model / "config.json").write_text("{}")
        self.plan = paper_tasks.Plan(self.glue, model, Cache(root / "cache"))

    def finish(self, job, result):
        folder = self.plan.cache.folder(job)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / RESULT_FILE).write_text(json.dumps(result))

    def test_chosen_rate_is_the_first_best_finished_run(self):
        self.assertEqual(paper_tasks.chosen_rate(sweep_result(
            {5e-5: 0.80, 4e-5: math.nan, 3e-5: 0.83, 2e-5: 0.83})), 3e-5)
        with self.assertRaisesRegex(ValueError, "every run of the sweep diverged"):
            paper_tasks.chosen_rate(sweep_result({5e-5: math.nan}))

    def test_sweeps_first_then_each_cells_seeds_at_its_chosen_rate(self):
        ready = list(self.plan.ready())
        self.assertEqual([(job.settings["task_name"], job.settings["adam_bias_correction"])
                          for job in ready], [(c.task, c.bias_correction)
                                              for c in paper_tasks.CELLS])
        first = ready[0]
        self.assertEqual((first.tool, first.settings["learning_rates"],
                          first.settings["num_restarts"], first.settings["random_seed"]),
                         ("run_classifier.py", "5e-05,4e-05,3e-05,2e-05", 1, 12345))
        self.finish(first, sweep_result({5e-5: 0.80, 4e-5: 0.84, 3e-5: 0.83, 2e-5: 0.70}))
        ours, peer = list(self.plan.ready())[:2]
        self.assertEqual((ours.tool, peer.tool), ("run_classifier.py", "-m experiments.glue_peer"))
        for job in (ours, peer):
            self.assertEqual((job.settings["learning_rates"], job.settings["num_restarts"],
                              job.settings["random_seed"], job.settings["do_predict"]),
                             ("4e-05", 3, 12346, True))
        self.assertNotIn(first.key, [job.key for job in self.plan.ready()])
        self.finish(ours, {})
        self.assertEqual(list(self.plan.ready())[0].key, peer.key)

    def test_a_fixed_rate_runs_the_chosen_tasks_seeds_without_a_sweep(self):
        plan = paper_tasks.Plan(self.glue, self.plan.model.paths[0], self.plan.cache,
                                fixed_rate=2e-5, tasks=["RTE"])
        ready = list(plan.ready())
        self.assertEqual([(job.tool, job.settings["adam_bias_correction"]) for job in ready],
                         [("run_classifier.py", False), ("-m experiments.glue_peer", False),
                          ("run_classifier.py", True), ("-m experiments.glue_peer", True)])
        self.assertEqual({(job.settings["task_name"], job.settings["learning_rates"],
                           job.settings["num_restarts"]) for job in ready}, {("RTE", "2e-05", 3)})
        for flags, message in ((["--tasks=RTE,QQP"], r"unknown task\(s\) QQP"),
                               (["--learning_rate=-1"], r"between 0 and 1, got -1")):
            stderr = io.StringIO()
            with self.assertRaises(SystemExit), contextlib.redirect_stderr(stderr):
                paper_tasks.parse_args([f"--glue_dir={self.glue}", *flags])
            self.assertRegex(stderr.getvalue(), message)

    def test_a_reduced_training_set_is_a_fixed_sample_of_the_real_one(self):
        source = self.glue / "SST-2"
        (source / "dev.tsv").write_text("sentence\tlabel\ndev row\t1\n")
        subset = paper_tasks.subset_folder(source, 4, self.tmp_path() / "subsets")
        lines = (subset / "train.tsv").read_text().splitlines()
        original = (source / "train.tsv").read_text().splitlines()
        self.assertEqual(lines[0], "sentence\tlabel")
        self.assertLen(lines, 5)
        self.assertEqual(lines[1:], [line for line in original[1:] if line in lines[1:]])
        self.assertEqual((subset / "dev.tsv").read_text(), (source / "dev.tsv").read_text())
        again = paper_tasks.subset_folder(source, 4, self.tmp_path() / "other")
        self.assertEqual((again / "train.tsv").read_text(), (subset / "train.tsv").read_text())
        with self.assertRaisesRegex(ValueError, r"train\.tsv: 7000 rows, no fewer than the 7000"):
            paper_tasks.subset_folder(source, 7000, self.tmp_path() / "too-many")

    def test_the_queue_refuses_a_folder_without_the_glue_layout(self):
        with self.assertRaisesRegex(SystemExit, r"lacks CoLA, WNLI.*<glue_dir>/<TASK>/train\.tsv"):
            for task in ("CoLA", "WNLI"):
                (self.glue / task / "train.tsv").unlink()
            paper_tasks.main([f"--glue_dir={self.glue}", "--yes"])


def side(scores: list[float], chosen: int, seed: int = 12346, warning: str = "") -> dict:
    runs = [{"learning_rate": 3e-5, "restart": index, "status": "finished",
             "scores": {"accuracy": score, "f1": score}, "chosen": index == chosen,
             "warning": warning if index == chosen else ""} for index, score in enumerate(scores)]
    return {"command": "python run_classifier.py --output_dir=OUT", "done": True, "runs": runs,
            "seed": seed, "seconds": 3600.0, "cpu_seconds": 5400.0, "majority": 0.684,
            "examples": {"train": [3667, 0]}}


class PaperTasksRenderTest(TestCase):

    def summary(self) -> dict:
        cell = {"task": "MRPC", "bias_correction": False, "max_seq_length": 128,
                "train_subset": None, "data": {"train.tsv": "ab12"}, "rate": 3e-5,
                "sweep": side([0.80], 0, seed=12345),
                "ours": side([0.80, 0.84, 0.82], 1),
                "pytorch": side([0.70, 0.71, 0.72], 2, warning="degenerate: near majority")}
        waiting = {"task": "RTE", "bias_correction": True, "max_seq_length": 128,
                   "train_subset": None, "data": {}, "sweep": {
                       "command": "python run_classifier.py", "done": False, "runs": [],
                       "seed": 12345}}
        return {"cells": [cell, waiting], "machine": {"Model name": "a CPU"}}

    def test_table_gives_spread_selection_and_the_gap_against_its_noise(self):
        text = paper_tasks_render.markdown(self.summary(), "paper_tasks.png")
        row = next(line for line in text.splitlines() if line.startswith("| MRPC"))
        self.assertIn("| 82.0 ± 2.0 / 82.0 ± 2.0 | 84.0 / 84.0 (seed 12347) |", row)
        self.assertIn("| 71.0 ± 1.0 / 71.0 ± 1.0 | 72.0 / 72.0 (seed 12348) ⚠ |", row)
        # 11.0 points against 2 x sqrt(4/3 + 1/3) = 2.58.
        self.assertIn("+11.0 (2 s.e. 2.6, **beyond noise**)", row)
        self.assertIn("| 68.4 (accuracy) |", row)
        waiting = next(line for line in text.splitlines() if line.startswith("| RTE"))
        self.assertIn("| sweeping | waiting |", waiting)
        self.assertIn("wall 1.00 h, CPU 1.50 h; train: 3,667 examples, 0 truncated", text)
        # 3 seeds x 3 epochs x 3,667 examples in 5,400 CPU seconds, both sides.
        self.assertIn("| MRPC, original optimizer | 1.00 / 1.50 | 6.1 | 1.00 / 1.50 | 6.1 | "
                      "1.00 / 1.50 |", text)

    def test_a_resumed_sides_times_are_bounds(self):
        summary = self.summary()
        summary["cells"][0]["ours"]["resumed"] = True
        text = paper_tasks_render.markdown(summary, "paper_tasks.png")
        self.assertIn("| MRPC, original optimizer | at least 1.00 / 1.50 (resumed) | at most 6.1 "
                      "| 1.00 / 1.50 | 6.1 |", text)
        self.assertIn("wall 1.00 h, CPU 1.50 h (the last attempt's: resumed after an "
                      "interruption)", text)

    def test_redrawing_keeps_the_other_sections_of_the_file(self):
        output = self.tmp_path()
        paper_tasks_render.render(self.summary(), output, "paper_tasks")
        page = output / "paper_tasks.md"
        edited = page.read_text().replace("(To be filled: `run_ner.py`", "CoNLL rows (`run_ner.py`")
        page.write_text(edited)
        written = paper_tasks_render.render(self.summary(), output, "paper_tasks")
        self.assertEqual(written, [page, output / "paper_tasks.png"])
        self.assertEqual(page.read_text(), edited)
        self.assertEqual((output / "paper_tasks.png").read_bytes()[:4], b"\x89PNG")
