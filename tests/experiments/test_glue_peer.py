"""experiments.glue_peer: the reference's sweep, choice and files, with a stand-in for torch.

The PyTorch fine-tuning itself (`experiments/peers/hf_glue_finetune.py`) needs
the torch environment and minutes of CPU; here a small script answers in its
place, so what is checked is the project's side: the examples and recipe
sent, each run's seed, the choice on dev, the degenerate-run marks, and the
files written as `run_classifier.py` writes them.
"""

import csv
import json
import math
import sys

from evaluation.results import read_eval_results
from tests.fixtures import TestCase, run_main

# Answers as a model that follows "good" -> 1 on odd seeds and predicts 0 on even ones would.
STAND_IN = '''
import json, sys
request = json.load(open(sys.argv[2]))
with open(sys.argv[4], "a") as calls:
    calls.write(json.dumps({k: request[k] for k in ("seed", "learning_rate", "bias_correction",
                                                     "max_seq_length", "labels")}) + "\\n")
def logits(texts):
    return [[0.0, 2.0] if request["seed"] % 2 and "good" in text else [1.0, 0.0]
            for text in texts["a"]]
answer = {"train_loss": [[1, 0.5]], "train_seconds": 0.1,
          "outputs": {name: logits(texts) for name, texts in request["predict"].items()}}
json.dump(answer, open(sys.argv[3], "w"))
'''


class GluePeerTest(TestCase):

    def setUp(self):
        super().setUp()
        root = self.tmp_path()
        self.data = root / "SST-2"
        self.data.mkdir()
        labelled = ["sentence\tlabel", "good film\t1", "bad film\t0", "good plot\t1", "dull\t0",
                    "bad\t0"]
        (self.data / "train.tsv").write_text("\n".join(labelled) + "\n")
        (self.data / "dev.tsv").write_text("\n".join(labelled) + "\n")
        (self.data / "test.tsv").write_text("index\tsentence\n7\tgood one\n9\tbad one\n")
        self.calls = root / "calls.jsonl"
        self.torch = root / "torch_python"
        self.torch.write_text(f"#!/bin/sh\nexec {sys.executable} -c '{STAND_IN}' \"$@\" "
                              f"{self.calls}\n")
        self.torch.chmod(0o755)
        self.output = root / "out"

    def run_peer(self, **changes):
        run_main("experiments.glue_peer", {
            "task_name": "SST-2", "data_dir": self.data, "init_checkpoint": "model-folder",
            "output_dir": self.output, "learning_rates": "5e-5,3e-5", "num_restarts": 2,
            "random_seed": 12345, "max_seq_length": 64, "do_predict": True,
            "torch_python": self.torch, **changes})

    def test_sweep_chooses_on_dev_marks_degenerate_runs_and_writes_the_runner_files(self):
        with self.assertLogs(level="WARNING") as logs:
            self.run_peer()
        calls = [json.loads(line) for line in self.calls.read_text().splitlines()]
        self.assertEqual([(c["learning_rate"], c["seed"]) for c in calls],
                         [(5e-5, 12345), (5e-5, 12346), (3e-5, 12345), (3e-5, 12346)])
        self.assertEqual({(c["bias_correction"], c["max_seq_length"]) for c in calls},
                         {(False, 64)})
        self.assertEqual(calls[0]["labels"], ["0", "1"])
        with open(self.output / "sweep_results.tsv", encoding="utf-8") as reader:
            rows = list(csv.DictReader(reader, delimiter="\t"))
        self.assertEqual([row["chosen"] for row in rows], ["*", "", "", ""])
        self.assertEqual([row["eval_accuracy"] for row in rows],
                         ["1.0000", "0.6000", "1.0000", "0.6000"])
        self.assertEqual([bool(row["warning"]) for row in rows], [False, True, False, True])
        self.assertIn("near majority class (eval_accuracy 60.0%, majority class 60.0%)",
                      "\n".join(logs.output))
        results = read_eval_results(self.output / "eval_results.txt")
        loss = (2 * math.log(1 + math.exp(-2.0)) + 3 * math.log(1 + math.exp(-1.0))) / 5
        self.assertAllClose(results, {"eval_accuracy": 1.0, "eval_loss": loss, "eval_score": 1.0,
                                      "eval_majority_class_accuracy": 0.6,
                                      "eval_near_majority_class": 0.0})
        self.assertEqual((self.output / "submission" / "SST-2.tsv").read_text(),
                         "index\tprediction\n7\t1\n9\t0\n")

    def test_a_rerun_reads_the_finished_runs_instead_of_training_them_again(self):
        self.run_peer()
        first = (self.output / "sweep_results.tsv").read_text()
        self.calls.unlink()
        self.run_peer()
        self.assertFalse(self.calls.exists())
        self.assertEqual((self.output / "sweep_results.tsv").read_text(), first)

    def test_refuses_a_run_without_the_model(self):
        with self.assertRaisesRegex(ValueError, "--init_checkpoint is required"):
            self.run_peer(init_checkpoint=None)
        self.assertFalse(self.calls.exists())
