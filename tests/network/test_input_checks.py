"""network.layers.input_checks: ids outside their tables refused inside the encoder's graph.

Before, Keras' `take` read input id -7 as word V-7 and segment id -1 as the
last segment type, and a mask value of 2 weighed its position as no mask
does; each gave outputs without a word. `BAD_INPUTS` is shared with the
export tests, which feed the same to every served model.
"""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from network.encoder import BertEncoder
from tests.fixtures import TINY_CONFIG, TestCase, tiny_config

VOCAB = TINY_CONFIG["vocab_size"]
_IDS_MESSAGE = rf"input_ids holds values outside \[0, {VOCAB}\) \(vocab_size={VOCAB}\)"
_SEGMENTS_MESSAGE = r"segment_ids holds values outside \[0, 2\) \(type_vocab_size=2\)"
_MASK_MESSAGE = r"input_mask holds values other than 0 \(padding\) and 1"
# (name, input, value put at [0, 1], the error's message).
BAD_INPUTS = (
    ("negative_id", "input_ids", -7, _IDS_MESSAGE),
    ("id_past_the_vocabulary", "input_ids", VOCAB, _IDS_MESSAGE),
    ("negative_segment", "segment_ids", -1, _SEGMENTS_MESSAGE),
    ("segment_past_the_types", "segment_ids", 2, _SEGMENTS_MESSAGE),
    ("mask_of_two", "input_mask", 2, _MASK_MESSAGE),
    ("negative_mask", "input_mask", -1, _MASK_MESSAGE),
)


def with_bad_value(features: dict, name: str, value: int) -> dict:
    """A copy of packed `features` ([batch, seq] or [batch, rows, seq]) with `value` at the
    first example's second position of `name`."""
    changed = {key: np.array(array, np.int32) for key, array in features.items()}
    changed[name].reshape(-1, changed[name].shape[-1])[0, 1] = value
    return changed


def packed(batch: int = 2, length: int = 8) -> dict:
    """Valid packed inputs for the tiny config."""
    ids = np.random.default_rng(0).integers(5, VOCAB, (batch, length)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1:, -2:] = 0  # the second example padded
    return {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}


class EncoderInputChecksTest(TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.encoder = BertEncoder(tiny_config())
        traced = tf.function(lambda features: cls.encoder(features)["pooled_output"])
        cls.traced = staticmethod(traced)
        # As a served signature traces it: any batch and length, so only the graph can check.
        spec = tf.TensorSpec([None, None], tf.int32)
        served = tf.function(lambda input_ids, input_mask, segment_ids: cls.encoder(
            {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
        )["pooled_output"], input_signature=[spec] * 3)
        cls.served = staticmethod(lambda features: served(**features))

    @parameterized.named_parameters(*BAD_INPUTS)
    def test_a_value_outside_its_table_is_refused_naming_the_input(self, name, value, message):
        bad = with_bad_value(packed(), name, value)
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message):
            self.encoder(bad)
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                    rf"assertion failed: \[{message}.*\] \[-?\d+\] \[-?\d+\]"):
            self.traced(bad)

    @parameterized.named_parameters(("mask", "input_mask"), ("segments", "segment_ids"))
    def test_a_mask_or_segments_of_another_length_are_refused_naming_them(self, name):
        bad = packed()
        bad[name] = bad[name][:, :-1]
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                    rf"{name} must have the shape of input_ids; its shape, "
                                    r"then theirs:\] \[2 7\] \[2 8\]"):
            self.served(bad)

    @parameterized.parameters(0, TINY_CONFIG["max_position_embeddings"] + 1)
    def test_rows_of_no_position_or_past_the_table_are_refused(self, length):
        positions = TINY_CONFIG["max_position_embeddings"]
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                    rf"input_ids must hold 1 to {positions} positions "
                                    rf"\(max_position_embeddings={positions}\); it holds\] "
                                    rf"\[{length}\]"):
            self.served(packed(length=length))

    def test_valid_inputs_and_an_empty_batch_pass(self):
        self.assertEqual(self.traced(packed()).shape, (2, TINY_CONFIG["hidden_size"]))
        self.assertEqual(self.traced(packed(batch=0)).shape, (0, TINY_CONFIG["hidden_size"]))
        edges = packed()
        edges["input_ids"][0, :2] = (0, VOCAB - 1)
        edges["segment_ids"][0, 1] = 1
        self.assertEqual(self.traced(edges).shape, (2, TINY_CONFIG["hidden_size"]))

    def test_the_checks_compile_under_xla(self):
        compiled = tf.function(lambda features: self.encoder(features)["pooled_output"],
                               jit_compile=True)
        self.assertAllClose(compiled(packed()), self.traced(packed()), atol=1e-5, rtol=0)


if __name__ == "__main__":
    tf.test.main()
