"""The record schema: the original's features in its order, and no feature it cannot store."""

import tensorflow as tf

from core.record_schema import ENCODER_INPUTS, RecordFeature, pretraining_record_schema


class RecordSchemaTest(tf.test.TestCase):

    def test_pretraining_records_are_the_originals_features_in_its_order(self):
        schema = pretraining_record_schema(128, 20)
        self.assertEqual([(name, feature.dtype, feature.length)
                          for name, feature in schema.items()],
                         [("input_ids", "int64", 128), ("input_mask", "int64", 128),
                          ("segment_ids", "int64", 128), ("masked_lm_positions", "int64", 20),
                          ("masked_lm_ids", "int64", 20), ("masked_lm_weights", "float32", 20),
                          ("next_sentence_labels", "int64", 1)])
        self.assertEqual(tuple(schema)[:3], ENCODER_INPUTS)

    def test_a_feature_a_record_cannot_hold_is_refused(self):
        with self.assertRaisesRegex(ValueError, "^dtype must be one of int64, float32, "
                                                "got 'int32'$"):
            RecordFeature("int32", 4)
        for length in (-1, 2.0, True):
            with self.assertRaisesRegex(ValueError, f"^length must be an integer >= 0, "
                                                    f"got {length!r}$"):
                RecordFeature("int64", length)


if __name__ == "__main__":
    tf.test.main()
