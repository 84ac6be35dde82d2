"""The preprocessor layer: raw strings and pairs -> the runners' packed ids, in graphs too."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from data_prep.corpora.assets import minilm_dir
from modeling import BertPreprocessor, load_preprocessor, load_tokenizer
from network.config import ConfigError
from tests.fixtures import GOLDEN, TestCase
from tests.modeling.tiny_folder import VOCAB, tiny_folder
from text.sentence_pairs import pack_ids

TEXTS_A = ["The cat sat on the mat.", "John lives in Paris", "", "unbelievable films!",
           "what " * 30]
TEXTS_B = ["Who sat?", "", "a film", "the plot was dull , the acting was great", "is " * 30]


class PreprocessorTest(TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        cls.folder = tiny_folder(cls.root)
        cls.tokenizer = load_tokenizer(cls.folder)

    def _packed(self, texts_a, texts_b, length):
        ids_a = self.tokenizer(texts_a).to_list()
        ids_b = self.tokenizer(texts_b).to_list() if texts_b is not None else [None] * len(ids_a)
        return pack_ids(ids_a, ids_b, length, self.tokenizer.cls_id, self.tokenizer.sep_id)

    @parameterized.parameters(8, 16, 64)
    def test_single_texts_equal_the_runners_packing(self, length):
        outputs = load_preprocessor(self.folder, sequence_length=length)(TEXTS_A)
        for key, expected in self._packed(TEXTS_A, None, length).items():
            self.assertEqual(outputs[key].dtype, tf.int32)
            self.assertAllEqual(outputs[key], expected, msg=key)

    @parameterized.parameters(7, 12, 64)
    def test_pairs_equal_the_runners_packing_and_truncation(self, length):
        preprocessor = load_preprocessor(self.folder, sequence_length=length)
        expected = self._packed(TEXTS_A, TEXTS_B, length)
        for inputs in ((TEXTS_A, TEXTS_B), list(zip(TEXTS_A, TEXTS_B))):
            outputs = preprocessor(inputs)
            for key in expected:
                self.assertAllEqual(outputs[key], expected[key], msg=key)

    def test_casing_comes_from_the_folder(self):
        cased = tiny_folder(self.root, "cased_L-2_H-32_A-2")
        self.assertTrue(load_preprocessor(self.folder, 16).tokenizer.do_lower_case)
        self.assertFalse(load_preprocessor(cased, 16).tokenizer.do_lower_case)
        # "The" is not in the vocabulary: an uncased reading finds "the", a cased one [UNK].
        self.assertEqual(int(load_preprocessor(self.folder, 4)(["The"])["input_ids"][0, 1]),
                         VOCAB.index("the"))
        self.assertEqual(int(load_preprocessor(cased, 4)(["The"])["input_ids"][0, 1]),
                         VOCAB.index("[UNK]"))

    def test_tokenizer_is_callable_on_strings(self):
        ids = self.tokenizer(["the cat sat", "unbelievable"])
        self.assertIsInstance(ids, tf.RaggedTensor)
        self.assertEqual(ids.to_list(), [[VOCAB.index(t) for t in ("the", "cat", "sat")],
                                         [VOCAB.index(t) for t in ("un", "##believ", "##able")]])
        self.assertAllEqual(self.tokenizer("the cat"), [VOCAB.index("the"), VOCAB.index("cat")])

    def test_runs_inside_tf_data_batched_or_not(self):
        preprocessor = load_preprocessor(self.folder, sequence_length=16)
        expected = preprocessor((TEXTS_A, TEXTS_B))["input_ids"]
        pairs = tf.data.Dataset.from_tensor_slices((TEXTS_A, TEXTS_B))
        batched = pairs.batch(2).map(lambda a, b: preprocessor((a, b)))
        self.assertAllEqual(tf.concat([batch["input_ids"] for batch in batched], 0), expected)
        rows = [row["input_ids"] for row in pairs.map(lambda a, b: preprocessor((a, b)))]
        self.assertAllEqual(tf.stack(rows), expected)

    def test_survives_a_savedmodel(self):
        preprocessor = load_preprocessor(self.folder, sequence_length=16)
        module = tf.Module()
        module.preprocessor = preprocessor
        module.serve = tf.function(lambda texts: preprocessor(texts)["input_ids"],
                                   input_signature=[tf.TensorSpec([None], tf.string)])
        path = str(self.root / "preprocessor_savedmodel")
        tf.saved_model.save(module, path)
        self.assertAllEqual(tf.saved_model.load(path).serve(tf.constant(TEXTS_A)),
                            preprocessor(TEXTS_A)["input_ids"])

    def test_config_round_trip_keeps_vocabulary_and_casing(self):
        preprocessor = load_preprocessor(self.folder, sequence_length=12)
        config = json.loads(json.dumps(keras.saving.serialize_keras_object(preprocessor)))
        copy = keras.saving.deserialize_keras_object(config)
        self.assertIsInstance(copy, BertPreprocessor)
        self.assertEqual(copy.vocabulary, VOCAB)
        self.assertEqual(copy.sequence_length, 12)
        self.assertAllEqual(copy((TEXTS_A, TEXTS_B))["input_ids"],
                            preprocessor((TEXTS_A, TEXTS_B))["input_ids"])

    def test_bad_inputs_are_named(self):
        preprocessor = load_preprocessor(self.folder, sequence_length=8)
        with self.assertRaisesRegex(TypeError, "not a dict; packed inputs"):
            preprocessor({"input_ids": [[1]]})
        with self.assertRaisesRegex(ValueError, "at most two"):
            preprocessor((["a"], ["b"], ["c"]))
        with self.assertRaisesRegex(ValueError, r"\(text_a, text_b\) pairs; got rows of 3"):
            preprocessor([("a", "b", "c")])
        with self.assertRaisesRegex(TypeError, "expected strings, got int32"):
            preprocessor([1, 2])
        with self.assertRaisesRegex(TypeError, r"expected strings \(str or bytes\), got list"):
            preprocessor(["a", 1])
        with self.assertRaisesRegex(ConfigError, "no vocabulary file"):
            load_preprocessor(self.root / "empty", sequence_length=16)

    @parameterized.parameters((2, "2"), (65, "65"), (10**9, "1000000000"), ("16", "'16'"),
                              (True, "True"), (16.0, "16.0"))
    def test_sequence_length_is_an_integer_within_the_models_positions(self, value, shown):
        """Checked before anything is built: 10**9 positions once took 12 GB for one text."""
        with self.assertRaisesRegex(ValueError, "^sequence_length must be an integer from 3 to "
                                    rf"the model's max_position_embeddings \(64\), got {shown}$"):
            load_preprocessor(self.folder, sequence_length=value)
        self.assertEqual(load_preprocessor(self.folder, sequence_length=64).sequence_length, 64)
        self.assertEqual(load_preprocessor(self.folder, sequence_length=np.int64(3))
                         .sequence_length, 3)

    @parameterized.parameters("16", 2, None)
    def test_a_layer_built_from_a_vocabulary_takes_an_integer_of_at_least_3(self, value):
        with self.assertRaisesRegex(ValueError, r"^sequence_length must be an integer >= 3, got"):
            BertPreprocessor(VOCAB, sequence_length=value)

    def test_pair_columns_of_different_lengths_are_refused_naming_both(self):
        """They once crashed the process, or packed ids read from uninitialised memory."""
        preprocessor = load_preprocessor(self.folder, sequence_length=16)
        for texts_a, texts_b in (((["the film", "a cat", "dull"], ["is fine"])),
                                 (["the film", "a cat"], ["is fine"]), ([], ["a"])):
            with self.assertRaisesRegex(ValueError, f"texts_a and texts_b differ in batch size: "
                                                    f"{len(texts_a)} and {len(texts_b)}; give "
                                                    "one of each per example"):
                preprocessor((texts_a, texts_b))

    def test_pair_columns_of_different_lengths_in_a_graph_are_one_error(self):
        preprocessor = load_preprocessor(self.folder, sequence_length=16)
        texts = tf.TensorSpec([None], tf.string)
        in_graph = tf.function(lambda a, b: preprocessor((a, b)), input_signature=[texts] * 2)
        mapped = tf.data.Dataset.from_generator(  # batches of sizes unknown when traced
            lambda: iter([(["the film", "a cat"], ["is fine"])]),
            output_signature=(texts, texts)).map(lambda a, b: preprocessor((a, b)))
        message = r"assertion failed: \[texts_a and texts_b differ in batch size: 2 and 1"
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
            in_graph(tf.constant(["the film", "a cat"]), tf.constant(["is fine"]))
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
            list(mapped)

    def test_words_and_questions_of_different_lengths_are_one_error(self):
        preprocessor = load_preprocessor(self.folder, sequence_length=8)
        words = tf.ragged.constant([["the", "cat"], ["a"]])
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "questions and context_words "
                                    "differ in batch size: 1 and 2"):
            preprocessor.pack_question_words(tf.constant(["who"]), words)
        for labels, message in (([[1], [2, 3]], "differ in row 0: 2 and 1 items"),
                                ([[1, 2], [3, 4]], "differ in row 1: 1 and 2 items"),
                                ([[1, 2]], "differ in batch size: 2 and 1")):
            with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                        f"words and word_labels {message}"):
                preprocessor.pack_words(words, tf.ragged.constant(labels))

    def test_an_empty_batch_packs_to_no_rows(self):
        preprocessor = load_preprocessor(self.folder, sequence_length=8)
        for inputs in ([], ([], []), tf.constant([], tf.string), np.array([], dtype=object)):
            outputs = preprocessor(inputs)
            for key in ("input_ids", "input_mask", "segment_ids"):
                self.assertEqual(outputs[key].shape, (0, 8), msg=(inputs, key))

    @pytest.mark.assets
    def test_real_minilm_gives_hugging_face_ids(self):
        texts = json.loads((GOLDEN / "minilm_reference.json").read_text())
        golden = np.load(GOLDEN / "minilm_reference.npz")
        preprocessor = load_preprocessor(minilm_dir(), sequence_length=texts["max_length"])
        single = [row for row, second in enumerate(texts["text_b"]) if second is None]
        pairs = [row for row, second in enumerate(texts["text_b"]) if second is not None]
        self.assertNotEmpty(single)
        self.assertNotEmpty(pairs)
        outputs = {"single": preprocessor([texts["text_a"][row] for row in single]),
                   "pairs": preprocessor([(texts["text_a"][row], texts["text_b"][row])
                                          for row in pairs])}
        for name, rows in (("single", single), ("pairs", pairs)):
            for key in ("input_ids", "input_mask", "segment_ids"):
                self.assertAllEqual(outputs[name][key], golden[key][rows], msg=f"{name} {key}")


class DefaultSequenceLengthTest(TestCase):
    """Every default length (the preprocessor's, the exports') is 128 within the model's
    positions: a model of 64 positions packs 64, so a run folder exports with no length given."""

    def test_128_or_the_models_positions(self):
        from network.config import BertConfig
        from modeling.preprocessor import default_sequence_length
        small = BertConfig(vocab_size=10, max_position_embeddings=64)
        large = BertConfig(vocab_size=10, max_position_embeddings=512)
        self.assertEqual((default_sequence_length(small), default_sequence_length(large)),
                         (64, 128))

    @pytest.mark.long
    def test_an_export_without_a_length_takes_the_models_default(self):
        from export.model_exports import export_model
        folder = tiny_folder(self.tmp_path())  # 64 positions
        out = export_model(folder, self.tmp_path() / "hub", "tf_hub", sequence_length=None)
        self.assertTrue((out / "encoder").is_dir())
