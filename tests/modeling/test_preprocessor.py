"""The preprocessor layer: raw strings and pairs -> the runners' packed ids, in graphs too."""

import json
import tempfile
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from data_prep.corpora.assets import minilm_dir
from modeling import BertPreprocessor, load_preprocessor, load_tokenizer
from modeling.config import ConfigError
from tests.fixtures import GOLDEN
from tests.modeling.tiny_folder import VOCAB, tiny_folder
from text.sentence_pairs import pack_ids

TEXTS_A = ["The cat sat on the mat.", "John lives in Paris", "", "unbelievable films!",
           "what " * 30]
TEXTS_B = ["Who sat?", "", "a film", "the plot was dull , the acting was great", "is " * 30]


class PreprocessorTest(tf.test.TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = Path(cls.enterClassContext(tempfile.TemporaryDirectory()))
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
        self.assertTrue(load_preprocessor(self.folder).tokenizer.do_lower_case)
        self.assertFalse(load_preprocessor(cased).tokenizer.do_lower_case)
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
        with self.assertRaisesRegex(ValueError, "sequence_length must be at least 3"):
            load_preprocessor(self.folder, sequence_length=2)
        with self.assertRaisesRegex(ConfigError, "no vocabulary file"):
            load_preprocessor(self.root / "empty")

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
