"""Sentence (pair) classification: the paper's head on [CLS], and GPT's readings of it.

The model takes the packed inputs and returns float32 logits
(`modeling.fine_tuning_model` holds what every task model shares); it reads
raw text through its preprocessor (`modeling.classifier_preprocessor`) and
turns its logits back into labels.

The left-to-right (GPT-style) variant of the classifier cannot read the
[CLS] vector: under causal attention the first position sees only itself.
It classifies from the last real token instead, as GPT does with its final
"extract" token, and can add the language-model loss on the same inputs
(GPT's L3 = L2 + lambda * L1). A left-to-right model sees a pair in one
order only, so for similarity, which has no order, GPT encodes both orders
and adds the two last-token vectors (`both_orders`).
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import numpy as np
from keras import ops

from core.arguments import FieldError, check_flag, check_number, check_threshold, check_width
from evaluation.multi_label import MultiLabelF1
from modeling.classifier_preprocessor import BertClassifierPreprocessor
from modeling.fine_tuning_model import (FineTuningModel, OutputProjection, bilstm_layer,
                                        bilstm_variables, flatten_choices, last_real_token)
from modeling.labels import check_label_names, label_outputs, label_sets
from modeling.text_tasks import refuse_both_weights
from modeling.losses import left_to_right_lm_loss
from network.config import BertConfig
from network.heads import LeftToRightLMHead
from network.model_folder import check_window_settings
from network.serving_spec import ServingSpec
from text.text_windows import EXAMPLE_WINDOWS, TRUNCATE, WINDOWS, mean_over_windows
from training.class_weights import check_class_weight


@keras.saving.register_keras_serializable(package="bert")
class BertClassifier(FineTuningModel):
    """Sentence (pair) classification: K logits, or one score for regression (STS-B).

    `bilstm_units > 0` reads the sequence with a randomly initialized
    bidirectional LSTM and classifies from its two final states, Table 5's
    "+ BiLSTM" row: it gives the left-to-right model a right-to-left reading.

    Raw texts longer than the preprocessor's `sequence_length` are cut to it
    with `long_texts="truncate"` (counted and logged once per call), or read
    whole with `long_texts="windows"`: windows `window_stride` sub-tokens
    apart (default: half a window), each trained on as an example with its
    text's label, a text predicted and evaluated by the mean of its windows'
    logits (`text.text_windows`). Its preprocessor is a
    `BertClassifierPreprocessor` with the model's labels and windows.

    Args:
      config: the encoder's hyperparameters.
      num_labels: classes; 1 for regression (one score, mean squared error).
      causal: the left-to-right model, classifying from the last real token.
      lm_aux_weight: with `causal`, GPT's auxiliary language-model loss weight.
      both_orders: with `causal`, encode a pair in both orders and add them
        (GPT's similarity input); inputs are then [batch, 2, seq].
      bilstm_units: units per direction of a BiLSTM under the head; 0 for none.
      label_names: a name per class, in order: labels in and out by name.
      multi_label: each label a yes/no of its own (a sigmoid each, binary
        cross-entropy); labels are label sets.
      threshold: with `multi_label`, the probability above which a label is
        predicted, in (0, 1).
      long_texts: "truncate" (cut to `sequence_length`) or "windows" (read whole).
      window_stride: with "windows", sub-tokens between window starts
        (default: half a window).
      preprocessor: a `BertPreprocessor` (or `BertClassifierPreprocessor`) so
        that `fit` and `predict` take text; None for packed inputs only.
      **kwargs: Keras model arguments (`name`, `dtype`).

    Examples:

    >>> model = BertClassifier.from_pretrained("uncased_L-12_H-768_A-12", num_labels=2,
    ...                                        label_names=["negative", "positive"])
    >>> model.compile()
    >>> model.fit(["a fine film", "a dull film"], ["positive", "negative"], epochs=2)
    >>> model.predict_labels(["a fine plot"])
    ['positive']
    """

    preprocessor_class = BertClassifierPreprocessor

    def __init__(self, config: BertConfig, num_labels: int, causal: bool = False,
                 lm_aux_weight: float = 0.0, both_orders: bool = False, bilstm_units: int = 0,
                 label_names: Sequence[str] | None = None, multi_label: bool = False,
                 threshold: float = 0.5, long_texts: str = TRUNCATE,
                 window_stride: int | None = None, preprocessor=None, **kwargs):
        kwargs.setdefault("name", "bert_classifier")
        num_labels = check_width("num_labels", num_labels)
        lm_aux_weight = check_number("lm_aux_weight", lm_aux_weight, 0.0)
        multi_label = check_flag("multi_label", multi_label)
        threshold = check_threshold(threshold)
        if multi_label and num_labels < 2:
            raise ValueError(f"multi_label=True needs num_labels >= 2, got {num_labels}: one "
                             "yes/no label is a two-class single-label model")
        if threshold != 0.5 and not multi_label:
            raise ValueError(f"threshold={threshold} applies to multi_label=True; a "
                             "single-label model predicts its most probable class")
        window_stride = check_window_settings(long_texts, window_stride)
        if both_orders and long_texts != TRUNCATE:
            raise ValueError(f"long_texts={long_texts!r} reads single texts; a both_orders "
                             "model takes packed pairs")
        label_names = check_label_names(label_names, num_labels)
        preprocessor = BertClassifierPreprocessor.for_task(
            preprocessor, num_labels=num_labels, label_names=label_names,
            multi_label=multi_label, long_texts=long_texts, window_stride=window_stride)
        super().__init__(config, causal=causal, preprocessor=preprocessor, **kwargs)
        if lm_aux_weight and not causal:
            raise ValueError("lm_aux_weight needs the left-to-right model (causal=True)")
        if both_orders and not causal:
            raise ValueError("both_orders is GPT's similarity input for the left-to-right "
                             "model (causal=True); a bidirectional model sees both texts")
        self.keep_settings(num_labels=num_labels, lm_aux_weight=lm_aux_weight,
                           both_orders=both_orders, bilstm_units=bilstm_units,
                           label_names=label_names, multi_label=multi_label, threshold=threshold,
                           long_texts=long_texts, window_stride=window_stride)
        self.bilstm = bilstm_layer(bilstm_units, config.hidden_size, False, self.dtype_policy)
        self.summary_size = 2 * bilstm_units if bilstm_units else config.hidden_size
        self.classifier = OutputProjection(num_labels, self.summary_size,
                                           config.initializer_range, "", name="classifier",
                                           dtype=self.dtype_policy)
        self.lm_head = (LeftToRightLMHead(config, self.encoder.embedding_table,
                                          dtype=self.dtype_policy)
                        if self.lm_aux_weight else None)
        if causal or bilstm_units:
            self.encoder.pooler.trainable = False  # the summary is not [CLS]'s pooled vector
        self._finish_build((None, 2, None) if both_orders else (None, None))

    def call(self, features, training=None):
        if self.both_orders:  # [batch, 2, seq]: (a, b) and (b, a), one sequence each
            features, orders = flatten_choices(features)
        encoded = self.encode(features, training,
                              pooled_only=self.bilstm is None and not self.causal)
        if self.bilstm is not None:
            summary = self.bilstm(encoded["sequence_output"],
                                  mask=ops.cast(features["input_mask"], "bool"), training=training)
        elif self.causal:
            summary = last_real_token(encoded["sequence_output"], features["input_mask"])
        else:
            summary = encoded["pooled_output"]
        if self.both_orders:
            summary = ops.sum(ops.reshape(summary, (-1, orders, self.summary_size)), 1)
        logits = self.classifier(self.dropout(summary, training=training))
        if self.lm_head is not None and training:
            lm_logits = self.lm_head(encoded["sequence_output"])
            self.add_loss(self.lm_aux_weight * left_to_right_lm_loss(
                lm_logits, features["input_ids"], features["input_mask"]))
        logits = logits[:, 0] if self.num_labels == 1 else logits
        if EXAMPLE_WINDOWS in features:  # a batch of texts read through windows
            return mean_over_windows(logits, features[EXAMPLE_WINDOWS])
        return logits

    def head_variables(self) -> dict:
        names = {**self.classifier.checkpoint_variables(), **bilstm_variables(self.bilstm)}
        if self.lm_head is not None:
            names.update(self.lm_head.checkpoint_variables())
        return names

    def serving_spec(self) -> ServingSpec:
        activation = ("sigmoid" if self.multi_label else None if self.num_labels == 1
                      else "softmax")
        return self._spec("classifier", ("logits",), input_rank=3 if self.both_orders else 2,
                          num_labels=self.num_labels, label_names=self.label_names,
                          activation=activation,
                          threshold=self.threshold if self.multi_label else None,
                          windows=self.long_texts == WINDOWS, window_stride=self.window_stride,
                          both_orders=self.both_orders, bilstm_units=self.bilstm_units)

    def _require_preprocessor(self) -> None:
        if self.both_orders:
            raise ValueError("a both_orders model takes packed [batch, 2, seq] inputs")
        super()._require_preprocessor()

    def _class_weight_checked(self, class_weight, sample_weight) -> dict[int, float]:
        refuse_both_weights(sample_weight)
        if self.num_labels == 1 or self.multi_label:
            kind = "a regression (num_labels=1)" if self.num_labels == 1 else "multi-label"
            raise FieldError("{class_weight} weighs the classes of a single-label classifier; "
                             "this one is {0}: give sample_weight instead", kind)
        return check_class_weight(class_weight, self.num_labels, self.label_names)

    def _empty_outputs(self, input_shape: tuple) -> np.ndarray:
        return np.zeros((0,) if self.num_labels == 1 else (0, self.num_labels), np.float32)

    def default_loss(self) -> keras.losses.Loss:
        if self.num_labels == 1:
            return keras.losses.MeanSquaredError()
        if self.multi_label:  # each label a yes/no of its own
            return keras.losses.BinaryCrossentropy(from_logits=True)
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self) -> list:
        if self.num_labels == 1:
            return []
        if self.multi_label:
            return [MultiLabelF1(self.label_names or list(range(self.num_labels)),
                                 self.threshold)]
        return [keras.metrics.SparseCategoricalAccuracy("accuracy")]

    def predict_labels(self, x, batch_size: int | None = None, return_scores: bool = False):
        """The predicted label of each text, by name if the model has `label_names`.

        Args:
          x: texts, or pairs, as `predict` takes them.
          batch_size: texts per batch (32 when None).
          return_scores: also return the probabilities, [N, num_labels] in label
            order: the softmax of the logits, or for a `multi_label` model each
            label's sigmoid.

        Returns:
          One label per text (its index without `label_names`); for a
          `multi_label` model, the list of labels whose probability exceeds
          `threshold`; for regression (one label), the score itself. With
          `return_scores`, a pair (labels, probabilities). [] for no texts.

        Examples:

        >>> labels, scores = model.predict_labels(["a fine film"], return_scores=True)
        >>> labels, scores.shape
        (['positive'], (1, 2))
        """
        return_scores = check_flag("return_scores", return_scores)
        if return_scores and self.num_labels == 1:
            raise ValueError("return_scores=True needs classes: a regression model "
                             "(num_labels=1) predicts the score itself, which predict_labels "
                             "already returns")
        logits = self.predict(x, batch_size=batch_size, verbose=0)
        if self.num_labels == 1:
            return logits.tolist()
        from scipy import special  # imported here: a runner that never predicts is spared it

        if self.multi_label:
            probabilities = special.expit(logits)
            labels = label_sets(probabilities, self.threshold, self.label_names)
        else:
            probabilities = special.softmax(logits, axis=-1)
            labels = label_outputs(np.argmax(logits, axis=-1).tolist(), self.label_names)
        return (labels, probabilities) if return_scores else labels
