"""Official SQuAD v1.1 / v2.0 metrics on crafted predictions, against hand-computed values."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import tensorflow as tf
from absl.testing import parameterized

from evaluation.squad import evaluate_v1, evaluate_v2, exact_match_score, f1_score, normalize_answer
from tests.fixtures import REPO, TestCase


def _dataset(questions: list[tuple[str, list[str]]], v2: bool) -> dict:
    qas = []
    for qid, golds in questions:
        answers = [{"text": gold, "answer_start": 0} for gold in golds]
        qa = {"id": qid, "question": "?", "answers": answers}
        if v2:
            qa["is_impossible"] = not golds
        qas.append(qa)
    return {"version": "2.0" if v2 else "1.1",
            "data": [{"title": "T", "paragraphs": [{"context": "c", "qas": qas}]}]}


V1 = _dataset([("q1", ["Eiffel Tower", "the Eiffel Tower in Paris"]), ("q2", ["Paris"]),
               ("q3", ["1990", "in 1990"]), ("q4", ["x"])], v2=False)
V1_PREDICTIONS = {"q1": "Eiffel tower.", "q2": "Paris, France", "q3": "the year 1990"}
V2 = _dataset([("h1", ["Paris"]), ("h2", ["Eiffel Tower"]), ("n1", []), ("n2", [])], v2=True)
V2_PREDICTIONS = {"h1": "Paris", "h2": "Tower", "n1": "wrong", "n2": ""}
NA_PROBS = {"h1": 0.1, "h2": 0.3, "n2": 0.6, "n1": 0.9}


def _cli(tmp_path, dataset: dict, predictions, *options: str) -> subprocess.CompletedProcess:
    data_file, pred_file = tmp_path / "data.json", tmp_path / "predictions.json"
    data_file.write_text(json.dumps(dataset), encoding="utf-8")
    pred_file.write_text(predictions if isinstance(predictions, str) else json.dumps(predictions),
                         encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "evaluation.squad", str(data_file),
                           str(pred_file), *options], cwd=REPO, capture_output=True, text=True)


class SquadMetricTest(TestCase, parameterized.TestCase):

    @parameterized.parameters([
        ("The  Eiffel-Tower!", "eiffeltower"),
        ("An apple a day", "apple day"),
        ("theory of Anathema", "theory of anathema"),  # articles only as whole words
        ("A.B.C.", "abc"),
        ("\tthe\n", ""),
    ])
    def test_normalize_answer(self, text, normalized):
        self.assertEqual(normalize_answer(text), normalized)

    def test_exact_match_and_f1(self):
        self.assertEqual(exact_match_score("the Eiffel Tower!", "Eiffel tower"), 1)
        self.assertEqual(exact_match_score("Paris, France", "Paris"), 0)
        self.assertAllClose(f1_score("Paris, France", "Paris"), 2 / 3, rtol=1e-6, atol=1e-12)
        # [in, city, of, paris] vs [paris, city]: P = 2/4, R = 1.
        self.assertAllClose(f1_score("in the city of Paris", "Paris city"),
                            2 / 3, rtol=1e-6, atol=1e-12)
        self.assertAllClose(f1_score("paris paris", "paris"),
                            2 / 3, rtol=1e-6, atol=1e-12)  # counts, not sets
        self.assertEqual(f1_score("London", "Paris"), 0.0)
        self.assertEqual(f1_score("", "the"), 1.0)  # v2.0: both empty after normalization
        self.assertEqual(f1_score("", "the", empty_matches_empty=False), 0.0)  # v1.1

    def test_v1(self):
        with self.assertLogs(level=logging.WARNING) as logs:
            result = evaluate_v1(V1, V1_PREDICTIONS)
        # q1 exact; q2 F1 2/3; q3 best of 2/3 ("1990") and 1/2 ("in 1990"); q4 unanswered.
        self.assertAllClose(result, {"exact_match": 25.0, "f1": 100 * (1 + 2 / 3 + 2 / 3) / 4},
                            rtol=1e-6, atol=1e-12)
        self.assertIn("1 questions have no prediction", "\n".join(logs.output))
        self.assertIn("q4", "\n".join(logs.output))
        with self.assertRaisesRegex(ValueError, "no gold answer"):
            evaluate_v1(V2, V2_PREDICTIONS)

    def test_v2_breakdown_threshold_and_best_thresholds(self):
        result = evaluate_v2(V2, V2_PREDICTIONS)
        # Raw exact: h1 1, h2 0, n1 0, n2 1; raw F1: h1 1, h2 2/3 (P 1, R 1/2), n1 0, n2 1.
        expected = {"exact": 50.0, "f1": 100 * (8 / 3) / 4, "total": 4,
                    "HasAns_exact": 50.0, "HasAns_f1": 100 * (5 / 3) / 2, "HasAns_total": 2,
                    "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2}
        self.assertEqual(list(result), list(expected))
        self.assertAllClose(result, expected, rtol=1e-6, atol=1e-12)
        with_probs = evaluate_v2(V2, V2_PREDICTIONS, NA_PROBS)
        # From all-null (2 of 4): +h1 (1) at 0.1 -> 3; +h2 (0 | 2/3) at 0.3; n2 is ""; n1 -1.
        self.assertEqual(list(with_probs)[-4:], ["best_exact", "best_exact_thresh", "best_f1",
                                                 "best_f1_thresh"])
        self.assertAllClose(with_probs["best_exact"], 75.0, rtol=1e-6, atol=1e-12)
        self.assertEqual(with_probs["best_exact_thresh"], 0.1)
        self.assertAllClose(with_probs["best_f1"], 100 * (3 + 2 / 3) / 4, rtol=1e-6, atol=1e-12)
        self.assertEqual(with_probs["best_f1_thresh"], 0.3)
        self.assertEqual(with_probs["exact"], 50.0)  # no probability above the default 1.0
        thresholded = evaluate_v2(V2, V2_PREDICTIONS, NA_PROBS, na_prob_thresh=0.5)
        # n2 (0.6) and n1 (0.9) now count as answered "": both right.
        self.assertAllClose(thresholded["exact"], 75.0, rtol=1e-6, atol=1e-12)
        self.assertAllClose(thresholded["f1"], 100 * (3 + 2 / 3) / 4, rtol=1e-6, atol=1e-12)
        self.assertEqual(thresholded["NoAns_exact"], 100.0)
        self.assertEqual(thresholded["HasAns_exact"], 50.0)

    def test_v2_gold_answers_that_normalize_to_nothing_and_missing_predictions(self):
        dataset = _dataset([("h", ["a"]), ("n", [])], v2=True)
        self.assertEqual(evaluate_v2(dataset, {"h": "", "n": ""})["HasAns_exact"], 100.0)
        self.assertEqual(evaluate_v2(dataset, {"h": ""})["exact"], 50.0)  # "n" unanswered: 0
        with self.assertRaisesRegex(ValueError, "no no-answer probability"):
            evaluate_v2(dataset, {"h": "", "n": ""}, {"h": 0.5})

    def test_cli(self):
        tmp_path = self.tmp_path()
        v1 = _cli(tmp_path, V1, V1_PREDICTIONS)
        self.assertEqual(v1.returncode, 0, msg=v1.stderr)
        self.assertEqual(json.loads(v1.stdout), evaluate_v1(V1, V1_PREDICTIONS))  # 1.1 detected
        na_file = tmp_path / "null_odds.json"
        na_file.write_text(json.dumps(NA_PROBS), encoding="utf-8")
        v2 = _cli(tmp_path, V2, V2_PREDICTIONS, "--na-prob-file", str(na_file),
                  "--na-prob-thresh", "0.5")
        self.assertEqual(v2.returncode, 0, msg=v2.stderr)
        self.assertEqual(v2.stdout,
                         json.dumps(evaluate_v2(V2, V2_PREDICTIONS, NA_PROBS, 0.5),
                                    indent=2) + "\n")
        broken = _cli(tmp_path, V2, '{"h1": "Paris",\n}')
        self.assertEqual(broken.returncode, 1)
        self.assertIn("malformed JSON at line 2, column 1", broken.stderr)
        wrong = _cli(tmp_path, V2, ["Paris"])
        self.assertEqual(wrong.returncode, 1)
        self.assertIn("question id -> str", wrong.stderr)
        missing = subprocess.run([sys.executable, "-m", "evaluation.squad",
                                  str(tmp_path / "no.json"),
                                  str(tmp_path / "no.json")], cwd=REPO, capture_output=True, text=True)
        self.assertEqual(missing.returncode, 1)
        self.assertIn("no such file", missing.stderr)


if __name__ == "__main__":
    tf.test.main()
