"""SQuAD reading and feature creation: alignment cases that break naive code, windows, errors.

The files are small hand-written ones in the official layout; the
tokenizer is the real bert-base-uncased vocabulary (MiniLM's, cached).
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from data_prep.corpora.assets import minilm_dir
from data_prep.datasets.squad import SquadExample, read_squad_examples
from data_prep.datasets.squad_features import (FIRST_UNIQUE_ID, convert_examples_to_features,
                                               features_to_arrays)
from tests.fixtures import TestCase
from text.sliding_windows import max_context_owners, windows
from text.tokenization import FullTokenizer

pytestmark = pytest.mark.assets

CONTEXT = ("Steve Smith's  bat (1990) was sold\tat Café Rouge.\n\n北京是中国的首都。 "
           "Москва —\u202fстолица России.")


def _qa(qid: str, answer: str, start: int | None = None, question: str = "What?") -> dict:
    offset = CONTEXT.index(answer) if start is None else start
    return {"id": qid, "question": question, "is_impossible": False,
            "answers": [{"text": answer, "answer_start": offset}]}


def _write(tmp_path, paragraphs: list[dict], name: str = "squad.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"version": "2.0", "data": [{"title": "T", "paragraphs":
                                                             paragraphs}]}), encoding="utf-8")
    return str(path)


class SquadDataTest(TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        """The real vocabulary loads once for the class."""
        super().setUpClass()
        cls.tokenizer = FullTokenizer(str(minilm_dir() / "vocab.txt"), do_lower_case=True)

    @parameterized.parameters(
        ("1990", ["(1990)"], ["1990"]),                       # punctuation glued to the answer
        ("Café Rouge", ["Café", "Rouge."], ["cafe", "rouge"]),  # accent, uncased
        ("中国", ["北京是中国的首都。"], ["中", "国"]),          # CJK: one word, a piece per character
        ("столица", ["столица"], None),                       # Cyrillic, after U+202F
        ("Smith", ["Smith's"], ["smith"]),
        ("bat (1990) was", ["bat", "(1990)", "was"], ["bat", "(", "1990", ")", "was"]),
    )
    def test_answer_alignment(self, answer, words, pieces):
        tokenizer = self.tokenizer
        path = _write(self.tmp_path(), [{"context": CONTEXT, "qas": [_qa("q", answer)]}])
        (example,), report = read_squad_examples(path, is_training=True,
                                                 version_2_with_negative=True)
        self.assertEqual(report.skipped, 0)
        self.assertEqual(example.doc_tokens[example.start_position:example.end_position + 1],
                         words)
        (feature,) = convert_examples_to_features([example], tokenizer, 96, 32, 16, True)
        target = feature.tokens[feature.start_position:feature.end_position + 1]
        self.assertEqual(target, pieces or tokenizer.tokenize(answer))
        self.assertEqual(target, tokenizer.tokenize(answer))

    def test_subword_answer_inside_a_longer_word_keeps_the_whole_word(self):
        # "##ing" alone is not the tokenization of "ing", so no tighter span matches.
        example = SquadExample("q", "What?", ["running", "fast"], "running", 0, 0)
        (feature,) = convert_examples_to_features([example], self.tokenizer, 32, 8, 8, True)
        self.assertEqual(feature.tokens[feature.start_position:feature.end_position + 1],
                         self.tokenizer.tokenize("running"))

    def test_impossible_and_mismatched_answers(self):
        impossible = {"id": "none", "question": "Who?", "is_impossible": True, "answers": [],
                      "plausible_answers": [{"text": "bat", "answer_start": 15}]}
        path = _write(self.tmp_path(), [{"context": CONTEXT, "qas": [
            impossible, _qa("wrong", "bat", start=0), _qa("ok", "bat")]}])
        with self.assertLogs(level=logging.WARNING) as logs:
            examples, report = read_squad_examples(path, True, True)
        self.assertEqual([e.qas_id for e in examples], ["none", "ok"])
        self.assertEqual(report.answer_mismatches, ["wrong"])
        self.assertEqual(report.skipped, 1)
        self.assertIn("wrong", "\n".join(logs.output))
        self.assertEqual((examples[0].start_position, examples[0].end_position,
                          examples[0].orig_answer_text), (-1, -1, ""))
        features = convert_examples_to_features(examples, self.tokenizer, 96, 32, 16, True)
        self.assertEqual((features[0].start_position, features[0].end_position), (0, 0))
        self.assertTrue(features[0].is_impossible)
        self.assertFalse(features[1].is_impossible)
        predict, _ = read_squad_examples(path, is_training=False, version_2_with_negative=True)
        self.assertLen(predict, 3)
        self.assertIsNone(predict[1].start_position)

    def test_empty_contexts_and_questions_are_skipped_then_an_error(self):
        tmp_path = self.tmp_path()
        path = _write(tmp_path, [{"context": " \n ", "qas": [_qa("a", "bat")]},
                                 {"context": CONTEXT, "qas": [_qa("b", "bat", question=" "),
                                                              _qa("c", "bat")]}])
        examples, report = read_squad_examples(path, True, False)
        self.assertEqual([e.qas_id for e in examples], ["c"])
        self.assertEqual((report.empty_contexts, report.questions_without_context,
                          report.empty_questions), (1, 1, ["b"]))
        empty = _write(tmp_path, [{"context": "", "qas": [_qa("a", "bat")]}], "empty.json")
        with self.assertRaisesRegex(ValueError, "no usable question"):
            read_squad_examples(empty, True, False)

    def test_bad_files_name_the_place(self):
        tmp_path = self.tmp_path()
        broken = tmp_path / "broken.json"
        broken.write_text('{"data": [\n  {"paragraphs": [}\n]}', encoding="utf-8")
        with self.assertRaisesRegex(ValueError,
                                    r"broken.json: malformed JSON at line 2, column 19"):
            read_squad_examples(str(broken), True, False)
        no_question = _write(tmp_path, [{"context": CONTEXT,
                                         "qas": [{"id": "q7", "answers": []}]}])
        with self.assertRaisesRegex(ValueError, r"paragraphs\[0\]\.qas\[0\] \(id 'q7'\) lacks "
                                                r"the key 'question'"):
            read_squad_examples(no_question, False, False)
        two = _qa("q8", "bat")
        two["answers"] *= 2
        with self.assertRaisesRegex(ValueError, "q8.*exactly one"):
            read_squad_examples(_write(tmp_path, [{"context": CONTEXT, "qas": [two]}]),
                                True, False)

    def test_a_question_id_used_twice_in_a_file_to_predict_is_refused(self):
        path = _write(self.tmp_path(),
                      [{"context": CONTEXT, "qas": [_qa("q1", "bat"), _qa("q2", "bat")]},
                       {"context": CONTEXT, "qas": [_qa("q1", "Café")]}])
        with self.assertRaisesRegex(ValueError, r"squad.json: question id 'q1' appears twice, "
                                                r"at data\[0\]\.paragraphs\[0\]\.qas\[0\] and "
                                                r"data\[0\]\.paragraphs\[1\]\.qas\[0\]"):
            read_squad_examples(path, False, False)
        examples, _ = read_squad_examples(path, True, False)  # training never keys answers by id
        self.assertEqual([e.qas_id for e in examples], ["q1", "q2", "q1"])

    def test_windows_and_the_max_context_owner_of_each_token(self):
        self.assertEqual(windows(10, 6, 2), [(0, 6), (2, 6), (4, 6)])
        # Token 5: window 0 has 5 left / 0 right, window 1 3 / 2, window 2 1 / 4.
        owners = max_context_owners(windows(10, 6, 2), 10).tolist()
        self.assertEqual(owners, [0, 0, 0, 0, 1, 1, 2, 2, 2, 2])
        # Token 3 has 3 | 1 tokens around it in window 0 and 1 | 3 in window 1: a tie.
        self.assertEqual(max_context_owners([(0, 5), (2, 5)], 7).tolist(),
                         [0, 0, 0, 0, 1, 1, 1])
        example = SquadExample("q", "q", list("abcdefghij"))
        features = convert_examples_to_features([example], self.tokenizer, 10, 2, 4, False)
        self.assertEqual([f.doc_span_index for f in features], [0, 1, 2])
        for feature, (start, _) in zip(features, windows(10, 6, 2)):
            for position, word in feature.token_to_orig_map.items():
                self.assertEqual(feature.tokens[position], "abcdefghij"[word])
                is_owner = owners[word] == feature.doc_span_index
                self.assertEqual(feature.token_is_max_context[position], is_owner)

    def test_answer_across_a_window_edge_is_learned_in_the_window_holding_it_whole(self):
        words = list("abcdefghijklmnopqrst")  # one piece each
        example = SquadExample("q", "q", words, "o p", 14, 15)
        # 19 - 1 question token - 3 = windows of 15 pieces, every 5: 0-14 and 5-19.
        first, second = convert_examples_to_features([example], self.tokenizer, 19, 5, 4, True)
        self.assertEqual(first.tokens[3:-1], words[:15])
        self.assertEqual(second.tokens[3:-1], words[5:])
        # "o" in, "p" cut off
        self.assertEqual((first.start_position, first.end_position), (0, 0))
        self.assertEqual((second.start_position, second.end_position), (12, 13))
        self.assertEqual(second.tokens[12:14], ["o", "p"])

    def test_feature_layout_ids_and_arrays(self):
        tokenizer = self.tokenizer
        long_question = "who " * 30
        examples = [SquadExample("a", long_question, ["Paris", "is", "nice"], "Paris", 0, 0),
                    SquadExample("b", "Where?", ["in", "Rome"], "Rome", 1, 1)]
        features = convert_examples_to_features(examples, tokenizer, 24, 8, 5, True)
        self.assertEqual([f.unique_id for f in features], [FIRST_UNIQUE_ID, FIRST_UNIQUE_ID + 1])
        first = features[0]
        self.assertEqual(first.tokens, ["[CLS]", "who", "who", "who", "who", "who", "[SEP]",
                                        "paris", "is", "nice", "[SEP]"])
        self.assertEqual(first.token_to_orig_map, {7: 0, 8: 1, 9: 2})
        self.assertEqual(first.segment_ids[:12], [0] * 7 + [1] * 4 + [0])
        self.assertEqual(first.input_mask, [1] * 11 + [0] * 13)
        self.assertEqual(first.input_ids[:11], tokenizer.convert_tokens_to_ids(first.tokens))
        self.assertEqual((first.start_position, first.end_position), (7, 7))
        arrays = features_to_arrays(features)
        self.assertEqual(arrays["input_ids"].shape, (2, 24))
        self.assertEqual(arrays["input_ids"].dtype, np.int32)
        self.assertEqual(arrays["start_positions"].tolist(), [7, 5])
        self.assertEqual(arrays["unique_ids"].tolist(), [FIRST_UNIQUE_ID, FIRST_UNIQUE_ID + 1])
        with self.assertRaisesRegex(ValueError, "no room"):
            convert_examples_to_features(examples, tokenizer, 8, 8, 5, True)


if __name__ == "__main__":
    tf.test.main()
