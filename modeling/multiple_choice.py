"""Multiple choice (SWAG): one score per (context, ending) pair.

GPT's multiple-choice input follows from reading left to right: each choice
is one [context; delimiter; answer] sequence, scored from its last token.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from modeling.fine_tuning_model import (FineTuningModel, OutputProjection, flatten_choices,
                                        last_real_token)
from network.config import BertConfig
from network.serving_spec import ServingSpec


@keras.saving.register_keras_serializable(package="bert")
class BertMultipleChoice(FineTuningModel):
    """SWAG: each (context, ending) pair encoded, one score per choice from [CLS]
    (from the last token under `causal`, GPT's multiple-choice input).

    It takes packed inputs [batch, choices, seq] (`tasks.classification`
    builds them from SWAG) and returns [batch, choices] scores.

    Args:
      config: the encoder's hyperparameters.
      causal: the left-to-right model, scoring each choice at its last token.
      **kwargs: Keras model arguments (`name`, `dtype`).

    Examples:

    >>> model = BertMultipleChoice.from_pretrained("uncased_L-12_H-768_A-12")
    >>> ids = np.ones((1, 4, 16), np.int32)
    >>> model({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids}).shape
    TensorShape([1, 4])
    """

    def __init__(self, config: BertConfig, causal: bool = False, **kwargs):
        kwargs.setdefault("name", "bert_multiple_choice")
        super().__init__(config, causal=causal, **kwargs)
        self.scorer = OutputProjection(1, config.hidden_size, config.initializer_range,
                                       "multiple_choice", name="scorer",
                                       dtype=self.dtype_policy)
        if causal:
            self.encoder.pooler.trainable = False  # each choice is read at its last token
        self._finish_build((None, 4, None))  # SWAG's four choices; any count works when called

    def call(self, features, training=None):
        flat, choices = flatten_choices(features)
        encoded = self.encode(flat, training, pooled_only=not self.causal)
        summary = (last_real_token(encoded["sequence_output"], flat["input_mask"])
                   if self.causal else encoded["pooled_output"])
        scores = self.scorer(self.dropout(summary, training=training))
        return ops.reshape(scores, (-1, choices))

    def head_variables(self) -> dict:
        return self.scorer.checkpoint_variables()

    def serving_spec(self) -> ServingSpec:
        return self._spec("multiple_choice", ("logits",), input_rank=3)  # [batch, choices, seq]

    def default_loss(self) -> keras.losses.Loss:
        # One score per choice; the label is the right choice's index.
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self) -> list:
        return [keras.metrics.SparseCategoricalAccuracy("accuracy")]

    def _empty_outputs(self, input_shape: tuple) -> np.ndarray:
        return np.zeros((0, input_shape[1] if len(input_shape) == 3 else 0), np.float32)
