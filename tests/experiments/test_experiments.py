"""The ablation driver: one real toy grid end to end, then cache, resumption and reports in-process.

Only the first test starts the real tools (each subprocess imports
TensorFlow); the others give the driver a fake runner that writes what each
tool would, so they check the caching and resumption logic in milliseconds.
"""

import contextlib
import dataclasses
import io
import json
import os
import random
import re
import signal
import subprocess
import threading
import sys
from pathlib import Path
from unittest import mock

import pytest
import tensorflow as tf
from absl.testing import parameterized

from experiments import __main__ as driver
from experiments import grid, jobs, scales, schedule, tables
from experiments.summary import whole_curve
from tests.fixtures import REPO, TestCase

pytestmark = pytest.mark.slow

WORDS = ("the cat dog runs walks fast slow red blue green house tree river sun moon sees likes "
         "old new big small man woman child eats reads book").split()

ONE_PHASE = (scales.Phase(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1, steps=2,
                          warmup=1, batch=8, learning_rate=1e-3),)
TOY = scales.Scale(
    name="toy", vocab_size=1100, phases=ONE_PHASE,
    base_model=(2, 32), table6_models=((1, 32),), figure_steps=(1, 2),
    learning_rates=(1e-3, 3e-3),
    classifier={"max_seq_length": 32, "train_batch_size": 8, "eval_batch_size": 8,
                "num_train_epochs": 1},
    tagger={"max_seq_length": 32, "train_batch_size": 2, "num_train_epochs": 1},
    feature_tagger={"learning_rate": 1e-3, "lstm_units": 8, "num_train_epochs": 1},
    sentiment_train_examples=None, max_eval_steps=2, jit_compile=False)


def write_toy_data(root: Path, tagging: bool = True) -> scales.Datasets:
    """A corpus of random sentences, a 16-line sentiment task and a 3-sentence tagging task."""
    root.mkdir(parents=True, exist_ok=True)
    generator = random.Random(0)
    sentences = [" ".join(generator.choice(WORDS) for _ in range(generator.randint(5, 12)))
                 + " ." for _ in range(240)]
    documents = ["\n".join(sentences[start:start + 6]) for start in range(0, 240, 6)]
    (root / "corpus.txt").write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    sentiment = root / "sentiment"
    sentiment.mkdir(exist_ok=True)
    good, bad = ("a fine warm film", "great and funny"), ("dull and slow", "a bad mess")
    for name, count in (("train", 16), ("dev", 8)):
        rows = [f"{(good if i % 2 else bad)[i // 2 % 2]}\t{i % 2}" for i in range(count)]
        (sentiment / f"{name}.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n",
                                               encoding="utf-8")
    datasets = scales.Datasets(jobs.Dataset("corpus", (root / "corpus.txt",)),
                             jobs.Dataset("sentiment", (sentiment,)))
    if not tagging:
        return datasets
    tags = root / "tagging"
    tags.mkdir(exist_ok=True)
    for name in ("train", "valid", "test"):
        (tags / f"{name}.txt").write_text("The B-DT\ncat B-NN\nruns B-VBZ\n\nA B-DT\ndog B-NN\n\n",
                                          encoding="utf-8")
    return dataclasses.replace(datasets, tagging=jobs.Dataset("tagging", (tags,)))


def arguments(tmp_path: Path, table: str, seeds: int = 2) -> list[str]:
    return [f"--table={table}", f"--cache_dir={tmp_path / 'cache'}",
            f"--output_dir={tmp_path / 'results'}", f"--seeds={seeds}", "--workers=1", "--yes"]


def run_driver(argv: list[str], runner, scale=TOY, datasets=None) -> Path:
    return driver.run(driver.parse_args(argv), "python -m experiments " + " ".join(argv),
                      runner=runner, scale=scale, datasets=datasets)


class FakeRunner:
    """Writes the files each tool would write, with scores that depend on its flags; counts calls.

    `fail_at` (a call number) makes that call leave a partial output and raise,
    as a crash or Ctrl-C mid-run would; `kill_at` kills the whole process there.
    """

    def __init__(self, fail_at: int | None = None, kill_at: int | None = None):
        self.calls: list[list[str]] = []
        self.fail_at, self.kill_at = fail_at, kill_at

    def __call__(self, arguments, log, environment):
        self.calls.append(arguments)
        flags = dict(argument[2:].split("=", 1) for argument in arguments
                     if argument.startswith("--"))
        tool = arguments[1] if arguments[0] == "-m" else arguments[0]
        output = Path(flags.get("output_dir") or Path(flags["output_file"]).parent)
        output.mkdir(parents=True, exist_ok=True)
        if len(self.calls) == self.kill_at:
            (output / "partial").write_text("half")
            os.kill(os.getpid(), signal.SIGKILL)
        if len(self.calls) == self.fail_at:
            (output / "partial").write_text("half")
            raise KeyboardInterrupt
        # A number that differs between runs but is the same for the same settings.
        settings = " ".join(f"{k}={v}" for k, v in sorted(flags.items()) if "/" not in v)
        score = (sum(map(ord, settings)) % 1000) / 2000 + 0.4
        if tool == "data_prep.vocab":
            Path(flags["output_file"]).write_text("\n".join(f"w{i}" for i in range(50)) + "\n")
        elif tool == "data_prep.create_pretraining_data":
            Path(flags["output_file"]).write_text("records")
        elif tool == "run_pretraining.py":
            if flags.get("do_train") == "true":  # the training loop's progress lines
                log.write_text("".join(f"step {step}/2  1.00 steps/s  8.0 examples/s  "
                                       f"loss={score + 2 - step} masked_lm_loss=9.9  ETA 0:00:01\n"
                                       for step in (1, 2)))
            (output / "bert_config.json").write_text("{}")
            (output / "eval_results.txt").write_text(
                f"masked_lm_accuracy = {score}\nlm_accuracy = {score}\nperplexity = {1 / score}\n")
            for step in range(1, 3):
                (output / f"ckpt-{step}.index").write_text("")
        elif tool == "run_classifier.py":
            rates = flags["learning_rates"].split(",")
            lines = ["learning_rate\trestart\tdev_score\tstatus\tchosen"] + [
                f"{rate}\t{restart}\t{score + 0.01 * restart + 0.1 * index:.4f}\tfinished\t"
                for index, rate in enumerate(rates)
                for restart in range(int(flags["num_restarts"]))]
            (output / "sweep_results.tsv").write_text("\n".join(lines) + "\n")
            (output / "model.ckpt.data-00000-of-00001").write_bytes(b"weights")
        elif tool == "run_squad.py":
            (output / "eval_results.txt").write_text(f"exact_match = 0\nf1 = {100 * score}\n")
        elif tool == "run_ner.py":
            (output / "eval_results.txt").write_text(
                f"eval_f1 = {score}\ntest_f1 = {score - 0.05}\n")
        else:
            raise AssertionError(f"unexpected tool {tool}")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip("|").split("|")]


class ExperimentsDriverTest(TestCase, parameterized.TestCase):

    @pytest.mark.long
    def test_toy_grid_end_to_end_then_from_the_cache(self):
        """The real tools: vocabulary, records, a 2-step pre-training, a fine-tuning sweep."""
        tmp_path = self.tmp_path()
        datasets = write_toy_data(tmp_path / "data", tagging=False)
        scale = dataclasses.replace(TOY, tasks=("sentiment",), learning_rates=(1e-3,))
        argv = arguments(tmp_path, "6", seeds=1)
        report = run_driver(argv, jobs.subprocess_runner, scale, datasets)

        self.assertEqual(report, tmp_path / "results" / "table6_toy.md")
        text = report.read_text(encoding="utf-8")
        row = next(line for line in text.splitlines() if line.startswith("| L1/H32/A2 |"))
        perplexity, sentiment = _cells(row)[1:]
        self.assertGreater(float(perplexity), 1.0)
        self.assertBetween(float(sentiment.split()[0]), 0.0, 100.0)
        self.assertEndsWith(sentiment, "(lr 0.001)")
        self.assertIn("python -m experiments --table=6", text)
        png = tmp_path / "results" / "table6_toy.png"
        self.assertEqual(png.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")

        # A finished grid re-prints from the cache without starting any tool.
        counting = FakeRunner()
        report.unlink()
        run_driver(argv, counting, scale, datasets)
        self.assertEqual(counting.calls, [])
        self.assertEqual(report.read_text(encoding="utf-8"), text)

    def test_second_run_starts_nothing_and_tables_share_runs(self):
        tmp_path = self.tmp_path()
        datasets = write_toy_data(tmp_path / "data")
        first = FakeRunner()
        run_driver(arguments(tmp_path, "5"), first, datasets=datasets)
        table5 = tables.table("5", grid.GridBuilder(TOY, datasets, 2))
        self.assertLen(first.calls, len(schedule.all_jobs(table5.jobs)))

        again = FakeRunner()
        run_driver(arguments(tmp_path, "5"), again, datasets=datasets)
        self.assertEqual(again.calls, [])

        # Table 8's 80/10/10 row is Table 5's BERT row: its data, pre-training and fine-tunings.
        table8 = FakeRunner()
        run_driver(arguments(tmp_path, "8"), table8, datasets=datasets)
        needed = schedule.all_jobs(tables.table("8", grid.GridBuilder(TOY, datasets, 2)).jobs)
        shared = {job.key for job in needed} & {job.key for job in schedule.all_jobs(table5.jobs)}
        self.assertGreaterEqual(len(shared), 5)
        self.assertLen(table8.calls, len(needed) - len(shared))

    def test_keys_follow_settings_and_contents_not_paths(self):
        tmp_path = self.tmp_path()
        one = write_toy_data(tmp_path / "one")
        two = write_toy_data(tmp_path / "two")
        keys = [{job.key for job in
                 schedule.all_jobs(tables.table("5", grid.GridBuilder(TOY, data, 2)).jobs)}
                for data in (one, two)]
        self.assertEqual(keys[0], keys[1])

        more_steps = dataclasses.replace(TOY,
                                         phases=(dataclasses.replace(ONE_PHASE[0], steps=3),))
        changed = {job.key for job in schedule.all_jobs(
            tables.table("5", grid.GridBuilder(more_steps, one, 2)).jobs)}
        # the vocabulary and the three sets of records
        self.assertLen(changed & keys[0], 4)
        with open(tmp_path / "one" / "corpus.txt", "a", encoding="utf-8") as corpus:
            corpus.write("one more line .\n")
        jobs._fingerprint.cache_clear()
        edited = {job.key for job in schedule.all_jobs(
            tables.table("5", grid.GridBuilder(TOY, one, 2)).jobs)}
        self.assertEmpty(edited & keys[0])

    def test_an_interrupted_run_leaves_no_result_and_is_run_again(self):
        tmp_path = self.tmp_path()
        datasets = write_toy_data(tmp_path / "data", tagging=False)
        table = tables.table("5", grid.GridBuilder(TOY, datasets, 2))
        every = schedule.all_jobs(table.jobs)
        interrupted = FakeRunner(fail_at=4)  # a fine-tuning: not resumable
        with self.assertRaises(KeyboardInterrupt):
            run_driver(arguments(tmp_path, "5"), interrupted, datasets=datasets)
        cache = jobs.Cache(tmp_path / "cache")
        # The runs already started beside the failed one finish; nothing after them starts.
        done = [job for job in every if cache.result(job) is not None]
        self.assertLen(done, len(interrupted.calls) - 1)
        self.assertGreaterEqual(len(done), 2)
        failed = next(job for job in every if (cache.output(job) / "partial").exists())
        self.assertIsNone(cache.result(failed))

        resumed = FakeRunner()
        run_driver(arguments(tmp_path, "5"), resumed, datasets=datasets)
        self.assertLen(resumed.calls, len(every) - len(done))
        # restarted from a clean folder
        self.assertFalse((cache.output(failed) / "partial").exists())

    def test_resumes_after_the_driver_is_killed(self):
        """SIGKILL in the middle of the third run; the rerun runs only what has no result."""
        tmp_path = self.tmp_path()
        write_toy_data(tmp_path / "data", tagging=False)
        script = (
            "import sys\n"
            "from pathlib import Path\n"
            "from tests.experiments import test_experiments as t\n"
            "root = Path(sys.argv[1])\n"
            "t.run_driver(t.arguments(root, '5'), t.FakeRunner(kill_at=3),\n"
            "             datasets=t.write_toy_data(root / 'data', tagging=False))\n")
        killed = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=REPO,
                                capture_output=True, text=True, timeout=120)
        self.assertEqual(killed.returncode, -signal.SIGKILL, killed.stderr)

        datasets = write_toy_data(tmp_path / "data", tagging=False)
        every = schedule.all_jobs(tables.table("5", grid.GridBuilder(TOY, datasets, 2)).jobs)
        results = list((tmp_path / "cache" / "runs").glob(f"*/{jobs.RESULT_FILE}"))
        self.assertLen(results, 2)
        resumed = FakeRunner()
        report = run_driver(arguments(tmp_path, "5"), resumed, datasets=datasets)
        self.assertLen(resumed.calls, len(every) - 2)
        self.assertTrue(report.is_file())

    def test_report_puts_the_paper_beside_ours_and_marks_what_does_not_apply(self):
        tmp_path = self.tmp_path()
        datasets = write_toy_data(tmp_path / "data")
        runner = FakeRunner()
        report = run_driver(arguments(tmp_path, "5"), runner, datasets=datasets)
        lines = report.read_text(encoding="utf-8").splitlines()
        header = next(line for line in lines if line.startswith("| variant"))
        self.assertEqual(header, "| variant | sentiment (ours) | paper: SST-2 | tagging (ours) |")
        bert = next(line for line in lines if line.startswith("| BERT (MLM + NSP) |"))
        cells = _cells(bert)
        # Two restarts at the better rate (the fake gives the second rate +10 points): mean ± std.
        self.assertEndsWith(cells[1], "(lr 0.003)")
        self.assertIn(" ± ", cells[1])
        self.assertEqual(cells[2], "92.7")
        # The left-to-right model is tagged causally, and again with a BiLSTM on top.
        ltr = next(line for line in lines if line.startswith("| LTR & No NSP |"))
        self.assertIn(" ± ", _cells(ltr)[3])
        bilstm = next(line for line in lines if line.startswith("| + BiLSTM |"))
        for column in (1, 3):
            self.assertIn(" ± ", _cells(bilstm)[column])
        tagged = [call for call in runner.calls if call[0] == "run_ner.py"]
        self.assertEqual(sum("--causal=true" in call for call in tagged), len(tagged) // 2)
        with_bilstm = [call for call in runner.calls
                       if f"--bilstm_units={TOY.base_model[1]}" in call]
        # its tagging runs and one sentiment sweep
        self.assertLen(with_bilstm, len(tagged) // 4 + 1)
        for call in with_bilstm:
            self.assertIn("--causal=true", call)
        self.assertTrue((tmp_path / "results" / "table5_toy.png").is_file())
        # The pre-trainings' loss curves, read from their logs (loss=, not masked_lm_loss=).
        self.assertIn("![table5_toy_pretraining](table5_toy_pretraining.png)", lines)
        bert = tables.table("5", grid.GridBuilder(TOY, datasets, 2)).rows[0].pretraining
        curve = jobs.Cache(tmp_path / "cache").result(bert)["train_loss"]
        self.assertEqual([step for step, _ in curve], [1, 2])
        self.assertAllClose(curve[0][1] - curve[1][1], 1, rtol=1e-6, atol=1e-12)

    def test_figure_runs_every_checkpoint_and_draws_curves(self):
        tmp_path = self.tmp_path()
        datasets = write_toy_data(tmp_path / "data", tagging=False)
        runner = FakeRunner()
        report = run_driver(arguments(tmp_path, "fig5"), runner, datasets=datasets)
        checkpoints = [flag for call in runner.calls for flag in call
                       if flag.startswith("--init_checkpoint=")]
        # Per objective and step: one evaluation and one fine-tuning sweep.
        self.assertEqual(sorted(Path(flag).name for flag in checkpoints),
                         ["ckpt-1"] * 4 + ["ckpt-2"] * 4)
        self.assertTrue(any("--causal=true" in call for call in runner.calls))
        text = report.read_text(encoding="utf-8")
        self.assertIn("| MLM @ 2 |", text)
        self.assertIn("| LTR @ 1 |", text)
        self.assertEqual((tmp_path / "results" / "fig5_toy.png").read_bytes()[:4], b"\x89PNG")

    def test_fine_tunings_keep_scores_not_weights(self):
        tmp_path = self.tmp_path()
        datasets = write_toy_data(tmp_path / "data", tagging=False)
        run_driver(arguments(tmp_path, "6"), FakeRunner(), datasets=datasets)
        cache = jobs.Cache(tmp_path / "cache")
        table = tables.table("6", grid.GridBuilder(TOY, datasets, 2))
        classifier = next(job for job in table.jobs if job.tool == "run_classifier.py")
        self.assertEqual(sorted(os.listdir(cache.output(classifier))), ["sweep_results.tsv"])
        result = json.loads((cache.folder(classifier) / jobs.RESULT_FILE).read_text())
        self.assertLen(result["sweep"], 4)

    @parameterized.parameters(
        (["--table=5", "--seeds=0"], "--seeds must be positive, got 0"),
        (["--table=9"], "argument --table: invalid choice: '9'"),
        (["--table=5,x"], "argument --table: invalid choice: 'x'"),
    )
    def test_bad_flags_are_refused(self, argv, message):
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), self.assertRaises(SystemExit) as exit_info:
            driver.main(argv)
        self.assertEqual(exit_info.exception.code, 2)
        self.assertIn(message, stderr.getvalue())

    def test_missing_glue_folder_is_one_clear_error(self):
        tmp_path = self.tmp_path()

        def no_fetching():
            raise AssertionError("fetched the corpus before checking --glue_dir")

        self.enter_context(mock.patch.object(scales, "pretraining_corpus_files", no_fetching))
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), self.assertRaises(SystemExit) as exit_info:
            driver.main(["--table=5", f"--cache_dir={tmp_path}",
                         f"--glue_dir={tmp_path / 'nowhere'}"])
        self.assertEqual(exit_info.exception.code, 1)
        error = stderr.getvalue().strip()
        self.assertStartsWith(error, "python -m experiments: error: --glue_dir=")
        self.assertIn("no such folder", error)
        self.assertNotIn("\n", error)

    def test_glue_folders_become_columns(self):
        tmp_path = self.tmp_path()
        (tmp_path / "glue" / "MRPC").mkdir(parents=True)
        (tmp_path / "glue" / "MRPC" / "train.tsv").write_text("x\n")
        found = scales.glue_datasets(str(tmp_path / "glue"), [])
        self.assertEqual([task for task, _ in found], ["MRPC"])
        datasets = dataclasses.replace(write_toy_data(tmp_path / "data"), glue=found)
        table = tables.table("5", grid.GridBuilder(TOY, datasets, 1))
        self.assertEqual(table.columns, ["sentiment", "tagging", "MRPC"])
        self.assertEqual(table.rows[0].paper["MRPC"], 86.7)
        # The left-to-right row reads MRPC's pairs in both orders (GPT's similarity input).
        ltr = next(row for row in table.rows if row.name == "LTR & No NSP")
        self.assertIs(ltr.cells["MRPC"].jobs[0].settings["both_orders"], True)
        self.assertNotIn("both_orders", ltr.cells["sentiment"].jobs[0].settings)
        self.assertNotIn("both_orders", table.rows[0].cells["MRPC"].jobs[0].settings)
        with self.assertRaisesRegex(OSError, "has no QNLI/ folder"):
            scales.glue_datasets(str(tmp_path / "glue"), ["QNLI"])

    def test_squad_folder_adds_a_column_for_every_row(self):
        tmp_path = self.tmp_path()
        squad = tmp_path / "squad"
        squad.mkdir()
        with self.assertRaisesRegex(OSError, "has no train-v1.1.json"):
            scales.squad_datasets(str(squad))
        for name in scales.SQUAD_FILES:
            (squad / name).write_text('{"data": []}')
        datasets = dataclasses.replace(write_toy_data(tmp_path / "data", tagging=False),
                                       squad=scales.squad_datasets(str(squad)))
        runner = FakeRunner()
        report = run_driver(arguments(tmp_path, "5"), runner, datasets=datasets)
        squad_runs = [call for call in runner.calls if call[0] == "run_squad.py"]
        # Four rows (the last two left-to-right, one with a BiLSTM) x two rates x two seeds.
        self.assertLen(squad_runs, 16)
        self.assertEqual(sum("--causal=true" in call for call in squad_runs), 8)
        self.assertEqual(sum(f"--bilstm_units={TOY.base_model[1]}" in call
                             for call in squad_runs), 4)
        lines = report.read_text(encoding="utf-8").splitlines()
        bert = next(line for line in lines if line.startswith("| BERT (MLM + NSP) |"))
        bilstm = next(line for line in lines if line.startswith("| + BiLSTM |"))
        self.assertEndsWith(bert.rstrip(" |"), "88.5")
        self.assertIn(" ± ", bert.split("|")[-3])
        self.assertEndsWith(bilstm.rstrip(" |"), "84.9")
        self.assertIn(" ± ", bilstm.split("|")[-3])

    def test_figure_steps_beyond_the_pre_training_are_refused(self):
        datasets = write_toy_data(self.tmp_path() / "data", tagging=False)
        too_far = dataclasses.replace(TOY, figure_steps=(1, 3))
        with self.assertRaisesRegex(ValueError,
                                    "figure_steps must not exceed the first phase's steps"):
            tables.table("fig5", grid.GridBuilder(too_far, datasets, 1))

    def test_a_failing_tool_is_one_line_naming_its_log(self):
        tmp_path = self.tmp_path()
        tool = tmp_path / "tool.py"
        tool.write_text("import sys\nprint('starting')\nprint('tool.py: error: --x is bad')\n"
                        "sys.exit(3)\n")
        log = tmp_path / "log.txt"
        with self.assertRaises(jobs.JobFailed) as failure:
            jobs.subprocess_runner([str(tool), "--x=1"], log, dict(os.environ))
        self.assertEqual(str(failure.exception),
                         f"{tool} exited with status 3 (tool.py: error: --x is bad); "
                         f"its log is {log}")

    def test_two_phases_chain_and_the_figure_reads_the_first(self):
        """Phase 2 reads its own records and starts from phase 1's output folder."""
        tmp_path = self.tmp_path()
        second = scales.Phase(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1,
                              steps=2, warmup=1, batch=4, learning_rate=5e-4)
        scale = dataclasses.replace(TOY, phases=(*ONE_PHASE, second))
        datasets = write_toy_data(tmp_path / "data", tagging=False)
        runner = FakeRunner()
        run_driver(arguments(tmp_path, "5"), runner, scale, datasets)
        cache = jobs.Cache(tmp_path / "cache")
        builder = grid.GridBuilder(scale, datasets, 2)
        first, last = builder.pretrain_phases("mlm_nsp", scale.base_model)
        self.assertEqual(last.inputs["init_checkpoint"].job.key, first.key)
        calls = [dict(flag[2:].split("=", 1) for flag in call if flag.startswith("--"))
                 for call in runner.calls if call[0] == "run_pretraining.py"]
        self.assertEqual(sorted(call["max_seq_length"] for call in calls),
                         ["32"] * 3 + ["64"] * 3)
        pretrainings = [job for job in schedule.all_jobs(tables.table("5", builder).jobs)
                        if job.tool == "run_pretraining.py"]
        firsts = {cache.output(job) for job in pretrainings
                  if "init_checkpoint" not in job.inputs}
        self.assertEqual({Path(call["init_checkpoint"]) for call in calls
                          if call["max_seq_length"] == "64"}, firsts)
        # Fine-tuning starts from the last phase's export.
        starts = {flag for call in runner.calls if call[0] == "run_classifier.py"
                  for flag in call if flag.startswith("--init_checkpoint=")}
        self.assertEqual({Path(flag.split("=", 1)[1]).parent.parent for flag in starts}, {
            cache.output(job) for job in pretrainings if "init_checkpoint" in job.inputs})

        # The training-curve plot follows a variant through both phases.
        results = {job.key: cache.result(job) for job in (first, last)}
        self.assertEqual([step for step, _ in whole_curve(last, results)], [1, 2, 3, 4])

        figure = FakeRunner()
        run_driver(arguments(tmp_path, "fig5"), figure, scale, datasets)
        evaluated = [call for call in figure.calls if call[0] == "run_pretraining.py"
                     and "--do_train=true" not in call]
        self.assertNotEmpty(evaluated)
        for call in evaluated:
            self.assertIn("--max_seq_length=32", call)
        sweeps = [call for call in figure.calls if call[0] == "run_classifier.py"]
        self.assertNotEmpty(sweeps)
        for call in sweeps:
            self.assertIn("--max_seq_length=32", call)

    def test_several_tables_are_one_grid_each_written_when_its_runs_are_done(self):
        tmp_path = self.tmp_path()
        datasets = write_toy_data(tmp_path / "data")
        builder = grid.GridBuilder(TOY, datasets, 2)
        needed = {job.key for name in ("5", "8")
                  for job in schedule.all_jobs(tables.table(name, builder).jobs)}
        cache = jobs.Cache(tmp_path / "cache")
        table5_jobs = schedule.all_jobs(tables.table("5", builder).jobs)

        class FailOnceTable5IsDone(FakeRunner):
            def __call__(self, arguments, log, environment):
                if all(cache.result(job) is not None for job in table5_jobs):
                    raise KeyboardInterrupt
                super().__call__(arguments, log, environment)

        with self.assertRaises(KeyboardInterrupt):
            run_driver(arguments(tmp_path, "5,8,5"), FailOnceTable5IsDone(), datasets=datasets)
        self.assertEqual([path.name for path in (tmp_path / "results").glob("*.md")],
                         ["table5_toy.md"])

        every = schedule.all_jobs([*tables.table("5", builder).jobs,
                                   *tables.table("8", builder).jobs])
        self.assertLen(every, len(needed))  # shared runs are one job
        done = sum(cache.result(job) is not None for job in every)
        runner = FakeRunner()
        run_driver(arguments(tmp_path, "5,8,5"), runner, datasets=datasets)
        self.assertLen(runner.calls, len(needed) - done)  # nothing ran twice

        # With a fresh cache, every run of Table 5 starts before any run only Table 8 needs.
        fresh = FakeRunner()
        run_driver(arguments(tmp_path / "again", "5,8"), fresh, datasets=datasets)
        started = [re.search(r"--output_(?:dir|file)=\S*/runs/([0-9a-f]{20})/", " ".join(call))
                   .group(1) for call in fresh.calls]
        table5_keys = {job.key for job in table5_jobs}
        self.assertEqual(set(started[:len(table5_keys)]), table5_keys)
        self.assertEqual({path.name for path in (tmp_path / "results").glob("*.md")},
                         {"table5_toy.md", "table8_toy.md"})

    def test_a_job_starts_when_its_inputs_are_ready_not_when_a_round_ends(self):
        """`slow` waits until `after_quick` has started: rounds of ready jobs would wait forever."""
        quick = jobs.Job("tool.py", {"name": "quick"})
        slow = jobs.Job("tool.py", {"name": "slow"})
        after_quick = jobs.Job("tool.py", {"name": "after_quick"}, {"input": jobs.Output(quick)})
        started = threading.Event()
        threads: dict[str, str | None] = {}

        def runner(arguments, log, environment):
            name = next(flag.split("=", 1)[1] for flag in arguments
                        if flag.startswith("--name="))
            threads[name] = environment.get("TF_NUM_INTRAOP_THREADS")
            if name == "after_quick":
                started.set()
            if name == "slow":
                assert started.wait(timeout=30), "after_quick did not start beside slow"

        results = schedule.run_grid([slow, after_quick], jobs.Cache(self.tmp_path()), runner,
                                workers=2)
        self.assertEqual(set(results), {quick.key, slow.key, after_quick.key})
        share = str(max(1, (os.cpu_count() or 1) // 2))
        self.assertEqual(threads, {"quick": share, "slow": share, "after_quick": share})

    def test_feature_based_runs_read_only_layers_the_model_has(self):
        datasets = write_toy_data(self.tmp_path() / "data")

        def feature_runs(scale, table):
            return [job for job in schedule.all_jobs(
                        tables.table(table, grid.GridBuilder(scale, datasets, 2)).jobs)
                    if job.settings.get("mode") == "feature_based"]

        with self.assertRaisesRegex(ValueError, "Table 7 reads the last four blocks, but the "
                                                "toy scale's model has 2"):
            tables.table("7", grid.GridBuilder(TOY, datasets, 2))
        four = dataclasses.replace(TOY, feature_model=(4, 32))
        runs = feature_runs(four, "7")
        self.assertEqual(
            {run.inputs["init_checkpoint"].job.model["num_hidden_layers"] for run in runs}, {4})
        self.assertEqual({run.settings["feature_layers"] for run in runs},
                         set(tables.FEATURE_LAYERS))
        # Table 8's feature-based column: the paper's last four when the base model has them.
        self.assertEqual({run.settings["feature_layers"] for run in feature_runs(TOY, "8")},
                         {"sum_all"})
        deeper = dataclasses.replace(TOY, base_model=(4, 32))
        self.assertEqual({run.settings["feature_layers"] for run in feature_runs(deeper, "8")},
                         {"concat_last_four"})
        self.assertGreaterEqual(scales.SCALES["cpu"].feature_model[0], 4)

    def test_runs_that_others_wait_on_start_first(self):
        alone = jobs.Job("tool.py", {"name": "alone"})
        base = jobs.Job("tool.py", {"name": "base"})
        middle = jobs.Job("tool.py", {"name": "middle"}, {"input": jobs.Output(base)})
        top = jobs.Job("tool.py", {"name": "top"}, {"input": jobs.Output(middle)})
        order = []

        def runner(arguments, log, environment):
            order.append(next(flag.split("=", 1)[1] for flag in arguments
                              if flag.startswith("--name=")))

        schedule.run_grid([alone, top], jobs.Cache(self.tmp_path()), runner, workers=1)
        # ties keep the given order
        self.assertEqual(order, ["base", "middle", "alone", "top"])

    def test_gpt_layers_curve_transfers_the_first_k_blocks_and_shares_table5s_ends(self):
        tmp_path = self.tmp_path()
        datasets = write_toy_data(tmp_path / "data")
        run_driver(arguments(tmp_path, "5"), FakeRunner(), datasets=datasets)
        runner = FakeRunner()
        report = run_driver(arguments(tmp_path, "gpt_layers"), runner, datasets=datasets)
        blocks = TOY.base_model[0]
        transfers = sorted({flag for call in runner.calls for flag in call
                            if flag.startswith("--transfer_layers=")})
        self.assertEqual(transfers, [f"--transfer_layers={k}" for k in range(blocks)])
        # Only the fine-tunings of k < all blocks are new: the rest is Table 5's cache.
        self.assertEqual({call[0] for call in runner.calls}, {"run_classifier.py", "run_ner.py"})
        for call in runner.calls:
            self.assertTrue(any(flag.startswith("--transfer_layers=") for flag in call), call)
        self.assertEqual(report.name, "gpt_layers_toy.md")
        text = report.read_text(encoding="utf-8")
        self.assertStartsWith(text, "# GPT Figure 2: ")
        self.assertIn(f"| left-to-right (LM), 0 of {blocks} blocks |", text)
        self.assertTrue((tmp_path / "results" / "gpt_layers_toy.png").is_file())

    def test_long_pre_training_saves_its_progress_without_changing_its_key(self):
        tmp_path = self.tmp_path()
        long = dataclasses.replace(ONE_PHASE[0], steps=2 * grid.PROGRESS_SAVE_STEPS + 100)
        scale = dataclasses.replace(TOY, phases=(long,))
        builder = grid.GridBuilder(scale, write_toy_data(tmp_path / "data", tagging=False), 1)
        (run,) = builder.pretrain_phases("mlm_nsp", scale.base_model)
        # what the key holds
        self.assertEqual(run.settings["save_checkpoints_steps"], long.steps)
        self.assertEqual(run.save_every, grid.PROGRESS_SAVE_STEPS)
        self.assertEqual(run.key, dataclasses.replace(run, save_every=None).key)
        command = jobs.Cache(tmp_path / "cache").command(run)
        saves = [flag for flag in command if flag.startswith("--save_checkpoints_steps=")]
        self.assertEqual(saves, [f"--save_checkpoints_steps={grid.PROGRESS_SAVE_STEPS}"])
        # The figure's runs already save at its own cadence.
        (figure_run,) = builder.pretrain_phases("mlm", scale.base_model, 250, nsp=False)
        self.assertIsNone(figure_run.save_every)


if __name__ == "__main__":
    tf.test.main()
