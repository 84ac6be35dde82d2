"""The task models' `fit`, `evaluate`, `predict`, `predict_labels` and `predict_answers` over
drawn arguments (Hypothesis): the tagger, the span model, the classifier's multi-label and
regression settings, multiple choice, the pre-trainer and the feature tagger.

The property (`property_strategies`): one well-formed, finite result per
input, or a refusal naming the argument, before any training step; `fit`'s
`resume_dir` and `log_dir` are left uncreated when it refuses. The keyword
arguments come from each method's signature. BertClassifier's single-label
`compile`, `fit` and `predict` are `test_argument_properties`'.
"""

import os

import keras
import numpy as np
import tensorflow as tf
from hypothesis import event, example, given
from hypothesis import strategies as st

from modeling import (BertClassifier, BertMultipleChoice, BertPretrainer, BertSpanModel,
                      BertTokenTagger, FeatureTagger)
from modeling.text_tasks import TextTask
from tests.fixtures import TINY_CONFIG, tiny_config
from tests.modeling.property_strategies import (CLASS_LABELS, COUNTS, HOSTILE, ODD_TEXT,
                                                RATES, ContractTestCase, budget,
                                                keyword_arguments, names_of)
from tests.modeling.tiny_folder import tiny_folder

LENGTH = 8
TAGS = ["O", "B-PER", "B-LOC"]
SENTENCES = [["john", "lives", "in", "paris"], ["the", "cat", "sat"]]
SENTENCE_LISTS = st.one_of(st.lists(st.lists(ODD_TEXT, max_size=5), max_size=3), HOSTILE,
                           st.lists(st.one_of(ODD_TEXT, HOSTILE), max_size=2))
TAG_LISTS = st.one_of(st.lists(st.lists(st.one_of(st.sampled_from(TAGS), CLASS_LABELS),
                                        max_size=5), max_size=3), HOSTILE)
WEIGHTS = st.one_of(st.none(), st.lists(RATES, min_size=1, max_size=3), HOSTILE)
# Folders `fit` may be given: labels the test makes into paths (see `_folders`).
FOLDERS = st.sampled_from([None, "fresh", "a file", "under a file"])
FIT_ARGUMENTS = keyword_arguments(TextTask.fit, skip=(
    "x", "y", "sample_weight", "validation_data", "resume_dir", "log_dir"),
    batch_size=COUNTS, epochs=COUNTS, steps_per_epoch=COUNTS, initial_epoch=COUNTS,
    save_freq=COUNTS, log_freq=COUNTS, shuffle=st.booleans())
PACKED_VALUES = st.sampled_from([2, 0, -1, 64, 2**31 - 1])


# A training loss this large (float32 holds up to 3.4e38) leaves weights whose next forward
# pass overflows: the evaluation after it is NaN because the model is, whatever its arguments.
OVERFLOWING_LOSS = 1e30


def _trained_finitely(test, model, call) -> keras.callbacks.History:
    """`call()` (a fit) returns finite losses, or refuses before the optimizer takes a step."""
    steps = int(model.optimizer.iterations)
    try:
        history = call()
    except Exception as error:  # noqa: BLE001 - the property is about which errors
        test.assertEqual(int(model.optimizer.iterations), steps)
        raise error
    test.assert_finite(history.history["loss"])
    return history


class TaggerCallPropertiesTest(ContractTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        cls.model = BertTokenTagger.from_pretrained(tiny_folder(cls.root), num_labels=3,
                                                    label_names=TAGS, sequence_length=LENGTH)
        cls.model.compile(optimizer=keras.optimizers.SGD(1e-3))

    def _folders(self, resume_dir, log_dir) -> dict:
        """The drawn folder labels as paths: a fresh one, a file, a place under a file."""
        root = self.tmp_path()
        (root / "file").write_text("kept\n")
        paths = {"fresh": root / "fresh", "a file": root / "file",
                 "under a file": root / "file" / "below"}
        return {name: str(paths[label]) for name, label in
                (("resume_dir", resume_dir), ("log_dir", log_dir)) if label is not None}

    @budget(quick=4)
    @example(sentences=SENTENCES, batch_size=1, return_scores=True)
    @example(sentences={}, batch_size=None, return_scores=False)
    @example(sentences=[np.array(["a"])], batch_size=None, return_scores=False)
    @example(sentences=[{}], batch_size=None, return_scores=False)
    @example(sentences=[np.float32("nan")], batch_size=None, return_scores=False)
    @given(sentences=SENTENCE_LISTS, batch_size=st.one_of(st.none(), COUNTS),
           return_scores=st.one_of(st.booleans(), HOSTILE))
    def test_predict_labels_gives_a_tag_per_word_or_names_the_argument(self, sentences,
                                                                       batch_size,
                                                                       return_scores):
        try:
            result = self.model.predict_labels(sentences, batch_size=batch_size,
                                               return_scores=return_scores)
        except Exception as error:  # noqa: BLE001
            self.assert_refused(error, names_of({"x": sentences, "batch_size": batch_size,
                                                 "return_scores": return_scores,
                                                 "sentence": None, "word": None}))
            return
        tags, scores = result if return_scores else (result, None)
        self.assertEqual([len(row) for row in tags], [len(row) for row in sentences])
        self.assertTrue(all(tag in TAGS for row in tags for tag in row))
        if scores is not None:
            for row in scores:
                self.assert_finite(np.reshape(row, (-1, 3)))

    @budget(quick=4)
    @example(sentences=SENTENCES, tags=[["B-PER", "O", "O", "B-LOC"], [0, 0, 0]],
             sample_weight=[1.0, 0.5], batch_size=None)
    @example(sentences=np.float32("nan"), tags=[], sample_weight=None, batch_size=None)
    @given(sentences=SENTENCE_LISTS, tags=TAG_LISTS, sample_weight=WEIGHTS,
           batch_size=st.one_of(st.none(), COUNTS))
    def test_evaluate_scores_finitely_or_names_the_argument(self, sentences, tags,
                                                            sample_weight, batch_size):
        try:
            scores = self.model.evaluate(sentences, tags, sample_weight=sample_weight,
                                         batch_size=batch_size, verbose=0, return_dict=True)
        except Exception as error:  # noqa: BLE001
            self.assert_refused(error, names_of({
                "x": sentences, "y": tags, "sample_weight": sample_weight,
                "batch_size": batch_size, "sentence": None, "word": None}))
            return
        self.assert_finite(scores["loss"])

    @budget(300, quick=3)
    @example(arguments={"epochs": 1, "batch_size": 2}, tags=[[1, 0, 0, 2], [0, 0, 0]],
             resume_dir="fresh", log_dir="fresh")
    @given(arguments=FIT_ARGUMENTS, tags=TAG_LISTS, resume_dir=FOLDERS, log_dir=FOLDERS)
    def test_fit_trains_finitely_or_names_the_argument_and_makes_no_folder(
            self, arguments, tags, resume_dir, log_dir):
        folders = self._folders(resume_dir, log_dir)
        try:
            _trained_finitely(self, self.model, lambda: self.model.fit(
                SENTENCES, tags, verbose=0, **arguments, **folders))
        except Exception as error:  # noqa: BLE001
            self.assert_refused(error, names_of({**arguments, **folders, "y": tags,
                                                 "x": None, "sentence": None}))
            self.assertFalse(any(path.endswith("fresh") and os.path.exists(path)
                                 for path in folders.values()), folders)


class SpanCallPropertiesTest(ContractTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.model = BertSpanModel.from_pretrained(tiny_folder(cls.class_folder()),
                                                  sequence_length=16)
        cls.model.compile(optimizer=keras.optimizers.SGD(1e-3))

    @example(questions=["who sat?"], contexts=["the cat sat on the mat " * 6],
             arguments={"doc_stride": 3, "max_answer_length": 2})
    @given(questions=st.one_of(st.lists(ODD_TEXT, max_size=3), HOSTILE),
           contexts=st.one_of(st.lists(ODD_TEXT, max_size=3), HOSTILE),
           arguments=keyword_arguments(BertSpanModel.predict_answers,
                                       skip=("questions", "contexts")))
    def test_predict_answers_gives_one_answer_per_question_or_names_the_argument(
            self, questions, contexts, arguments):
        try:
            answers = self.model.predict_answers(questions, contexts, **arguments)
        except Exception as error:  # noqa: BLE001
            self.assert_refused(error, names_of({**arguments, "questions": questions,
                                                 "contexts": contexts}))
            return
        not_text = [answer for answer in answers if not isinstance(answer, str)]
        self.assertEqual((len(answers), not_text), (len(contexts), []))

    @budget(300, quick=3)
    @example(answers=[{"text": "cat", "answer_start": 4}], arguments={"epochs": 1})
    @given(answers=st.one_of(st.lists(st.one_of(
        st.fixed_dictionaries({"text": st.sampled_from(["cat", "the", "", "dog"]),
                               "answer_start": st.one_of(st.integers(-1, 12), HOSTILE)}),
        st.tuples(ODD_TEXT, COUNTS), HOSTILE), max_size=2), HOSTILE),
        arguments=FIT_ARGUMENTS)
    def test_fit_trains_finitely_or_names_the_answer(self, answers, arguments):
        try:
            _trained_finitely(self, self.model, lambda: self.model.fit(
                (["who sat?"], ["the cat sat"]), answers, verbose=0, **arguments))
        except Exception as error:  # noqa: BLE001
            self.assert_refused(error, names_of({**arguments, "y": answers, "x": None}))


class ClassifierSettingsCallPropertiesTest(ContractTestCase):
    """The multi-label and regression heads, whose labels and outputs differ."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        folder = tiny_folder(cls.class_folder())
        cls.models = {
            "multi_label": BertClassifier.from_pretrained(
                folder, num_labels=3, multi_label=True, threshold=0.4, sequence_length=LENGTH,
                label_names=["a", "b", "c"]),
            "regression": BertClassifier.from_pretrained(folder, num_labels=1,
                                                         sequence_length=LENGTH)}
        for model in cls.models.values():
            model.compile(optimizer=keras.optimizers.SGD(1e-3))
        cls.initial_weights = {head: model.get_weights() for head, model in cls.models.items()}

    @budget(quick=6)
    @example(head="multi_label", texts=["a fine film", ""], return_scores=True)
    @example(head="regression", texts=["a fine film"], return_scores=True)
    @given(head=st.sampled_from(["multi_label", "regression"]),
           texts=st.one_of(st.lists(ODD_TEXT, max_size=3), HOSTILE),
           return_scores=st.one_of(st.booleans(), HOSTILE))
    def test_predict_labels_gives_one_answer_per_text_or_names_the_argument(
            self, head, texts, return_scores):
        model = self.models[head]
        try:
            result = model.predict_labels(texts, return_scores=return_scores)
        except Exception as error:  # noqa: BLE001
            self.assert_refused(error, names_of({"x": texts, "return_scores": return_scores}))
            return
        labels, scores = result if return_scores else (result, None)
        self.assertLen(labels, len(texts))
        if head == "regression":
            self.assert_finite(labels)
        else:
            self.assertTrue(all(set(row) <= {"a", "b", "c"} for row in labels))
            self.assert_finite(scores if scores is not None else 0.0)

    @budget(300, quick=3)
    @example(head="multi_label", labels=[["a", "c"], []], arguments={"epochs": 1})
    @example(head="regression", labels=[0.5, float("nan")], arguments={})
    @example(head="regression", labels=[2**63, 0.5], arguments={"epochs": 1})
    @given(head=st.sampled_from(["multi_label", "regression"]),
           labels=st.one_of(st.lists(st.one_of(
               st.lists(st.one_of(st.sampled_from(["a", "b", "c"]), CLASS_LABELS), max_size=3),
               RATES), min_size=2, max_size=2), HOSTILE), arguments=FIT_ARGUMENTS)
    def test_fit_and_evaluate_are_finite_or_name_the_labels(self, head, labels, arguments):
        model, texts = self.models[head], ["a fine film", "a dull film"]
        model.set_weights(self.initial_weights[head])  # each example from the same start
        try:
            history = _trained_finitely(self, model, lambda: model.fit(
                texts, labels, verbose=0, **arguments))
            scores = model.evaluate(texts, labels, verbose=0, return_dict=True)
        except Exception as error:  # noqa: BLE001
            self.assert_refused(error, names_of({**arguments, "y": labels}))
            return
        if max(history.history["loss"]) < OVERFLOWING_LOSS:
            self.assert_finite(scores["loss"])
        else:  # a label such as 2**63 is a float, but one step on it overflows the encoder
            event("trained to an overflowing loss: evaluate reports it as it is")


class PackedModelCallPropertiesTest(ContractTestCase):
    """Multiple choice, the pre-trainer and the feature tagger, which read arrays."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        config = tiny_config()
        cls.choice = BertMultipleChoice(config)
        cls.choice.compile(optimizer=keras.optimizers.SGD(1e-3))
        cls.pretrainer = BertPretrainer(config, "mlm")
        cls.pretrainer.compile(optimizer=keras.optimizers.SGD(1e-3))
        cls.tagger = FeatureTagger(num_labels=3, lstm_units=2, num_lstm_layers=1)
        cls.tagger.compile(optimizer=keras.optimizers.SGD(1e-3))

    @budget(quick=4)
    @example(shape=(2, 3, LENGTH), value=2, batch_size=None)
    @example(shape=(0, 4, LENGTH), value=2, batch_size=None)
    @example(shape=(1, 1, 3), value=2, batch_size=2**63)  # once a shape error in TensorFlow
    @given(shape=st.tuples(st.integers(0, 2), st.integers(1, 3), st.sampled_from([3, LENGTH])),
           value=PACKED_VALUES, batch_size=st.one_of(st.none(), COUNTS))
    def test_multiple_choice_scores_each_choice_or_names_the_input(self, shape, value,
                                                                   batch_size):
        packed = {"input_ids": np.full(shape, value, np.int32),
                  "input_mask": np.ones(shape, np.int32), "segment_ids": np.zeros(shape, np.int32)}
        try:
            scores = self.choice.predict(packed, batch_size=batch_size, verbose=0)
        except tf.errors.InvalidArgumentError as error:  # the served models' contract
            self.assertFalse(0 <= value < TINY_CONFIG["vocab_size"])
            self.assertIn("input_ids holds values outside", str(error))
            return
        except Exception as error:  # noqa: BLE001
            self.assert_refused(error, ["batch_size", "input_ids"])
            return
        self.assert_finite(scores, shape[:2])

    @example(keys=("input_ids", "input_mask", "segment_ids"), positions=2)
    @example(keys=(), positions=2)
    @given(keys=st.lists(st.sampled_from(["input_ids", "input_mask", "segment_ids",
                                          "masked_lm_positions", "masked_lm_ids",
                                          "masked_lm_weights"]), unique=True).map(tuple),
           positions=st.sampled_from([0, 2, LENGTH - 1]))
    def test_pretrainer_evaluates_finitely_or_names_the_missing_feature(self, keys, positions):
        features = {"input_ids": np.full((2, LENGTH), 5, np.int32),
                    "input_mask": np.ones((2, LENGTH), np.int32),
                    "segment_ids": np.zeros((2, LENGTH), np.int32),
                    "masked_lm_positions": np.full((2, 2), positions, np.int32),
                    "masked_lm_ids": np.full((2, 2), 7, np.int32),
                    "masked_lm_weights": np.ones((2, 2), np.float32)}
        try:
            scores = self.pretrainer.evaluate({key: features[key] for key in keys}, verbose=0,
                                              return_dict=True)
        except Exception as error:  # noqa: BLE001
            self.assert_refused(error, [key for key in features if key not in keys])
            return
        self.assert_finite(scores["loss"])

    @budget(quick=4)
    @example(rows=2, width=4, labels=(0, -1, 2), batch_size=1)
    @example(rows=1, width=1, labels=(0, 0, 0), batch_size=None)
    @example(rows=0, width=4, labels=(0, 0, 0), batch_size=None)
    @given(rows=st.integers(0, 3), width=st.sampled_from([1, 4]),
           labels=st.tuples(st.integers(-2, 4), st.integers(-2, 4), st.integers(-2, 4)),
           batch_size=st.one_of(st.none(), st.integers(1, 3)))
    def test_feature_tagger_tags_each_position_or_names_the_labels(self, rows, width, labels,
                                                                   batch_size):
        features = np.ones((rows, 3, width), np.float32)
        inputs = {"features": features, "input_mask": np.ones((rows, 3), np.int32)}
        try:
            logits = self.tagger.predict(inputs, batch_size=batch_size, verbose=0)
            history = self.tagger.fit(inputs, np.tile(np.array(labels, np.int32), (rows, 1)),
                                      batch_size=batch_size, verbose=0)
        except Exception as error:  # noqa: BLE001
            self.assert_refused(error, ["y ", "features", "x ", "batch_size"])
            return
        self.assert_finite(logits, (rows, 3, 3))
        self.assert_finite(history.history["loss"])
