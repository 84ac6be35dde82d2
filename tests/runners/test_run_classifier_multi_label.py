"""run_classifier.py --multi_label on a TSV with a label-set column: F1 scores, label-set output."""

import re

import numpy as np
import pytest
import tensorflow as tf

from evaluation.results import read_eval_results
from tests.fixtures import run_main
from tests.runners.test_run_classifier import BAD, GOOD, Sst2FolderTestCase, _arguments

LABELS = ["film", "neg", "pos"]


def _label_set(text: str, good: bool) -> list[str]:
    return sorted({"pos" if good else "neg", *(["film"] if "film" in text else [])})


def _topics(folder):
    """train/dev/test.tsv: a text and its label set (`film|pos`); test without labels."""
    data = folder / "topics"
    data.mkdir()
    rows = [(t, _label_set(t, True)) for t in GOOD] + [(t, _label_set(t, False)) for t in BAD]
    table = "text\tlabels\n" + "".join(f"{t}\t{'|'.join(s)}\n" for t, s in rows)
    (data / "train.tsv").write_text("text\tlabels\n" + "".join(table.splitlines(True)[1:]) * 4)
    (data / "dev.tsv").write_text(table)
    (data / "test.tsv").write_text("text\n" + "".join(f"{t}\n" for t, _ in rows))
    return data, rows


class MultiLabelRunnerTest(Sst2FolderTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.data, cls.rows = _topics(cls.root)

    def _arguments(self, output, **flags):
        return _arguments(self.sst2, output, **{
            "task": "tsv", "data_dir": self.data, "tsv_text_a_column": "text",
            "tsv_label_column": "labels", **flags})

    def _refused(self, message, **flags):
        with self.assertRaisesRegex(ValueError, re.escape(message)):
            run_main("run_classifier.py", self._arguments(self.tmp_path(), **flags))

    def test_bad_multi_label_settings_are_refused_naming_the_flag(self):
        self._refused("--multi_label reads label sets from your own data: pass --task_name=tsv "
                      "with --tsv_label_column, not SST-2", multi_label=True, task="SST-2")
        self._refused("--threshold must be", multi_label=True, threshold=1.0)
        self._refused("--tsv_label_delimiter must be visible characters other than a tab, "
                      "got ' '", multi_label=True, tsv_label_delimiter=" ")
        self._refused("--threshold=0.3 applies to --multi_label", threshold=0.3)
        self._refused("--tsv_label_delimiter separates the labels of a label set: pass "
                      "--multi_label too", tsv_label_delimiter=",")
        self._refused("--class_weights weighs the classes of a single-label classifier",
                      multi_label=True, class_weights="balanced")
        self._refused("train.tsv:2: label 'film' is not one of ['neg', 'pos']",
                      multi_label=True, tsv_labels="neg,pos")

    @pytest.mark.long
    @pytest.mark.slow
    def test_label_sets_train_score_f1_and_predict_label_sets(self):
        output = self.tmp_path()
        run_main("run_classifier.py", self._arguments(output, multi_label=True,
                                                      num_train_epochs=10))
        results = read_eval_results(output / "eval_results.txt")
        for key in ("eval_f1_micro", "eval_f1_macro", *(f"eval_f1/{l}" for l in LABELS)):
            self.assertIn(key, results)
        # The tiny random model learns the label one word gives ("film") on every run here;
        # pos and neg it learns less reliably in so few steps.
        self.assertGreaterEqual(results["eval_f1/film"], 0.9)
        self.assertEqual((output / "labels.txt").read_text().split(), LABELS)
        # The submission's label sets score the eval_results' F1 (test holds the dev texts).
        lines = (output / "submission" / "test.tsv").read_text().splitlines()
        self.assertEqual(lines[0], "index\tprediction")
        predicted = [line.split("\t")[1] for line in lines[1:]]
        self.assertLen(predicted, len(self.rows))
        hot = lambda sets: np.array([[label in s for label in LABELS] for s in sets])
        guessed = hot([p.split("|") if p else [] for p in predicted])
        truth = hot([s for _, s in self.rows])
        per_label = [2 * (g & t).sum() / max(g.sum() + t.sum(), 1)
                     for g, t in zip(guessed.T, truth.T)]
        micro = 2 * (guessed & truth).sum() / (guessed.sum() + truth.sum())
        self.assertAllClose([results[f"eval_f1/{l}"] for l in LABELS], per_label, atol=1e-6)
        self.assertAllClose(results["eval_f1_micro"], micro, atol=1e-6)
        self.assertAllClose(results["eval_f1_macro"], np.mean(per_label), atol=1e-6)
        # The SavedModel on raw text answers a yes/no per label, as the runner predicted.
        import tensorflow_text  # noqa: F401  registers the tokenizer's ops
        served = tf.saved_model.load(str(output / "saved_model")).signatures["serving_default"](
            text_a=tf.constant([t for t, _ in self.rows]))
        self.assertAllEqual(served["predicted"].numpy(), guessed)
