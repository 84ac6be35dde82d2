"""run_squad.py end to end on tiny SQuAD files in the official layout, v1.1 and v2.0.

A tiny random-init BERT is fine-tuned on a handful of questions and asked
the same questions back: it can only score well by having learned the
spans, since an untrained model's spans score about 20 F1 here. The
files follow the real layout (articles, paragraphs, `answer_start`, v2.0's
`is_impossible` and `plausible_answers`); one context is longer than a
window, and one answer word is split into WordPieces by the vocabulary.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import tensorflow as tf

from evaluation.results import read_eval_results
from tests.fixtures import TestCase, event_scalars, run_main, write_tiny_config
from tests.runners.shared_runs import run_logged

pytestmark = pytest.mark.slow


# (context, [(question, answer)]): answers are the first occurrence in the context.
PARAGRAPHS = [
    ("The Amazon river flows through Brazil and Peru. It is about 6400 kilometers long, and "
     "it carries more water than any other river on Earth.",
     [("Which countries does the Amazon flow through?", "Brazil and Peru"),
      ("How long is the Amazon river?", "about 6400 kilometers")]),
    ("Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in physics in 1903 and "
     "the Nobel Prize in chemistry in 1911.",
     [("Where was Marie Curie born?", "Warsaw"),
      ("When did Curie win the prize in chemistry?", "1911"),
      ("Who won the Nobel Prize in physics in 1903?", "Marie Curie")]),
    # Longer than one window at --max_seq_length=64: read in two windows.
    ("The city of Lyon lies where the Rhone and the Saone meet. Its old town is known for "
     "narrow passages called traboules, which silk workers used to carry cloth through the "
     "district while staying dry. Today the city is famous for its food, its festival of "
     "lights in December, and its football club, Olympique Lyonnais.",
     [("Which rivers meet at Lyon?", "the Rhone and the Saone"),
      ("What are the narrow passages of Lyon called?", "traboules"),
      ("When is the festival of lights?", "December"),
      ("What is the football club of Lyon?", "Olympique Lyonnais")]),
]
# SQuAD 2.0 additions: (paragraph index, question, plausible answer).
IMPOSSIBLE = [(0, "What is the capital of Peru?", "Peru"),
              (1, "Who painted the Mona Lisa?", "Marie Curie"),
              (2, "How many people live in Lyon?", "Lyon")]
SPLIT_WORD, PIECES = "curie", ["cur", "##ie"]  # held in the vocabulary only as WordPieces


def _squad(version_2: bool) -> dict:
    paragraphs = []
    for index, (context, questions) in enumerate(PARAGRAPHS):
        qas = []
        for number, (question, answer) in enumerate(questions):
            qa = {"id": f"q{index}_{number}", "question": question,
                  "answers": [{"text": answer, "answer_start": context.index(answer)}]}
            if version_2:
                qa["is_impossible"] = False
            qas.append(qa)
        if version_2:
            qas += [{"id": f"q{index}_none{number}", "question": question, "answers": [],
                     "is_impossible": True, "plausible_answers": [
                         {"text": answer, "answer_start": context.index(answer)}]}
                    for number, (paragraph, question, answer) in enumerate(IMPOSSIBLE)
                    if paragraph == index]
        paragraphs.append({"context": context, "qas": qas})
    return {"version": "v2.0" if version_2 else "1.1",
            "data": [{"title": "Facts", "paragraphs": paragraphs[:2]},
                     {"title": "Lyon", "paragraphs": paragraphs[2:]}]}


def _vocabulary() -> list[str]:
    texts = [context for context, _ in PARAGRAPHS]
    texts += [question for _, questions in PARAGRAPHS for question, _ in questions]
    texts += [question for _, question, _ in IMPOSSIBLE]
    words = sorted({word for text in texts for word in re.findall(r"\w+|[^\w\s]", text.lower())})
    words = [word for word in words if word != SPLIT_WORD] + PIECES
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]


def _write_assets(folder: Path) -> Path:
    vocabulary = _vocabulary()
    (folder / "vocab.txt").write_text("\n".join(vocabulary) + "\n")
    write_tiny_config(folder / "bert_config.json", vocab_size=len(vocabulary),
                      max_position_embeddings=128)
    for name, version_2 in (("v1.json", False), ("v2.json", True)):
        (folder / name).write_text(json.dumps(_squad(version_2), indent=1))
    return folder


def _arguments(assets, output_dir, **flags) -> dict:
    arguments = {"vocab_file": assets / "vocab.txt",
                 "bert_config_file": assets / "bert_config.json", "output_dir": output_dir,
                 "train_file": assets / "v1.json", "predict_file": assets / "v1.json",
                 "do_train": True, "do_predict": True, "do_eval": True, "max_seq_length": 64,
                 "doc_stride": 32, "max_query_length": 16, "train_batch_size": 4,
                 "num_train_epochs": 30, "learning_rate": 1e-3, "log_every": 1000}
    arguments.update(flags)
    return arguments


def _question_ids(data: dict) -> set[str]:
    return {qa["id"] for article in data["data"] for paragraph in article["paragraphs"]
            for qa in paragraph["qas"]}


def _read_json(path: os.PathLike) -> dict:
    with open(path, encoding="utf-8") as reader:
        return json.load(reader)


class RunSquadTest(TestCase):

    @classmethod
    def setUpClass(cls):
        """The vocabulary, config and both SQuAD files, written once."""
        super().setUpClass()
        cls.assets = _write_assets(cls.class_folder())

    def test_v1_learns_the_training_questions(self):
        tmp_path = self.tmp_path()
        # In this process and without XLA: the subject is what the run writes, not its process.
        result = run_logged("run_squad.py", _arguments(self.assets, tmp_path, jit_compile=False))
        self.assertIn("9 questions read, 0 skipped", result.stderr)
        # the Lyon context takes two
        self.assertIn("9 questions in 13 windows", result.stderr)
        predictions = _read_json(tmp_path / "predictions.json")
        self.assertEqual(set(predictions), _question_ids(_squad(False)))
        nbest = _read_json(tmp_path / "nbest_predictions.json")
        self.assertEqual(set(nbest), set(predictions))
        for qid, entries in nbest.items():
            self.assertEqual(entries[0]["text"], predictions[qid])
        self.assertFalse((tmp_path / "null_odds.json").exists())
        results = read_eval_results(tmp_path / "eval_results.txt")
        self.assertEqual(set(results), {"exact_match", "f1"})
        self.assertAllClose(json.loads(result.stdout), results, rtol=1e-6, atol=1e-12)
        scalars = event_scalars(tmp_path / "logs" / "eval")  # at the last training step
        self.assertAllClose({key: values[-1][1] for key, values in scalars.items()}, results,
                            rtol=1e-6, atol=1e-12)
        self.assertEqual(scalars["f1"][-1][0],
                         event_scalars(tmp_path / "logs" / "train")["loss"][-1][0])
        # An untrained model's spans score about 20 here; memorized ones match most answers.
        self.assertGreaterEqual(results["f1"], 60.0, predictions)
        for name in ("model.ckpt.index", "bert_config.json", "vocab.txt"):
            self.assertTrue((tmp_path / name).exists(), name)

    @pytest.mark.long
    def test_v2_learns_and_the_best_threshold_can_be_fed_back(self):
        assets, tmp_path = self.assets, self.tmp_path()
        v2 = assets / "v2.json"
        trained = tmp_path / "trained"
        run_main("run_squad.py", _arguments(assets, trained, train_file=v2, predict_file=v2,
                                            version_2_with_negative=True))
        ids = _question_ids(_squad(True))
        predictions = _read_json(trained / "predictions.json")
        self.assertEqual(set(predictions), ids)
        self.assertEqual(set(_read_json(trained / "nbest_predictions.json")), ids)
        null_odds = _read_json(trained / "null_odds.json")
        self.assertEqual(set(null_odds), ids)
        for qid, odds in null_odds.items():
            if odds > 0.0:
                self.assertEqual(predictions[qid], "", qid)
        results = read_eval_results(trained / "eval_results.txt")
        self.assertContainsSubset({"exact", "f1", "total", "HasAns_exact", "HasAns_f1",
                                   "HasAns_total", "NoAns_exact", "NoAns_f1", "NoAns_total",
                                   "best_exact", "best_exact_thresh", "best_f1",
                                   "best_f1_thresh"}, set(results))
        self.assertEqual(results["total"], 12)
        self.assertEqual(results["NoAns_total"], 3)
        # An untrained model scores about 20 on both; the null scores are harder to learn.
        self.assertGreaterEqual(results["HasAns_f1"], 60.0, predictions)
        self.assertGreaterEqual(results["best_f1"], max(60.0, results["f1"]), predictions)

        # The fine-tuned model.ckpt, loaded without --do_train, scores the same questions
        # alike; with the threshold found above, its F1 is the best F1 found above.
        tuned = tmp_path / "tuned"
        run_main("run_squad.py", _arguments(
            assets, tuned, do_train=False, train_file=None, predict_file=v2,
            version_2_with_negative=True, init_checkpoint=trained / "model.ckpt",
            null_score_diff_threshold=repr(results["best_f1_thresh"])))
        self.assertEqual(_read_json(tuned / "null_odds.json"), null_odds)
        self.assertAllClose(read_eval_results(tuned / "eval_results.txt")["f1"],
                            results["best_f1"], rtol=1e-6, atol=1e-12)

    @pytest.mark.long
    def test_left_to_right_with_a_bilstm_trains_and_predicts(self):
        tmp_path = self.tmp_path()
        # Table 5's "+ BiLSTM" row: the left-to-right model with a BiLSTM under the span layer.
        run_main("run_squad.py", _arguments(self.assets, tmp_path, bilstm_units=8, causal=True,
                                            num_train_epochs=0.3, do_eval=False))  # 1 update
        self.assertEqual(set(_read_json(tmp_path / "predictions.json")),
                         _question_ids(_squad(False)))
        self.assertFalse((tmp_path / "eval_results.txt").exists())

    @pytest.mark.long
    def test_sweep_lists_every_run_and_keeps_the_best_on_the_predict_file(self):
        tmp_path = self.tmp_path()
        run_main("run_squad.py", _arguments(self.assets, tmp_path / "sweep",
                                            learning_rates="1e-3,1e6", num_restarts=2,
                                            num_train_epochs=4, export_saved_model=False,
                                            jit_compile=False))
        _, chosen = self.check_sweep(tmp_path / "sweep", "0.001", "1e+06")
        results = read_eval_results(tmp_path / "sweep" / "eval_results.txt")
        self.assertEqual(f"{results['f1']:.4f}", chosen["f1"])
        self.assertAllClose(float(chosen["dev_score"]), results["f1"] / 100, atol=1e-4, rtol=0)
        # The saved model is the chosen run's: it answers alike without training.
        run_main("run_squad.py", _arguments(self.assets, tmp_path / "again", do_train=False,
                                            train_file=None,
                                            init_checkpoint=tmp_path / "sweep" / "model.ckpt"))
        self.assertEqual(_read_json(tmp_path / "again" / "predictions.json"),
                         _read_json(tmp_path / "sweep" / "predictions.json"))

    def test_malformed_json_names_the_file(self):
        tmp_path = self.tmp_path()
        broken = tmp_path / "broken.json"
        broken.write_text('{"data": [{"title": "T", "paragraphs": [}]}')
        with self.assertRaisesRegex(ValueError, rf"^{re.escape(str(broken))}: malformed JSON "
                                                r"at line 1, column \d+"):
            run_main("run_squad.py", _arguments(self.assets, tmp_path / "out",
                                                train_file=broken))

    def test_do_train_without_train_file_is_a_clear_error(self):
        with self.assertRaisesRegex(ValueError, "^--do_train needs --train_file"):
            run_main("run_squad.py", _arguments(self.assets, self.tmp_path(), train_file=None))


if __name__ == "__main__":
    tf.test.main()
