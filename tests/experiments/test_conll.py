"""The CoNLL-2003 queue's summary, the peer's request and the results page, on made-up runs."""

import dataclasses
import json

from experiments import conll, conll_report
from tests.fixtures import TestCase

TRAIN = "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n"
VALID = "Paris NNP B-NP B-LOC\nwins VBZ B-VP O\n"


def run(row, seed, f1):
    return {"row": row, "seed": seed, "eval_f1": f1, "eval_precision": f1, "eval_recall": f1,
            "per_type": {"PER": f1}, "wall_seconds": 3700 + seed, "cpu_seconds": 7000}


class ConllQueueTest(TestCase):

    def test_runs_of_separate_queues_add_up_and_another_recipe_is_refused(self):
        path, recipe = self.tmp_path() / "summary.json", conll.Recipe()
        conll.record(path, recipe, "fine_tune", 1, {"eval_f1": 0.9})
        conll.record(path, recipe, "pytorch", 1, {"eval_f1": 0.8})
        summary = json.loads(path.read_text())
        self.assertEqual(sorted(summary["runs"]), ["fine_tune/1", "pytorch/1"])
        self.assertEqual(summary["recipe"], dataclasses.asdict(recipe))
        with self.assertRaisesRegex(ValueError, "holds runs of another recipe"):
            conll.record(path, conll.Recipe(learning_rate=3e-5), "fine_tune", 2, {"eval_f1": 0.9})

    def test_the_peer_gets_the_reader_s_sentences_and_the_shared_recipe(self):
        folder = self.tmp_path()
        (folder / "train.txt").write_text(TRAIN)
        (folder / "valid.txt").write_text(VALID)
        recipe = conll.Recipe(adam_bias_correction=True)
        request = conll.peer_request(str(folder), "model", recipe, 7)
        self.assertEqual(request["train"], {"words": [["EU", "rejects"], ["Peter"]],
                                            "tags": [["B-ORG", "O"], ["B-PER"]]})
        self.assertEqual(request["predict"], {"valid": [["Paris", "wins"]]})
        self.assertEqual(request["labels"], ["O", "B-ORG", "B-PER"])
        self.assertEqual((request["seed"], request["bias_correction"], request["batch_size"],
                          request["max_seq_length"]), (7, True, 32, 64))

    def test_bad_arguments_are_refused_naming_them(self):
        with self.assertRaises(SystemExit):
            conll.parse(["--data_dir", str(self.tmp_path()), "--only=peers"])
        with self.assertRaises(SystemExit):
            conll.parse(["--data_dir", str(self.tmp_path() / "absent")])


class ConllReportTest(TestCase):

    def summary(self):
        runs = [run("fine_tune", 1, 0.90), run("fine_tune", 2, 0.92), run("pytorch", 1, 0.89),
                run("pytorch", 2, 0.91), run("last", 1, 0.80)]
        return {"recipe": dataclasses.asdict(conll.Recipe()),
                "runs": {f"{r['row']}/{r['seed']}": r for r in runs}, "command": "python -m x",
                "data": {"conll2003/train.txt": "ab12"}, "machine": {"Model name": "CPU"}}

    def test_page_shows_seeds_spread_selection_gap_and_missing_rows(self):
        text = conll_report.markdown(self.summary())
        self.assertIn("| Fine-tuning, ours (run_ner.py) | 90.00, 92.00 | 91.00 ± 1.41 (2 seeds) | "
                      "seed 2: 92.00 |", text)
        self.assertIn("| Fine-tuning, Hugging Face PyTorch | 89.00, 91.00 | 90.00 ± 1.41 "
                      "(2 seeds) | seed 2: 91.00 |", text)
        self.assertIn("Ours minus PyTorch: +1.00 F1 (the larger seed standard deviation is 1.41)",
                      text)
        self.assertIn("| Last hidden (feature-based) | 80.00 (1 seed) | 94.9 |", text)
        self.assertIn("| Embeddings (feature-based) | not run yet | 91.0 |", text)
        self.assertIn("| Fine-tuning, ours (run_ner.py), seed 1 | 1 h 01 min | 1 h 56 min |", text)
        self.assertIn("- `conll2003/train.txt` `ab12`", text)

    def test_report_only_redraws_the_committed_summary(self):
        folder = self.tmp_path()
        (folder / f"{conll_report.STEM}.json").write_text(json.dumps(self.summary()))
        conll_report.main(["--report_only", f"--output_dir={folder}"])
        self.assertIn("1 epoch(s), one rate (5e-05", (folder / f"{conll_report.STEM}.md").read_text())
        self.assertGreater((folder / f"{conll_report.STEM}.png").stat().st_size, 10000)
