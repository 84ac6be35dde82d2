"""The features of BERT's records: names, value types and lengths, written once for every floor.

They are the original `create_pretraining_data.py`'s tf.train.Example
features, so records written by either implementation train on the other.
`data_prep` writes pre-training records and `training` reads them, siblings
that may not import each other; the encoder's three inputs among them are
also what every model, fine-tuning dataset and exported signature takes,
from `network` up. A rule with users on several floors lives below all of
them, and `core` rather than `text` is its home: this is a file format, not
text handling, and it needs neither a tokenizer nor TensorFlow.
"""

from __future__ import annotations

import dataclasses

from core.arguments import check_integer

ENCODER_INPUTS = ("input_ids", "input_mask", "segment_ids")
RECORD_DTYPES = ("int64", "float32")  # a tf.train.Example's int64_list and float_list


@dataclasses.dataclass(frozen=True)
class RecordFeature:
    """One fixed-length feature of every record: `length` values of type `dtype`."""

    dtype: str  # one of RECORD_DTYPES
    length: int

    def __post_init__(self) -> None:
        if self.dtype not in RECORD_DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(RECORD_DTYPES)}, "
                             f"got {self.dtype!r}")
        check_integer("length", self.length, minimum=0)


def pretraining_record_schema(max_seq_length: int,
                              max_predictions_per_seq: int) -> dict[str, RecordFeature]:
    """The pre-training record's features, in the order the original writes them.

    Args:
        max_seq_length: tokens per record (the encoder's inputs).
        max_predictions_per_seq: masked positions per record, padding slots
            included (weight 0).
    """
    sequence = RecordFeature("int64", max_seq_length)
    predictions = RecordFeature("int64", max_predictions_per_seq)
    return {**{name: sequence for name in ENCODER_INPUTS},
            "masked_lm_positions": predictions, "masked_lm_ids": predictions,
            "masked_lm_weights": RecordFeature("float32", max_predictions_per_seq),
            "next_sentence_labels": RecordFeature("int64", 1)}
