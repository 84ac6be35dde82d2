"""The SavedModel's in-graph packing gives the inputs training gave: `sentence_pairs.pack`'s."""

import os
import stat
from unittest import mock

import pytest
import tensorflow as tf
from absl.testing import parameterized

from export import serving
from export.serving import ClassifierServing, export_classifier
from network.layers.activations import get_activation
from network.serving_spec import ServingSpec
from tests.export.exported_models import without_graph_rewrites
from tests.fixtures import TestCase
from text.sentence_pairs import pack
from text.tokenization import FullTokenizer

KEYS = ("input_ids", "input_mask", "segment_ids")
LENGTH = 8


class _EchoesInputs:
    """Stands in for the classifier so that the test sees the packed features it is given."""

    weights = []

    def serving_spec(self) -> ServingSpec:
        return ServingSpec("classifier", ("logits",), num_labels=1)  # one "score" output

    def __call__(self, features, training=False):
        return tf.cast(tf.stack([features[key] for key in KEYS], axis=1), tf.float32)


def _gelu_is_compiled_separately() -> bool:
    """Whether GELU traced now is a call of its own XLA-compiled function (no inline ops)."""
    x = tf.zeros([2, 3])
    function = tf.function(lambda: get_activation("gelu")(x))
    types = {op.type for op in function.get_concrete_function().graph.get_operations()}
    return not types & {"Erf", "Erfc"}


def _expected(tokenizer, text_a, text_b):
    packed = pack(tokenizer.tokenize(text_a),
                  None if text_b is None else tokenizer.tokenize(text_b), LENGTH,
                  tokenizer.vocab)
    return [packed.input_ids, packed.input_mask, packed.segment_ids]


class ServingPackingTest(TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        """One vocabulary and serving module for the class: every test reads, none changes it."""
        super().setUpClass()
        without_graph_rewrites(cls)
        root = cls.class_folder()
        vocab = root / "vocab.txt"
        vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on",
                                    "mat", "a", "dog", "##s"]) + "\n", encoding="utf-8")
        cls.tokenizer = FullTokenizer(str(vocab))  # no [MASK]: serving never inserts one
        cls.module = ClassifierServing(_EchoesInputs(), cls.tokenizer, LENGTH, labels=None)

    def _assert_packed_as_in_training(self, served, pairs):
        """Training's packing, without the padding columns that no row of the batch uses."""
        expected = [_expected(self.tokenizer, text_a, text_b) for text_a, text_b in pairs]
        longest = max(sum(mask) for _, mask, _ in expected)
        self.assertEqual(served.shape[-1], longest)
        for row, pair in enumerate(pairs):
            self.assertTrue(all(value == 0 for column in expected[row]
                                for value in column[longest:]), pair)
            self.assertEqual(served[row].astype(int).tolist(),
                             [column[:longest] for column in expected[row]], pair)

    def test_pairs_pack_as_in_training(self):
        pairs = [("the cat sat", ""), ("the cat sat", "  "), ("the cat sat on the mat", "a dog"),
                 ("cats", "the dogs sat on the mat"), ("the cat sat on the mat", "")]
        served = self.module.serve_pair(tf.constant([a for a, _ in pairs]),
                                        tf.constant([b for _, b in pairs]))["score"].numpy()
        self._assert_packed_as_in_training(served, pairs)

    def test_single_texts_pack_as_in_training(self):
        texts = ["the cat sat", "the cat sat on the mat on the mat", ""]
        served = self.module.serve_single(tf.constant(texts))["score"].numpy()
        self._assert_packed_as_in_training(served, [(text, None) for text in texts])

    def test_pair_of_equal_lengths_loses_from_text_b(self):
        """The original's `_truncate_seq_pair` takes from B on a tie; serving must too."""
        pairs = [("the cat sat", "a dog sat"), ("the cat", "a dog"), ("cats sat on", "the mat")]
        served = self.module.serve_pair(tf.constant([a for a, _ in pairs]),
                                        tf.constant([b for _, b in pairs]))["score"].numpy()
        self._assert_packed_as_in_training(served, pairs)
        cat, sat, dog = (self.tokenizer.vocab[word] for word in ("cat", "sat", "dog"))
        self.assertEqual(served[0][0].astype(int).tolist()[:7], [2, 4, cat, sat, 3, 9, dog])

    def test_a_batch_is_served_at_its_longest_rows_length(self):
        short, longer = ["the cat"], ["the cat", "the cat sat on the mat"]
        self.assertEqual(self.module.serve_single(tf.constant(short))["score"].shape, (1, 3, 4))
        self.assertEqual(self.module.serve_single(tf.constant(longer))["score"].shape,
                         (2, 3, 8))  # [CLS] 6 words [SEP] fill the 8 positions

    def test_exported_model_packs_as_in_training(self):
        """The packing survives export: the reloaded signature runs it from the SavedModel graph."""
        path = export_classifier(_EchoesInputs(), self.tokenizer, LENGTH, None, pair=True,
                                 path=os.path.join(self.create_tempdir().full_path, "exported"))
        loaded = tf.saved_model.load(path)
        pairs = [("the cat sat on the mat", "a dog sat"), ("the cat sat", "")]
        served = loaded.signatures["serving_default"](
            text_a=tf.constant([a for a, _ in pairs]),
            text_b=tf.constant([b for _, b in pairs]))["score"].numpy()
        self._assert_packed_as_in_training(served, pairs)

    def test_exports_are_traced_without_separately_compiled_functions(self):
        """XLA would compile those anew for every batch size and length a request brings."""
        traced_compiled = []

        def record(module, path, signatures, extra_files):
            traced_compiled.append(_gelu_is_compiled_separately())
            return path

        with mock.patch.object(serving, "write_saved_model", side_effect=record):
            export_classifier(_EchoesInputs(), self.tokenizer, LENGTH, None, pair=False,
                              path=os.path.join(self.create_tempdir().full_path, "exported"))
        self.assertEqual(traced_compiled, [False])
        self.assertTrue(_gelu_is_compiled_separately())  # elsewhere, as before

    def test_columns_of_different_lengths_are_one_readable_error(self):
        """They once aborted the serving process (std::length_error in the packer)."""
        for text_a, text_b in ((["the cat", "a dog", "cats"], ["the mat"]), ([], ["a"])):
            with self.assertRaisesRegex(
                    tf.errors.InvalidArgumentError,
                    rf"assertion failed: \[text_a and text_b differ in batch size: {len(text_a)} "
                    rf"and {len(text_b)}; give one of each per example\]"):
                self.module.serve_pair(tf.constant(text_a, tf.string),
                                       tf.constant(text_b, tf.string))

    def test_an_empty_batch_gets_no_rows(self):
        empty = tf.constant([], tf.string)
        self.assertEqual(self.module.serve_pair(empty, empty)["score"].shape, (0, 3, LENGTH))
        self.assertEqual(self.module.serve_single(empty)["score"].shape, (0, 3, LENGTH))

    @parameterized.parameters((0o022, 0o755), (0o077, 0o700))
    @pytest.mark.long
    def test_exported_folders_follow_the_umask(self, mask, expected):
        tmp_path = self.create_tempdir().full_path
        previous = os.umask(mask)
        try:
            for _ in range(2):  # a second export replaces the first
                path = export_classifier(_EchoesInputs(), self.tokenizer, LENGTH, None,
                                         pair=False, path=os.path.join(tmp_path, "saved_model"))
        finally:
            os.umask(previous)
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), expected)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(path, "variables")).st_mode), expected)
        self.assertEqual(sorted(os.listdir(tmp_path)), ["saved_model"])


if __name__ == "__main__":
    tf.test.main()
