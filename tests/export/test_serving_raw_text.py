"""Span QA and tagging SavedModels on raw text answer as the runners' Python paths do.

Each exported model is reloaded from disk and compared with what
`run_squad.py` / `run_ner.py` compute for the same model and text
(features, prediction, answer search, first-piece tags), where the two
must agree exactly: span QA on inputs that fit one window, tagging also on
sentences the runner reads through several.
"""

import dataclasses

import keras
import pytest
import tensorflow as tf
from absl.testing import parameterized

from data_prep.datasets.conll import (build_windows, predictions_to_tags, read_conll,
                                      windows_to_arrays)
from data_prep.datasets.squad import SquadExample
from data_prep.datasets.squad_features import convert_examples_to_features, features_to_arrays
from export.serving_span import export_span_model
from export.serving_tagging import export_tagger
from modeling import BertConfig, BertSpanModel, BertTokenTagger, load_labels
from tasks.batch_prediction import predict
from tasks.squad import SquadTask
from tasks.squad_predictions import RawResult, compute_predictions
from tests.export.exported_models import without_graph_rewrites
from tests.fixtures import TINY_CONFIG, TestCase
from text.tokenization import FullTokenizer
from text.whitespace_words import whitespace_words

WORDS = ["the", "cat", "##s", "sat", "on", "mat", "a", "dog", "ran", "far", "away", "who",
         "where", "did", "go", "is", "big", "small", "red", "house", "near", "tree", "and"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "?", *WORDS]
QUESTIONS = [("who sat on the mat", "the cats sat on the mat, and a dog ran far away."),
             ("where did the dog go", "a big red dog ran near the small house."),
             ("what", "the tree is near the house"),
             ("who ran", "Zebras ran far away, and the cats sat.")]
LABELS = ["O", "B-ANIMAL", "I-ANIMAL", "B-PLACE"]
SENTENCES = [["the", "cats", "sat", "on", "the", "mat"], ["a", "big", "dog", "ran"],
             ["Zebras", "ran", "near", "the", "house", "and", "the", "tree"]]
LENGTH = 24


class RawTextServingTest(TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        without_graph_rewrites(cls)
        cls.root = cls.class_folder()
        (cls.root / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
        cls.tokenizer = FullTokenizer(str(cls.root / "vocab.txt"))
        cls.config = BertConfig.from_dict({**TINY_CONFIG, "vocab_size": len(VOCAB)})

    @parameterized.named_parameters(("v1", False), ("v2", True))
    @pytest.mark.long
    def test_span_answers_are_the_runners_answers(self, version_2):
        keras.utils.set_random_seed(11)
        model = BertSpanModel(self.config)
        task = SquadTask(max_query_length=8, max_answer_length=4, n_best_size=LENGTH,
                         version_2_with_negative=version_2)
        examples = [SquadExample(str(index), question, whitespace_words(context)[0])
                    for index, (question, context) in enumerate(QUESTIONS)]
        features = convert_examples_to_features(examples, self.tokenizer, LENGTH, 128,
                                                task.max_query_length, is_training=False)
        self.assertLen(features, len(examples))  # one window each: the export's reading
        arrays = features_to_arrays(features)
        outputs = predict(model, arrays, 8)
        results = [RawResult(int(unique_id), start, end) for unique_id, start, end
                   in zip(arrays["unique_ids"], outputs["start_logits"], outputs["end_logits"])]

        def runners_answers(threshold: float) -> tuple[dict, dict]:
            answers, _, odds = compute_predictions(
                examples, features, results, task.n_best_size, task.max_answer_length, True,
                version_2, threshold)
            return answers, odds

        expected, odds = runners_answers(0.0)
        if version_2:  # a threshold between two questions' null odds: some answered, some not
            ordered = sorted(odds.values())
            task = dataclasses.replace(task, null_score_diff_threshold=float(
                (ordered[1] + ordered[2]) / 2))
            expected, _ = runners_answers(task.null_score_diff_threshold)
        path = export_span_model(model, self.tokenizer, LENGTH, task,
                                 str(self.root / f"span_{version_2}"))
        served = tf.saved_model.load(path).signatures["serving_default"](
            question=tf.constant([q for q, _ in QUESTIONS]),
            context=tf.constant([c for _, c in QUESTIONS]))
        answers = [answer.decode() for answer in served["answer"].numpy()]
        self.assertEqual(answers, [expected[str(index)] for index in range(len(QUESTIONS))])
        for row, (answer, (_, context)) in enumerate(zip(answers, QUESTIONS)):
            start, end = int(served["start"][row]), int(served["end"][row])
            self.assertEqual((start, end) if not answer else context[start:end],
                             (-1, -1) if not answer else answer)
        if version_2:
            self.assertLen([answer for answer in answers if not answer], 2)
        else:  # the spans read punctuation that sits inside whitespace-separated words
            self.assertIn("away, and the", answers)

    @parameterized.named_parameters(("one_window", LENGTH, None), ("windows", 6, None),
                                    ("stride_1", 5, 1))
    @pytest.mark.long
    def test_tags_are_the_runners_tags_with_label_names(self, length, stride):
        keras.utils.set_random_seed(5)
        model = BertTokenTagger(self.config, len(LABELS))
        path = export_tagger(model, self.tokenizer, length, LABELS,
                             str(self.root / f"tagger_{length}"), window_stride=stride)
        self.assertEqual(load_labels(path), LABELS)
        loaded = tf.saved_model.load(path)
        served = loaded.signatures["serving_default"](
            sentence=tf.constant([" ".join(words) for words in SENTENCES] + [""]))
        conll = self.root / "sentences.txt"
        conll.write_text("\n\n".join("\n".join(f"{word} O" for word in words)
                                     for words in SENTENCES) + "\n")
        sentences = read_conll(conll)
        windows = build_windows(sentences, self.tokenizer, length, {"O": 0}, stride=stride)
        if length < LENGTH:  # the runner reads these sentences through several windows
            self.assertGreater(len(windows), 2 * len(SENTENCES))
        logits = predict(model, windows_to_arrays(windows), 8)
        expected = predictions_to_tags(windows, logits, sentences, LABELS)
        tags = served["tags"].numpy().tolist()
        for row, words in enumerate(SENTENCES):
            self.assertEqual([tag.decode() for tag in tags[row][:len(words)]], expected[row])
            self.assertAllEqual(served["words"][row][:len(words)], words)
            self.assertEqual(tags[row][len(words):], [b""] * (8 - len(words)))  # padding
        self.assertEqual(tags[-1], [b""] * 8)  # the empty sentence has no word
        by_words = loaded.signatures["tag_words"](words=tf.constant(
            [words + [""] * (8 - len(words)) for words in SENTENCES]))
        self.assertAllEqual(by_words["tags"], served["tags"][:-1])

    def test_a_stride_wider_than_the_window_is_refused(self):
        model = BertTokenTagger(self.config, len(LABELS))
        with self.assertRaisesRegex(ValueError, "window_stride=5 is wider than a window of "
                                                "sequence_length=6"):
            export_tagger(model, self.tokenizer, 6, LABELS, str(self.root / "wide"),
                          window_stride=5)
        self.assertFalse((self.root / "wide").exists())

    @pytest.mark.long
    def test_span_question_and_context_of_different_lengths_are_one_error(self):
        model = BertSpanModel(self.config)
        path = export_span_model(model, self.tokenizer, LENGTH, SquadTask(max_query_length=8),
                                 str(self.root / "span_mismatch"))
        serve = tf.saved_model.load(path).signatures["serving_default"]
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                    r"assertion failed: \[question and context differ in batch "
                                    r"size: 3 and 1; give one of each per example\]"):
            serve(question=tf.constant(["who", "what", "where"]),
                  context=tf.constant(["the cat sat on the mat"]))
        empty = serve(question=tf.constant([], tf.string), context=tf.constant([], tf.string))
        self.assertEqual(empty["answer"].shape, (0,))

    def test_sentences_split_on_the_squad_readers_whitespace(self):
        """Unicode's other spaces stay inside words, as in the runners; tensorflow-text's
        whitespace tokenizer split them and left their first bytes in the word before."""
        model = BertTokenTagger(self.config, len(LABELS))
        loaded = tf.saved_model.load(export_tagger(model, self.tokenizer, LENGTH, LABELS,
                                                   str(self.root / "separators")))
        sentences = ["the cat\u2028sat", "a\u00a0dog ran", "far\x85away", "the\u202fmat\tsat"]
        served = loaded.signatures["serving_default"](sentence=tf.constant(sentences))
        for row, sentence in enumerate(sentences):
            words = whitespace_words(sentence)[0]
            self.assertEqual([word.decode() for word in served["words"].numpy()[row]
                              if word], words)
        grid = tf.constant([["", ""], ["", ""]])  # empty rows; words [2, 0] too
        self.assertAllEqual(loaded.signatures["tag_words"](words=grid)["tags"],
                            tf.zeros([2, 0], tf.string))
        self.assertEqual(loaded.signatures["tag_words"](
            words=tf.zeros([2, 0], tf.string))["tags"].shape, (2, 0))

    def test_a_tagger_without_labels_is_refused(self):
        model = BertTokenTagger(self.config, len(LABELS))
        with self.assertRaisesRegex(ValueError, "needs its label names"):
            export_tagger(model, self.tokenizer, LENGTH, [], str(self.root / "unlabelled"))
        self.assertFalse((self.root / "unlabelled").exists())
