"""The classifier and the tagger on raw text: probabilities beside the labels, label sets."""

import itertools

import keras
import numpy as np
import pytest
from scipy import special
from sklearn.metrics import f1_score

from modeling import BertClassifier, BertTokenTagger
from tests.modeling.tiny_folder import TinyFolderTestCase

TEXTS = ["a fine film", "a dull film", "great acting"]
SENTENCES = [["john", "lives", "in", "paris"], ["the", "cat"]]
TOPICS = {"film": "film", "cat": "animal", "paris": "place"}


def topic_texts() -> tuple[list[str], list[list[str]]]:
    """Every subset of three words as a text, labelled with the words' topics: a toy set
    any classifier separates (each label is the presence of one word)."""
    texts, labels = [], []
    for size in range(len(TOPICS) + 1):
        for words in itertools.combinations(TOPICS, size):
            texts.append(" ".join(words) or "the")
            labels.append([TOPICS[word] for word in words])
    return texts, labels


class PredictScoresTest(TinyFolderTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        keras.utils.set_random_seed(0)
        cls.classifier = BertClassifier.from_pretrained(
            cls.folder, num_labels=3, sequence_length=16, label_names=["neg", "neutral", "pos"])
        cls.tagger = BertTokenTagger.from_pretrained(cls.folder, num_labels=2, sequence_length=5,
                                                     label_names=["O", "X"])

    def test_classifier_scores_are_the_softmax_of_its_logits_beside_the_names(self):
        labels, scores = self.classifier.predict_labels(TEXTS, return_scores=True)
        logits = self.classifier.predict(TEXTS, verbose=0)
        self.assertEqual(scores.shape, (3, 3))
        self.assertAllClose(scores, special.softmax(logits, axis=-1))
        self.assertAllClose(scores.sum(axis=1), np.ones(3))
        self.assertEqual(labels, [["neg", "neutral", "pos"][i] for i in scores.argmax(axis=1)])
        self.assertEqual(labels, self.classifier.predict_labels(TEXTS))
        empty_labels, empty_scores = self.classifier.predict_labels([], return_scores=True)
        self.assertEqual((empty_labels, empty_scores.shape), ([], (0, 3)))

    @pytest.mark.long
    def test_tagger_scores_every_word_even_past_one_window(self):
        tags, scores = self.tagger.predict_labels(SENTENCES, return_scores=True)
        self.assertEqual(tags, self.tagger.predict_labels(SENTENCES))
        # 5 positions hold [CLS], 3 pieces, [SEP]: the fourth word is read in a second window.
        self.assertEqual([s.shape for s in scores[0]], [(2,)] * len(SENTENCES[0]))
        logits = self.tagger.predict(SENTENCES, verbose=0)
        for row, (sentence_tags, sentence_scores) in enumerate(zip(tags, scores)):
            self.assertLen(sentence_tags, len(SENTENCES[row]))
            for word, (tag, score) in enumerate(zip(sentence_tags, sentence_scores)):
                self.assertAllClose(score, special.softmax(logits[row, word]))
                self.assertEqual(tag, ["O", "X"][int(score.argmax())])

    def test_bad_arguments_are_refused_before_predicting(self):
        regression = BertClassifier.from_pretrained(self.folder, num_labels=1, sequence_length=8)
        for model, x in ((self.classifier, TEXTS), (self.tagger, SENTENCES)):
            with self.assertRaisesRegex(ValueError, r"return_scores must be True or False, "
                                                    r"got 'yes'"):
                model.predict_labels(x, return_scores="yes")
        with self.assertRaisesRegex(ValueError, r"return_scores=True needs classes: a "
                                                r"regression model \(num_labels=1\)"):
            regression.predict_labels(TEXTS, return_scores=True)
        with self.assertRaisesRegex(ValueError, "batch_size must be a positive integer"):
            self.classifier.predict_labels(TEXTS, batch_size=0, return_scores=True)


class MultiLabelClassifierTest(TinyFolderTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # One compiled model that the read-only tests share, with its traced steps.
        keras.utils.set_random_seed(0)
        cls.model = cls._model(threshold=0.45)
        cls.model.compile()

    @classmethod
    def _model(cls, **kwargs):
        kwargs.setdefault("label_names", ["film", "animal", "place"])
        return BertClassifier.from_pretrained(cls.folder, num_labels=3, sequence_length=8,
                                              multi_label=True, **kwargs)

    @pytest.mark.long
    @pytest.mark.slow
    def test_learns_a_separable_label_set_task_and_reports_f1(self):
        keras.utils.set_random_seed(0)
        texts, labels = topic_texts()
        # The tiny random encoder's pooled vector is near 0 (tanh of small weights), so the
        # head reads a BiLSTM over the (layer-normalized) sequence: 60 steps suffice.
        model = self._model(hidden_dropout_prob=0.0, bilstm_units=8)
        model.compile(optimizer=keras.optimizers.Adam(1e-2))
        model.fit(texts, labels, batch_size=8, epochs=60, verbose=0)
        self.assertEqual(model.predict_labels(texts), labels)
        predicted, scores = model.predict_labels(texts, return_scores=True)
        self.assertAllClose(scores, special.expit(model.predict(texts, verbose=0)))
        results = model.evaluate(texts, labels, verbose=0, return_dict=True)
        self.assertAllClose([results[f"f1/{name}"] for name in model.label_names], [1, 1, 1])
        self.assertAllClose([results["f1_micro"], results["f1_macro"]], [1.0, 1.0])

    def test_evaluate_reports_scikit_learns_f1_at_the_threshold(self):
        texts, labels = topic_texts()
        model = self.model  # at threshold=0.45
        results = model.evaluate(texts, labels, verbose=0, return_dict=True)
        truth = np.array([[name in row for name in model.label_names] for row in labels])
        predicted = special.expit(model.predict(texts, verbose=0)) > 0.45
        self.assertGreater(predicted.sum(), 0)  # not trivially all-absent
        self.assertAllClose([results[f"f1/{name}"] for name in model.label_names],
                            f1_score(truth, predicted, average=None, zero_division=0))
        for average in ("micro", "macro"):
            self.assertAllClose(results[f"f1_{average}"],
                                f1_score(truth, predicted, average=average, zero_division=0))
        self.assertAllClose(results["loss"], keras.losses.BinaryCrossentropy(from_logits=True)(
            truth.astype(np.float32), model.predict(texts, verbose=0)))
        sets = model.predict_labels(texts)
        self.assertEqual(sets, [[name for name, on in zip(model.label_names, row) if on]
                                for row in predicted])

    def test_labels_as_sets_of_indices_names_or_multi_hot_rows_train_alike(self):
        texts, labels = topic_texts()
        names = ["film", "animal", "place"]
        indices = [[names.index(label) for label in row] for row in labels]
        multi_hot = np.array([[name in row for name in names] for row in labels], np.int64)
        model = self.model
        losses = [model.evaluate(texts, y, verbose=0) for y in (labels, indices, multi_hot)]
        self.assertAllClose(losses[0], losses[1])
        self.assertAllClose(losses[0], losses[2])

    def test_a_reloaded_multi_label_model_keeps_its_threshold_and_head(self):
        model = self.model
        path = self.tmp_path() / "multi.keras"
        model.save(path)
        reloaded = keras.saving.load_model(path)
        self.assertTrue(reloaded.multi_label)
        self.assertEqual(reloaded.threshold, 0.45)
        self.assertEqual(reloaded.predict_labels(TEXTS), model.predict_labels(TEXTS))

    def test_bad_settings_and_labels_are_refused_by_name(self):
        for threshold in (0, 1, 1.5, float("nan"), "0.5"):
            with self.assertRaisesRegex(ValueError, r"threshold must be a finite number in "
                                                    r"\(0, 1\), got"):
                self._model(threshold=threshold)
        with self.assertRaisesRegex(ValueError, "multi_label must be True or False, got 1"):
            BertClassifier.from_pretrained(self.folder, num_labels=3, multi_label=1)
        with self.assertRaisesRegex(ValueError, "multi_label=True needs num_labels >= 2"):
            BertClassifier.from_pretrained(self.folder, num_labels=1, multi_label=True)
        with self.assertRaisesRegex(ValueError, "threshold=0.3 applies to multi_label=True"):
            BertClassifier.from_pretrained(self.folder, num_labels=3, threshold=0.3)
        model = self.model
        cases = [
            (["film", ["animal"]], TypeError, r"y: example 0 has labels 'film'; a multi-label "
                                              r"model takes a label set per example"),
            ([["film", "film"], []], ValueError, r"y: example 0 names label 'film' twice"),
            ([[0, 1, 1], []], ValueError, r"y: example 0 names label 1 twice; .*2-D NumPy"),
            ([["film"], ["dog"]], ValueError, r"y: example 1 has label 'dog', which is not "
                                              r"among the model's label_names"),
            ([[3], []], ValueError, r"y: example 0 has label 3, outside \[0, 3\)"),
            (np.array([[1, 0], [0, 1]]), ValueError, r"multi-hot array of 2 columns, but the "
                                                     r"model has 3 labels"),
            (np.array([[1, 0, 2], [0, 1, 0]]), ValueError, r"y: example 0, label 2 is 2; "
                                                           r"multi-hot rows hold 0 or 1"),
            (np.array([[1, 0, np.nan], [0, 1, 0]]), ValueError, r"example 0, label 2 is nan"),
        ]
        for y, error, message in cases:
            with self.subTest(y=y), self.assertRaisesRegex(error, message):
                model.fit(TEXTS[:2], y, verbose=0)
