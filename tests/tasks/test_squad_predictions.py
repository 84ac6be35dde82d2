"""SQuAD prediction post-processing: n-best search over windows, max context, v2 null answer."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from data_prep.corpora.assets import minilm_dir
from data_prep.datasets.squad import SquadExample
from data_prep.datasets.squad_features import InputFeatures, convert_examples_to_features
from tasks.squad_predictions import RawResult, compute_predictions, write_prediction_files
from tests.fixtures import TestCase
from text.tokenization import FullTokenizer

pytestmark = pytest.mark.assets

WORDS = "Steve Smith's bat was sold in (1990) at Café Rouge.".split()


def _features(tokenizer, words: list[str], max_seq_length: int = 32, doc_stride: int = 8
              ) -> tuple[list[SquadExample], list[InputFeatures]]:
    examples = [SquadExample("q1", "Who", words)]  # one question token
    return examples, convert_examples_to_features(examples, tokenizer, max_seq_length,
                                                  doc_stride, 8, is_training=False)


def _result(feature: InputFeatures, starts: dict[str, float], ends: dict[str, float],
            null: tuple[float, float] = (-10.0, -10.0)) -> RawResult:
    """Logits of -10 everywhere but at the first document token spelled as given."""
    logits = np.full((2, len(feature.input_ids)), -10.0, dtype=np.float32)
    logits[:, 0] = null
    for row, peaks in enumerate((starts, ends)):
        for token, value in peaks.items():
            position = min(p for p in feature.token_to_orig_map if feature.tokens[p] == token)
            logits[row, position] = value
    return RawResult(feature.unique_id, logits[0], logits[1])


class SquadPredictionsTest(TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tokenizer = FullTokenizer(str(minilm_dir() / "vocab.txt"), do_lower_case=True)

    def test_nbest_search_maps_spans_back_to_the_original_text(self):
        examples, (feature,) = _features(self.tokenizer, WORDS)
        result = _result(feature, {"steve": 5.0, "cafe": 3.0, "1990": 1.0},
                         {"smith": 5.0, "rouge": 3.0, "1990": 1.0})
        predictions, nbest, null_odds = compute_predictions(
            examples, [feature], [result], n_best_size=3, max_answer_length=4, do_lower_case=True,
            version_2_with_negative=False)
        self.assertEqual(predictions, {"q1": "Steve Smith"})
        self.assertEqual(null_odds, {})
        # "steve".."rouge" is too long; "cafe".."smith" ends before it starts.
        self.assertEqual([entry["text"] for entry in nbest["q1"]],
                         ["Steve Smith", "Café Rouge", "1990"])
        scores = np.array([10.0, 6.0, 2.0])
        expected = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
        self.assertAllClose([e["probability"] for e in nbest["q1"]], expected, rtol=1e-6, atol=0)
        self.assertEqual((nbest["q1"][1]["start_logit"], nbest["q1"][1]["end_logit"]), (3.0, 3.0))

    def test_a_span_only_counts_in_the_window_where_it_has_most_context(self):
        words = list("abcdefghijklmnopqrst")  # windows over pieces 0-14 and 5-19 (see test_squad_data)
        examples, features = _features(self.tokenizer, words, max_seq_length=19, doc_stride=5)
        self.assertLen(features, 2)
        # "m" (piece 12) has 12 | 2 tokens of context in window 0 and 7 | 7 in window 1.
        results = [_result(features[0], {"m": 10.0, "b": 1.0}, {"m": 10.0, "b": 1.0}),
                   _result(features[1], {"m": 2.0}, {"m": 2.0})]
        # At most 5 tokens, so "b".."m" is no candidate either.
        predictions, nbest, _ = compute_predictions(examples, features, results, 20, 5, True, False)
        self.assertEqual(predictions["q1"], "m")
        self.assertEqual([(e["text"], e["start_logit"]) for e in nbest["q1"][:2]],
                         [("m", 2.0), ("b", 1.0)])
        self.assertTrue(all(entry["start_logit"] < 10.0 for entry in nbest["q1"]))

    def test_v2_null_answer_against_the_threshold(self):
        words = list("abcdefghijklmnopqrst")
        examples, features = _features(self.tokenizer, words, max_seq_length=19, doc_stride=5)
        results = [_result(features[0], {"c": 2.0}, {"d": 2.0}, null=(3.0, 3.0)),
                   _result(features[1], {}, {}, null=(2.5, 2.5))]  # s_null: the lower, 5.0
        for threshold, answer in ((0.0, ""), (0.99, ""), (1.0, "c d")):
            predictions, nbest, null_odds = compute_predictions(
                examples, features, results, 5, 30, True, True, null_score_diff_threshold=threshold)
            self.assertEqual(predictions, {"q1": answer})
            self.assertAllClose(null_odds, {"q1": 1.0}, rtol=1e-6, atol=1e-12)
        texts = [entry["text"] for entry in nbest["q1"]]
        self.assertEqual(texts[:2], ["", "c d"])
        self.assertEqual(nbest["q1"][0]["start_logit"], 2.5)

    @parameterized.parameters(False, True)
    def test_no_valid_span_gives_an_empty_answer_not_a_crash(self, version_2):
        examples, (feature,) = _features(self.tokenizer, WORDS)
        # The two best starts and ends are [CLS] and the question: no candidate span at all.
        logits = np.full(len(feature.input_ids), -10.0)
        logits[:2] = (4.0, 3.0)
        results = [RawResult(feature.unique_id, logits, logits)]
        predictions, nbest, null_odds = compute_predictions(examples, [feature], results, 2, 30,
                                                            True, version_2)
        self.assertEqual(predictions, {"q1": ""})
        self.assertEqual([(e["text"], e["probability"]) for e in nbest["q1"]], [("", 1.0)])
        self.assertEqual(null_odds, {"q1": 8.0} if version_2 else {})

    def test_missing_model_output_is_an_error(self):
        examples, features = _features(self.tokenizer, WORDS)
        with self.assertRaisesRegex(ValueError, "no model result for 1 features"):
            compute_predictions(examples, features, [], 20, 30, True, False)

    def test_prediction_files(self):
        tmp_path = self.tmp_path()
        nbest = {"q1": [{"text": "Café", "probability": 1.0, "start_logit": 1.0, "end_logit": 2.0}]}
        write_prediction_files(str(tmp_path / "v1"), {"q1": "Café"}, nbest, {})
        self.assertEqual(sorted(p.name for p in (tmp_path / "v1").iterdir()), [
            "nbest_predictions.json", "predictions.json"])
        self.assertEqual(json.loads((tmp_path / "v1" / "predictions.json").read_text()),
                         {"q1": "Café"})
        write_prediction_files(str(tmp_path / "v2"), {"q1": ""}, nbest, {"q1": 1.5})
        self.assertEqual(json.loads((tmp_path / "v2" / "null_odds.json").read_text()), {"q1": 1.5})
        self.assertEqual(json.loads((tmp_path / "v2" / "nbest_predictions.json").read_text()),
                         nbest)
        self.assertLen(list((tmp_path / "v2").iterdir()), 3)


if __name__ == "__main__":
    tf.test.main()
