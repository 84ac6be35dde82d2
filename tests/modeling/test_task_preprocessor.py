"""Each task model reads raw text through one preprocessor layer of its task, mapped in tf.data."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import (BertClassifier, BertClassifierPreprocessor, BertMultipleChoice,
                      BertPreprocessor, BertSpanModel, BertSpanPreprocessor, BertTaggerPreprocessor,
                      BertTokenTagger, load_preprocessor)
from tests.modeling.tiny_folder import TinyFolderTestCase

TEXTS = ["a fine film", "a dull film about the cat sat on the mat on the mat", "great"]


class TaskPreprocessorTest(TinyFolderTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.base = load_preprocessor(cls.folder, 8)

    def test_each_task_model_holds_its_tasks_preprocessor_layer(self):
        models = {
            BertClassifierPreprocessor: BertClassifier.from_pretrained(
                self.folder, num_labels=2, sequence_length=8, label_names=["neg", "pos"]),
            BertTaggerPreprocessor: BertTokenTagger.from_pretrained(
                self.folder, num_labels=2, sequence_length=8, window_stride=3),
            BertSpanPreprocessor: BertSpanModel.from_pretrained(self.folder, sequence_length=8),
        }
        for expected, model in models.items():
            with self.subTest(model=type(model).__name__):
                self.assertIs(type(model.preprocessor), expected)
                self.assertIsInstance(model.preprocessor, keras.layers.Layer)
                self.assertIs(type(model).preprocessor_class, expected)
                self.assertEqual(model.preprocessor.vocabulary, self.base.vocabulary)
                self.assertEqual(model.preprocessor.sequence_length, 8)
        classifier = models[BertClassifierPreprocessor]
        self.assertEqual(classifier.preprocessor.label_names, ["neg", "pos"])
        self.assertEqual(models[BertTaggerPreprocessor].preprocessor.window_stride, 3)
        # Multiple choice reads packed inputs only: no task preprocessor of its own.
        self.assertIsNone(BertMultipleChoice.preprocessor_class)

    def test_the_models_dataset_is_its_preprocessor_mapped_over_the_batches(self):
        model = BertClassifier.from_pretrained(self.folder, num_labels=2, sequence_length=8,
                                               label_names=["neg", "pos"], long_texts="windows")
        labels = ["pos", "neg", "pos"]
        columns = model.preprocessor.text_columns(TEXTS, labels)
        expected_features, expected_labels = model.preprocessor(*columns, training=True)
        features, got_labels = next(iter(model.text_dataset(TEXTS, labels, call="fit")))
        self.assertAllEqual(features["input_ids"], expected_features["input_ids"])
        self.assertAllEqual(got_labels, expected_labels)
        # The long text trains as several windows, each with its text's label.
        self.assertGreater(len(got_labels), len(TEXTS))
        # Evaluation keeps one label per text and the windows' counts for the mean.
        features, got_labels = next(iter(model.text_dataset(TEXTS, labels, call="evaluate")))
        self.assertAllEqual(got_labels, [1, 0, 1])
        self.assertEqual(int(tf.reduce_sum(features["example_windows"])),
                         len(features["input_ids"]))

    def test_a_plain_preprocessor_becomes_the_tasks_with_the_models_settings(self):
        model = BertClassifier.from_pretrained(self.folder, num_labels=3, preprocessor=self.base,
                                               multi_label=True)
        self.assertIs(type(model.preprocessor), BertClassifierPreprocessor)
        self.assertEqual((model.preprocessor.num_labels, model.preprocessor.multi_label),
                         (3, True))
        self.assertEqual(model.preprocessor.sequence_length, 8)

    def test_a_task_preprocessor_that_reads_labels_otherwise_is_refused_by_name(self):
        preprocessor = BertClassifierPreprocessor(self.base.vocabulary, sequence_length=8,
                                                  num_labels=2, label_names=["no", "yes"])
        kept = BertClassifier.from_pretrained(self.folder, num_labels=2, label_names=["no", "yes"],
                                              preprocessor=preprocessor)
        self.assertIs(kept.preprocessor, preprocessor)
        with self.assertRaisesRegex(ValueError, r"label_names: the model's \['a', 'b'\], the "
                                                r"preprocessor's \['no', 'yes'\]"):
            BertClassifier.from_pretrained(self.folder, num_labels=2, label_names=["a", "b"],
                                           preprocessor=preprocessor)
        # Another model's preprocessor, without labels of its own, lends its text settings.
        unlabelled = BertClassifier.from_pretrained(self.folder, num_labels=2,
                                                    sequence_length=8).preprocessor
        labelled = BertClassifier.from_pretrained(self.folder, num_labels=2,
                                                  label_names=["a", "b"],
                                                  preprocessor=unlabelled)
        self.assertEqual(labelled.preprocessor.label_names, ["a", "b"])
        self.assertIsNone(unlabelled.label_names)
        self.assertEqual(labelled.preprocessor.sequence_length, 8)
        with self.assertRaisesRegex(TypeError, "BertClassifierPreprocessor, got "
                                               "BertTaggerPreprocessor"):
            BertClassifier.from_pretrained(
                self.folder, num_labels=2,
                preprocessor=BertTaggerPreprocessor(self.base.vocabulary, sequence_length=8))

    @pytest.mark.long
    def test_a_saved_model_reloads_with_its_tasks_preprocessor(self):
        model = BertTokenTagger.from_pretrained(self.folder, num_labels=2, sequence_length=8,
                                                label_names=["O", "X"], window_stride=2)
        path = str(self.class_folder() / "tagger.keras")
        model.save(path)
        reloaded = keras.models.load_model(path)
        self.assertIs(type(reloaded.preprocessor), BertTaggerPreprocessor)
        self.assertEqual(reloaded.preprocessor.get_config(), model.preprocessor.get_config())
        sentences = [["john", "lives", "in", "paris", "and", "the", "cat", "sat"]]
        self.assertAllClose(reloaded.predict(sentences, verbose=0),
                            model.predict(sentences, verbose=0))

    def test_a_config_from_before_task_preprocessors_still_loads(self):
        """A `.keras` file of an earlier version holds a plain BertPreprocessor."""
        model = BertClassifier.from_pretrained(self.folder, num_labels=2, sequence_length=8)
        config = model.get_config()
        config["preprocessor"] = keras.saving.serialize_keras_object(self.base)
        rebuilt = BertClassifier.from_config(config)
        self.assertIs(type(rebuilt.preprocessor), BertClassifierPreprocessor)
        self.assertEqual(rebuilt.preprocessor.num_labels, 2)

    def test_the_base_preprocessor_still_packs_what_the_task_ones_pack(self):
        classifier = BertClassifierPreprocessor.from_pretrained(self.folder, 8)
        for texts in (TEXTS, (TEXTS, ["x", "y", "z"])):
            expected = self.base(texts)
            for key, value in classifier(texts).items():
                self.assertAllEqual(value, expected[key])
        self.assertIsInstance(classifier, BertPreprocessor)


class ClassifierPreprocessorTest(TinyFolderTestCase):

    def test_labels_by_name_sets_and_numbers_as_the_head_reads_them(self):
        named = BertClassifierPreprocessor.from_pretrained(self.folder, 8,
                                                           label_names=["neg", "pos"])
        self.assertEqual(named.num_labels, 2)
        _, labels = named.text_columns(TEXTS, ["pos", "neg", 1])
        self.assertAllEqual(labels, [1, 0, 1])
        sets = BertClassifierPreprocessor.from_pretrained(
            self.folder, 8, label_names=["a", "b", "c"], multi_label=True)
        _, labels = sets.text_columns(TEXTS, [["a", "c"], [], ["b"]])
        self.assertAllEqual(labels, [[1, 0, 1], [0, 0, 0], [0, 1, 0]])
        scores = BertClassifierPreprocessor.from_pretrained(self.folder, 8, num_labels=1)
        _, labels = scores.text_columns(TEXTS, [0.5, 1.0, 4.5])
        self.assertAllClose(labels, [0.5, 1.0, 4.5])

    def test_without_num_labels_labels_are_refused(self):
        preprocessor = BertClassifierPreprocessor.from_pretrained(self.folder, 8)
        self.assertEqual(len(preprocessor.text_columns(TEXTS)), 1)
        with self.assertRaisesRegex(ValueError, "has no num_labels"):
            preprocessor.text_columns(TEXTS, [0, 1, 0])

    def test_training_windows_carry_their_texts_label_and_weight(self):
        preprocessor = BertClassifierPreprocessor.from_pretrained(
            self.folder, 8, num_labels=2, long_texts="windows", window_stride=3)
        texts, labels, weights = preprocessor.text_columns(TEXTS, [0, 1, 0], [1.0, 2.0, 3.0])
        features, window_labels, window_weights = preprocessor(texts, labels, weights,
                                                               training=True)
        counts = preprocessor(texts)["example_windows"].numpy()
        self.assertGreater(counts[1], 1)
        self.assertAllEqual(window_labels, np.repeat([0, 1, 0], counts))
        self.assertAllClose(window_weights, np.repeat([1.0, 2.0, 3.0], counts))
        self.assertEqual(len(features["input_ids"]), counts.sum())

    def test_bad_settings_are_refused_by_name(self):
        vocabulary = load_preprocessor(self.folder, 8).vocabulary
        with self.assertRaisesRegex(ValueError, "long_texts must be"):
            BertClassifierPreprocessor(vocabulary, long_texts="cut")
        with self.assertRaisesRegex(ValueError, "window_stride=9 is wider than a window"):
            BertClassifierPreprocessor(vocabulary, sequence_length=8, long_texts="windows",
                                       window_stride=9)
        with self.assertRaisesRegex(ValueError, "3 label_names for 2 labels"):
            BertClassifierPreprocessor(vocabulary, num_labels=2, label_names=["a", "b", "c"])


class TaggerPreprocessorTest(TinyFolderTestCase):

    def test_each_words_tag_sits_at_its_first_piece_with_weight_there_only(self):
        preprocessor = BertTaggerPreprocessor.from_pretrained(self.folder, 16,
                                                              label_names=["O", "X"])
        sentences = [["john", "lives", "in", "paris"]]
        columns = preprocessor.text_columns(sentences, [["X", "O", "O", "X"]], [2.0])
        features, tags, weights = preprocessor(*columns)
        tokenizer = preprocessor.tokenizer
        starts = [1]  # [CLS] first, then each word's pieces
        for word in sentences[0][:-1]:
            starts.append(starts[-1] + len(tokenizer.tokenize(word)))
        self.assertAllEqual(np.flatnonzero(weights.numpy()[0]), starts)
        self.assertAllClose(weights.numpy()[0][starts], [2.0] * 4)
        self.assertAllEqual(tags.numpy()[0][starts], [1, 0, 0, 1])
        self.assertAllEqual(features["input_ids"][0, :1], [tokenizer.cls_id])

    def test_tags_not_one_per_word_are_refused_before_any_op(self):
        preprocessor = BertTaggerPreprocessor.from_pretrained(self.folder, 16, num_labels=2)
        with self.assertRaisesRegex(ValueError, "sentence 0 has 2 words but 1 tags"):
            preprocessor.text_columns([["a", "b"]], [[0]])


class TaggerPreprocessorInputsTest(TinyFolderTestCase):

    def test_sentences_are_split_as_served_and_words_pass_as_given(self):
        preprocessor = BertTaggerPreprocessor.from_pretrained(self.folder, 8)
        words = [["a", "fine", "film"], ["great"]]
        expected = preprocessor(tf.ragged.constant(words))
        for given in (["a fine  film", "great"], tf.constant(["a fine\tfilm", "great"]),
                      np.array(["a fine film", "great"]), words):
            with self.subTest(given=type(given).__name__):
                packed = preprocessor(given)
                self.assertAllEqual(packed["input_ids"], expected["input_ids"])
                self.assertAllEqual(packed["input_mask"], expected["input_mask"])

    def test_inputs_that_are_not_sentences_are_named(self):
        preprocessor = BertTaggerPreprocessor.from_pretrained(self.folder, 8)
        with self.assertRaisesRegex(TypeError, "words: sentences must be strings, got int32"):
            preprocessor(tf.constant([1, 2]))
        with self.assertRaisesRegex(TypeError, r"\[N\] sentences or \[N, \(words\)\] ragged "
                                               "words, got a 2-D array"):
            preprocessor(tf.constant([["a", "b"]]))
        with self.assertRaisesRegex(TypeError, "sentence 1, word 0 is 3"):
            preprocessor([["a"], [3]])


class SpanPreprocessorTest(TinyFolderTestCase):

    def test_each_window_carries_its_examples_weight(self):
        preprocessor = BertSpanPreprocessor.from_pretrained(self.folder, 16)
        context = "the cat sat on the mat . " * 4 + "john lives in paris ."
        questions, contexts = ["where ?", "who ?"], [context, "john sleeps"]
        answers = [{"text": "paris", "answer_start": context.index("paris")},
                   {"text": "john", "answer_start": 0}]
        features, targets, weights = preprocessor.text_columns((questions, contexts), answers,
                                                               [3.0, 0.5])
        windows = len(features["input_ids"])
        self.assertGreater(windows, 2)
        self.assertAllClose(weights, [3.0] * (windows - 1) + [0.5])
        # The answer is the target of the windows that hold it, [CLS] (0) elsewhere.
        self.assertGreater(int(tf.reduce_sum(tf.cast(targets["start_logits"] > 0, tf.int32))), 1)
        with self.assertRaisesRegex(ValueError, "x holds 2 examples but sample_weight 1"):
            preprocessor.text_columns((questions, contexts), answers, [1.0])

    @pytest.mark.long
    def test_fit_with_sample_weights_trains_every_window(self):
        model = BertSpanModel.from_pretrained(self.folder, sequence_length=16)
        model.compile()
        context = "the cat sat on the mat . " * 4 + "john lives in paris ."
        history = model.fit((["where ?"], [context]),
                            [{"text": "paris", "answer_start": context.index("paris")}],
                            sample_weight=[2.0], epochs=1, verbose=0)
        self.assertTrue(np.isfinite(history.history["loss"][0]))
