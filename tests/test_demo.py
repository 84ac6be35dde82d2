"""demo.py: the runs it describes for the experiments engine, its table, and its folder's upkeep."""

import io
from contextlib import redirect_stdout
from pathlib import Path

import tensorflow as tf

import demo
from experiments import jobs, schedule
from experiments.grid import GridBuilder
from experiments.scales import Datasets
from tests.fixtures import TestCase


def _toy_datasets(root: Path) -> Datasets:
    """Files the job descriptions read (the tag set, the sentiment dev labels); nothing runs."""
    (root / "corpus.txt").write_text("a b c .\n", encoding="utf-8")
    (root / "sentiment").mkdir()
    (root / "sentiment" / "dev.tsv").write_text("sentence\tlabel\ngood\t1\nbad\t0\nfine\t1\n",
                                               encoding="utf-8")
    (root / "tagging").mkdir()
    for split in ("train", "valid", "test"):
        (root / "tagging" / f"{split}.txt").write_text("The DT\ncat NN\n\n", encoding="utf-8")
    return Datasets(jobs.Dataset("corpus", (root / "corpus.txt",)),
                    jobs.Dataset("sentiment", (root / "sentiment",)),
                    jobs.Dataset("tagging", (root / "tagging",)))


class DemoTest(TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.tmp_path()
        self.builder = GridBuilder(demo.DEMO, _toy_datasets(self.root), demo.SEEDS)
        self.phases, self.rows = demo.describe(self.builder)

    def test_two_phases_then_the_same_fine_tunings_from_random_and_pre_trained_weights(self):
        first, second = self.phases
        self.assertEqual([first.settings["num_train_steps"], second.settings["num_train_steps"]],
                         [4500, 300])
        self.assertIs(second.inputs["init_checkpoint"].job, first)
        random, pretrained = self.rows
        for row in self.rows:
            self.assertLen(row.sentiment.jobs, 1)  # one sweep: every rate, three restarts
            self.assertEqual(row.sentiment.jobs[0].settings["num_restarts"], 3)
            self.assertEqual({(rate, job.settings["random_seed"]) for rate, runs in
                              row.tagging.runs.items() for job in runs},
                             {(rate, seed) for rate in (3e-4, 1e-3) for seed in (1, 2, 3)})
        for scratch, started in zip(random.runs, pretrained.runs):
            self.assertEqual(scratch.settings, started.settings)  # only the start differs
            self.assertNotIn("init_checkpoint", scratch.inputs)
            self.assertEqual(scratch.model, demo.DEMO_MODEL)
            self.assertIsNone(started.model)
            self.assertIs(started.inputs["init_checkpoint"].job, second)
            self.assertEqual(started.inputs["init_checkpoint"].path, "export/bert_model.ckpt")
        # The random-init runs read only the vocabulary, so they can start beside pre-training.
        self.assertEqual({job.key for row_job in random.runs for job in row_job.dependencies},
                         {self.builder.vocab.key})

    def test_the_table_gives_each_initialization_at_its_best_rate(self):
        results = {}
        for job in self.phases:
            results[job.key] = {"eval_results": {"masked_lm_accuracy": 0.25,
                                                 "next_sentence_accuracy": 0.8}}
        for offset, row in ((0.0, self.rows[0]), (0.1, self.rows[1])):
            results[row.sentiment.jobs[0].key] = {"sweep": [
                [3e-4, 0, 0.6 + offset], [3e-4, 1, 0.62 + offset], [3e-4, 2, 0.64 + offset],
                [1e-3, 0, 0.5], [1e-3, 1, 0.5], [1e-3, 2, 0.5]]}
            for rate, runs in row.tagging.runs.items():
                for seed, job in enumerate(runs):
                    score = (0.8 if rate == 1e-3 else 0.7) + offset + seed / 100
                    results[job.key] = {"eval_results": {"eval_f1": score,
                                                         "test_f1": score - 0.05}}
        printed = io.StringIO()
        with redirect_stdout(printed):
            demo.print_results(self.builder.data, self.phases, self.rows, results)
        lines = printed.getvalue().splitlines()
        self.assertIn("Pre-training phase 2 (300 steps of 64 x 64 tokens): masked-LM accuracy "
                      "0.250, next-sentence accuracy 0.800", lines)
        self.assertIn("- sentiment: Rotten Tomatoes dev accuracy (%), 1500 training snippets, "
                      "3 dev; the majority class scores 66.7", lines)
        self.assertIn("  small BERT, random init         62.0 ±  2.0 (lr 0.0003)   81.0 ±  1.0 "
                      "(lr 0.001)   76.0 ±  1.0 (lr 0.001)", lines)
        self.assertIn("  small BERT, pre-trained above   72.0 ±  2.0 (lr 0.0003)   91.0 ±  1.0 "
                      "(lr 0.001)   86.0 ±  1.0 (lr 0.001)", lines)
        self.assertIn("Pre-training gains +10.0 points of sentiment accuracy and +10.0 points "
                      "of tagging test F1 over random initialization.", lines)

    def test_runs_of_another_recipe_are_removed_and_nothing_else(self):
        cache = jobs.Cache(self.root / "output")
        every = schedule.all_jobs(self.phases)
        for job in every[:2]:
            cache.folder(job).mkdir(parents=True)
        (cache.root / "runs" / "0123456789abcdef0123").mkdir()  # a run of an older recipe
        (cache.root / "notes.txt").write_text("the user's")
        removed = demo.clear_other_recipes(cache, every)
        self.assertEqual([path.name for path in removed], ["0123456789abcdef0123"])
        self.assertEqual(sorted(path.name for path in (cache.root / "runs").iterdir()),
                         sorted(job.key for job in every[:2]))
        self.assertTrue((cache.root / "notes.txt").is_file())
        # Same recipe again: its runs are kept, so the engine finds them cached.
        self.assertEqual(demo.clear_other_recipes(cache, every), [])


if __name__ == "__main__":
    tf.test.main()
