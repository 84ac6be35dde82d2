"""The task models' public entry points refuse bad arguments in the library's own words.

Each case once reached TensorFlow or Keras (a graph error, `pop from an
empty set`, `'<' not supported`) or trained silently on something else (a
batch size of 32 for 0, NaN weights for a NaN rate, no loss for a tag of
-1). Every check here runs before a dataset is built.
"""

import math
import shutil
import tempfile
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from core.arguments import FieldError
from modeling import (BertClassifier, BertConfig, BertMultipleChoice, BertPreprocessor,
                      BertSpanModel, BertTokenTagger, load_config, load_encoder,
                      load_preprocessor)
from tests.fixtures import TestCase, tiny_config
from tests.modeling.tiny_folder import tiny_folder
from tests.network.test_input_checks import BAD_INPUTS, packed, with_bad_value

TEXTS = ["a fine film", "a dull film", "great acting", "boring plot"]
LABELS = [1, 0, 1, 0]
SENTENCES = [["john", "lives", "in", "paris"], ["the", "cat", "sat"]]
TAGS = [[1, 0, 0, 2], [0, 1, 0]]


_SHARED = {}  # the module's folder and models, made once for every class here


def setUpModule():
    root = Path(tempfile.mkdtemp())
    _SHARED["root"] = root
    _SHARED["folder"] = folder = tiny_folder(root)
    _SHARED["classifier"] = BertClassifier.from_pretrained(folder, num_labels=2,
                                                           sequence_length=16)
    _SHARED["classifier"].compile()
    _SHARED["regression"] = BertClassifier.from_pretrained(folder, num_labels=1,
                                                           sequence_length=16)
    _SHARED["regression"].compile()
    _SHARED["tagger"] = BertTokenTagger.from_pretrained(folder, num_labels=3,
                                                        sequence_length=16)
    _SHARED["tagger"].compile()
    _SHARED["span"] = BertSpanModel.from_pretrained(folder, sequence_length=16)


def tearDownModule():
    shutil.rmtree(_SHARED.pop("root"), ignore_errors=True)
    _SHARED.clear()


class _TinyFolderTest(TestCase, parameterized.TestCase):
    """Tests of the module's shared models, which no test here trains."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        for name in ("folder", "classifier", "regression", "tagger", "span"):
            setattr(cls, name, _SHARED[name])


class CountsAndRatesTest(_TinyFolderTest):

    @parameterized.parameters(
        ({"learning_rate": math.nan}, "learning_rate must be a positive finite number, got nan"),
        ({"learning_rate": 0}, "learning_rate must be a positive finite number, got 0"),
        ({"learning_rate": -1}, "learning_rate must be a positive finite number, got -1"),
        ({"learning_rate": "5e-5"}, "learning_rate must be a positive finite number, got '5e-5'"),
        ({"warmup_proportion": math.nan},
         r"warmup_proportion must be a finite number in \[0, 1\], got nan"),
        ({"warmup_proportion": 1.5}, r"warmup_proportion must be a finite number in \[0, 1\]"),
    )
    def test_compile_refuses_rates_that_train_nothing_or_nan(self, arguments, message):
        with self.assertRaisesRegex(ValueError, message):
            self.classifier.compile(**arguments)

    @parameterized.parameters(
        ({"batch_size": 0}, "batch_size must be a positive integer, got 0"),
        ({"batch_size": "4"}, "batch_size must be a positive integer, got '4'"),
        ({"batch_size": True}, "batch_size must be a positive integer, got True"),
        ({"batch_size": 2.0}, "batch_size must be a positive integer, got 2.0"),
        ({"epochs": 0}, "epochs must be a positive integer, got 0"),
        ({"epochs": 1.5}, "epochs must be a positive integer, got 1.5"),
        ({"steps_per_epoch": 0}, "steps_per_epoch must be a positive integer, got 0"),
        ({"initial_epoch": -1}, "initial_epoch must be an integer >= 0, got -1"),
        ({"initial_epoch": 2, "epochs": 2}, "initial_epoch=2 is not below epochs=2"),
    )
    def test_fit_refuses_counts_that_are_not_positive_integers(self, arguments, message):
        with self.assertRaisesRegex(ValueError, message):
            self.classifier.fit(TEXTS, LABELS, verbose=0, **arguments)

    def test_evaluate_and_predict_refuse_a_batch_size_of_zero(self):
        with self.assertRaisesRegex(ValueError, "batch_size must be a positive integer, got 0"):
            self.classifier.evaluate(TEXTS, LABELS, batch_size=0, verbose=0)
        with self.assertRaisesRegex(ValueError, "batch_size must be a positive integer, got 0"):
            self.classifier.predict_labels(TEXTS, batch_size=0)

    @parameterized.parameters(
        (BertClassifier, {"num_labels": "2"}, "num_labels must be a positive integer, got '2'"),
        (BertClassifier, {"num_labels": True}, "num_labels must be a positive integer, got True"),
        (BertClassifier, {"num_labels": 0}, "num_labels must be a positive integer, got 0"),
        (BertClassifier, {"num_labels": 2, "bilstm_units": 2.5},
         "bilstm_units must be an integer >= 0, got 2.5"),
        (BertClassifier, {"num_labels": 2, "lm_aux_weight": math.nan},
         "lm_aux_weight must be a finite number >= 0, got nan"),
        (BertTokenTagger, {"num_labels": "3"}, "num_labels must be a positive integer, got '3'"),
        (BertTokenTagger, {"num_labels": 3, "bilstm_units": "2"},
         "bilstm_units must be an integer >= 0, got '2'"),
    )
    def test_constructors_refuse_counts_that_are_not_integers(self, model_class, arguments,
                                                               message):
        with self.assertRaisesRegex(ValueError, message):
            model_class(tiny_config(), **arguments)

    def test_from_pretrained_refuses_a_sequence_length_that_is_not_a_count(self):
        with self.assertRaisesRegex(ValueError,
                                    r"sequence_length must be an integer from 3 to the model's "
                                    r"max_position_embeddings \(64\), got '16'"):
            BertClassifier.from_pretrained(self.folder, num_labels=2, sequence_length="16")
        with self.assertRaisesRegex(TypeError, "do_lower_case must be True, False or None"):
            BertClassifier.from_pretrained(self.folder, num_labels=2, sequence_length=16,
                                           do_lower_case="false")

    def test_max_answer_length_must_be_a_positive_integer(self):
        with self.assertRaisesRegex(ValueError,
                                    "max_answer_length must be a positive integer, got 0"):
            self.span.predict_answers(["who sat?"], ["the cat sat"], max_answer_length=0)


class LabelsTest(_TinyFolderTest):

    @parameterized.parameters(
        ([1, 0, 5, 0], r"y: example 2 has label 5, outside \[0, 2\): the model has 2 labels"),
        ([1, 0, -1, 0], r"y: example 2 has label -1, outside \[0, 2\)"),
        (["pos", "neg", "pos", "neg"],
         "y: example 0 has label 'pos', a name, but the model has no label_names"),
        ([1.0, 0.5, 1.0, 0.0], r"y: example 0 has label 1.0; the model takes class indices "
                               r"in \[0, 2\)"),
        ([True, False, True, False], "y: example 0 has label True"),
    )
    def test_classifier_labels_name_the_example_the_value_and_the_range(self, labels, message):
        with self.assertRaisesRegex(ValueError, message):
            self.classifier.fit(TEXTS, labels, verbose=0)

    def test_validation_and_evaluation_labels_are_checked_too(self):
        with self.assertRaisesRegex(ValueError, r"validation_data: example 1 has label 9, "
                                                r"outside \[0, 2\)"):
            self.classifier.fit(TEXTS, LABELS, validation_data=(TEXTS, [0, 9, 0, 1]), verbose=0)
        with self.assertRaisesRegex(ValueError, r"y: example 1 has label 9, outside \[0, 2\)"):
            self.classifier.evaluate(TEXTS, [0, 9, 0, 1], verbose=0)
        with self.assertRaisesRegex(ValueError, "evaluate on raw text needs the labels"):
            self.classifier.evaluate(TEXTS, verbose=0)

    @parameterized.parameters(
        ([0.1, math.nan, 0.3, 0.2], "y: example 1 has label nan; a regression model "
                                    r"\(num_labels=1\) takes finite numbers"),
        ([0.1, 0.2, math.inf, 0.2], "y: example 2 has label inf"),
        (["1.0", "0.5", "1", "0"], "y: example 0 has label '1.0'; a regression model"),
    )
    def test_regression_targets_must_be_finite_numbers(self, labels, message):
        with self.assertRaisesRegex(ValueError, message):
            self.regression.fit(TEXTS, labels, verbose=0)

    @parameterized.parameters(
        ([[1, 0, -1, 2], [0, 1, 0]], r"y: sentence 0, word 2 has label -1, outside \[0, 3\)"),
        ([[1, 0, 0, 2], [0, 1, 7]], r"y: sentence 1, word 2 has label 7, outside \[0, 3\)"),
        ([[1, 0, 0, 2], "O O O"], "y: sentence 1's tags must be a list"),
    )
    def test_tags_name_the_sentence_and_the_word(self, tags, message):
        with self.assertRaisesRegex((ValueError, TypeError), message):
            self.tagger.fit(SENTENCES, tags, verbose=0)

    def test_pair_columns_of_different_length_name_both_lengths(self):
        with self.assertRaisesRegex(ValueError, "the pair's columns differ in length: 4 "
                                                "texts_a but 2 texts_b"):
            self.classifier.fit((TEXTS, TEXTS[:2]), LABELS, verbose=0)

    @parameterized.parameters(
        ([1.0, math.nan, 1.0, 1.0], "sample_weight: example 1 has weight nan"),
        ([1.0, -1.0, 1.0, 1.0], "sample_weight: example 1 has weight -1.0"),
        ([1.0, 1.0], "x holds 4 examples but sample_weight 2 weights"),
    )
    def test_sample_weights_are_finite_and_one_per_example(self, weights, message):
        with self.assertRaisesRegex(ValueError, message):
            self.classifier.fit(TEXTS, LABELS, sample_weight=weights, verbose=0)


class ClassWeightTest(_TinyFolderTest):
    """Keras trains on each of these: a negative weight maximises its class's loss, an
    unknown class is dropped, NaN stops the run at step 1 as a divergence."""

    @parameterized.parameters(
        ({0: -1.0, 1: 1.0}, "class_weight: the weight of class 0 is -1.0; a weight is a "
                            "finite number >= 0"),
        ({0: 1, 1: 1, 5: 2}, "class_weight names class 5, which the model does not have: it "
                             "takes class indices 0 to 1"),
        ({0: float("nan"), 1: 1}, "class_weight: the weight of class 0 is nan"),
    )
    def test_fit_refuses_weights_before_any_step(self, class_weight, message):
        steps = int(self.classifier.optimizer.iterations)
        with self.assertRaisesRegex(FieldError, message):
            self.classifier.fit(TEXTS, LABELS, class_weight=class_weight, verbose=0)
        self.assertEqual(int(self.classifier.optimizer.iterations), steps)

    def test_weights_by_label_name_train_and_leave_no_class_out(self):
        named = BertClassifier.from_pretrained(self.folder, num_labels=2, sequence_length=16,
                                               label_names=["neg", "pos"])
        # An optimizer of its own: compile()'s schedule, planned anew by each fit, would
        # trace the training step again for the second one.
        named.compile(optimizer=keras.optimizers.Adam(5e-5))
        # {0: 0}: Keras' own table would stop at class 0 and fail on a label 1 in the graph.
        for class_weight in ({"neg": 1, "pos": 4}, {0: 0}):
            history = named.fit(TEXTS, ["pos", "neg", "pos", "neg"], class_weight=class_weight,
                                epochs=1, verbose=0)
            self.assertTrue(np.isfinite(history.history["loss"][-1]))

    def test_models_without_single_label_classes_refuse_class_weight(self):
        message = "class_weight weighs the classes of a single-label classifier; "
        with self.assertRaisesRegex(FieldError, message + r"this one is a regression"):
            self.regression.fit(TEXTS, [0.1, 0.2, 0.3, 0.4], class_weight={0: 1}, verbose=0)
        with self.assertRaisesRegex(FieldError, message + "BertTokenTagger has none"):
            self.tagger.fit(SENTENCES, TAGS, class_weight={0: 1}, verbose=0)
        with self.assertRaisesRegex(FieldError, "class_weight and sample_weight both weigh"):
            self.classifier.fit(TEXTS, LABELS, class_weight={0: 1}, sample_weight=[1] * 4,
                                verbose=0)


class EmptyInputsTest(_TinyFolderTest):

    def test_predicting_nothing_gives_an_empty_result_of_the_outputs_shape(self):
        self.assertEqual(self.classifier.predict([], verbose=0).shape, (0, 2))
        self.assertEqual(self.regression.predict([], verbose=0).shape, (0,))
        self.assertEqual(self.classifier.predict_labels([]), [])
        self.assertEqual(self.tagger.predict([], verbose=0).shape, (0, 16, 3))
        self.assertEqual(self.tagger.predict_labels([]), [])
        empty = self.span.predict(([], []), verbose=0)
        self.assertEqual({key: value.shape for key, value in empty.items()},
                         {"start_logits": (0, 16), "end_logits": (0, 16)})
        self.assertEqual(self.span.predict_answers([], []), [])
        packed = {key: np.zeros((0, 8), np.int32)
                  for key in ("input_ids", "input_mask", "segment_ids")}
        self.assertEqual(self.classifier.predict(packed, verbose=0).shape, (0, 2))

    def test_predict_on_packed_ids_refuses_ids_outside_their_tables(self):
        for case, name, value, message in BAD_INPUTS:
            bad = with_bad_value(packed(), name, value)
            with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message, msg=case):
                self.classifier.predict(bad, verbose=0)
        self.assertEqual(self.classifier.predict(packed(), verbose=0).shape, (2, 2))

    def test_sentences_without_words_are_tagged_with_nothing(self):
        self.assertEqual(self.tagger.predict_labels([[]]), [[]])
        tags = self.tagger.predict_labels([[], ["john"]])
        self.assertEqual([len(row) for row in tags], [0, 1])

    def test_fitting_or_evaluating_nothing_is_an_error_naming_the_argument(self):
        with self.assertRaisesRegex(ValueError, "x holds no examples: fit needs at least one"):
            self.classifier.fit([], [], verbose=0)
        with self.assertRaisesRegex(ValueError, "x holds no examples: evaluate needs at least"):
            self.classifier.evaluate([], [], verbose=0)
        with self.assertRaisesRegex(ValueError, "validation_data holds no examples"):
            self.classifier.fit(TEXTS, LABELS, validation_data=([], []), verbose=0)
        with self.assertRaisesRegex(ValueError, "x is None"):
            self.classifier.predict(None, verbose=0)
        with self.assertRaisesRegex(ValueError, "fit on raw text needs the labels: give y"):
            self.classifier.fit(TEXTS, verbose=0)


class DefaultLossTest(_TinyFolderTest):

    def test_span_compiles_with_a_half_cross_entropy_per_output(self):
        # Keras adds the two outputs' losses: halves give the runner's mean of the two.
        self.span.compile()
        self.assertEqual(sorted(self.span.loss), ["end_logits", "start_logits"])
        self.assertEqual({type(loss).__name__ for loss in self.span.loss.values()},
                         {"HalfCrossEntropy"})

    def test_multiple_choice_compiles_with_cross_entropy_over_the_choices(self):
        model = BertMultipleChoice(tiny_config())
        model.compile()
        self.assertEqual(model.loss.get_config()["from_logits"], True)


class SourcesTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.folder = _SHARED["folder"]

    def test_a_source_that_names_no_model_is_refused_naming_the_argument(self):
        with self.assertRaisesRegex(ValueError, r"path is empty \(''\): give a model folder"):
            load_encoder("")
        with self.assertRaisesRegex(TypeError, "path must be a model folder, checkpoint or "
                                               "model name .*got None"):
            load_encoder(None)
        with self.assertRaisesRegex(TypeError, "got 3"):
            load_config(3)
        with self.assertRaisesRegex(ValueError, "path is empty"):
            BertClassifier.from_pretrained("", num_labels=2)

    def test_a_window_longer_than_the_position_embeddings_is_refused_when_built(self):
        # load_preprocessor refuses it first, from the folder's config, before building anything.
        message = (r"sequence_length must be an integer from 3 to the model's "
                   r"max_position_embeddings \(64\), got 1000000000")
        with self.assertRaisesRegex(ValueError, message):
            BertClassifier.from_pretrained(self.folder, num_labels=2, sequence_length=10**9)
        preprocessor = BertPreprocessor(load_preprocessor(self.folder, 16).vocabulary,
                                        sequence_length=65)  # built without the model's config
        with self.assertRaisesRegex(ValueError, r"^sequence_length must be an integer from 3 to "
                                                r"the model's max_position_embeddings \(64\), "
                                                "got 65$"):
            BertTokenTagger(BertConfig.from_json_file(Path(self.folder) / "bert_config.json"),
                            num_labels=2, preprocessor=preprocessor)


if __name__ == "__main__":
    tf.test.main()
