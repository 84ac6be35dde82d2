"""Token tagging (NER): a tag for every word, read through windows when a sentence is long.

The model reads raw sentences (lists of words) through its preprocessor
(`modeling.tagger_preprocessor`) and turns its logits back into tags, one
per word.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import numpy as np

from core.arguments import check_flag, check_integer, check_width
from modeling.fine_tuning_model import OutputProjection, SequenceModel, bilstm_variables
from modeling.labels import check_label_names, label_outputs
from modeling.tagger_preprocessor import BertTaggerPreprocessor, sentence_lengths
from modeling.text_arguments import is_raw_text
from network.config import BertConfig
from network.serving_spec import ServingSpec
from text.text_windows import WORD_POSITIONS, word_logits


@keras.saving.register_keras_serializable(package="bert")
class BertTokenTagger(SequenceModel):
    """Token tagging (NER): K logits at every position, no CRF, as the paper.

    Raw sentences (lists of words, read by a `BertTaggerPreprocessor`) longer
    than the preprocessor's window are read through windows `window_stride`
    sub-tokens apart (default: half a window), every word scored in the
    window where it has the most context.

    Args:
      config: the encoder's hyperparameters.
      num_labels: tags.
      bilstm_units: units per direction of a BiLSTM under the head; 0 for none.
      label_names: a name per tag, in order: tags in and out by name.
      window_stride: sub-tokens between the starts of a long sentence's
        windows (default: half a window).
      preprocessor: a `BertPreprocessor` (or `BertTaggerPreprocessor`) so that
        the model takes sentences; None for packed inputs only.
      **kwargs: Keras model arguments (`name`, `dtype`).

    Examples:

    >>> model = BertTokenTagger.from_pretrained("cased_L-12_H-768_A-12", num_labels=3,
    ...                                         label_names=["O", "B-PER", "B-LOC"])
    >>> model.compile()
    >>> model.fit([["John", "lives", "in", "Paris"]], [["B-PER", "O", "O", "B-LOC"]])
    >>> model.predict_labels([["Mary", "lives", "in", "Rome"]])
    [['B-PER', 'O', 'O', 'B-LOC']]
    """

    preprocessor_class = BertTaggerPreprocessor

    def __init__(self, config: BertConfig, num_labels: int, bilstm_units: int = 0,
                 label_names: Sequence[str] | None = None, window_stride: int | None = None,
                 preprocessor=None, **kwargs):
        kwargs.setdefault("name", "bert_tagger")
        num_labels = check_width("num_labels", num_labels)
        if window_stride is not None:
            window_stride = check_integer("window_stride", window_stride)
        label_names = check_label_names(label_names, num_labels)
        preprocessor = BertTaggerPreprocessor.for_task(
            preprocessor, num_labels=num_labels, label_names=label_names,
            window_stride=window_stride)
        super().__init__(config, bilstm_units, preprocessor=preprocessor, **kwargs)
        self.keep_settings(num_labels=num_labels, label_names=label_names,
                           window_stride=window_stride)
        self.tagger = OutputProjection(num_labels, self.sequence_width, config.initializer_range,
                                       "ner", name="tagger", dtype=self.dtype_policy)
        self._finish_build((None, None))

    def call(self, features, training=None):
        sequence = self.read_sequence(features, training)
        logits = self.tagger(self.dropout(sequence, training=training))
        if WORD_POSITIONS in features:  # raw sentences: each word's logits, from its window
            return word_logits(logits, features[WORD_POSITIONS])
        return logits

    def head_variables(self) -> dict:
        return {**self.tagger.checkpoint_variables(), **bilstm_variables(self.bilstm)}

    def serving_spec(self) -> ServingSpec:
        # A sentence longer than a window is always read through windows (the class's doc).
        return self._spec("tagger", ("logits",), num_labels=self.num_labels,
                          label_names=self.label_names,
                          activation="softmax" if self.num_labels > 1 else None,
                          windows=True, window_stride=self.window_stride,
                          bilstm_units=self.bilstm_units)

    def predict(self, x, batch_size=None, **kwargs):
        """Raw sentences give each word's logits [N, most words, labels], zeros past a
        sentence's end; packed inputs give logits at every position, as Keras."""
        outputs = super().predict(x, batch_size=batch_size, **kwargs)
        if not is_raw_text(x) or outputs.ndim != 2:  # not [words, labels]: no sentences
            return outputs
        lengths = sentence_lengths(x)
        padded = np.zeros((len(lengths), max(lengths), self.num_labels), np.float32)
        padded[np.arange(max(lengths)) < np.array(lengths)[:, None]] = outputs
        return padded

    def _empty_outputs(self, input_shape: tuple) -> np.ndarray:
        return np.zeros((0, input_shape[-1], self.num_labels), np.float32)

    def default_loss(self) -> keras.losses.Loss:
        # The mean over labelled sub-tokens, as `tagging_loss`: weights are 0 elsewhere.
        return keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight")

    def default_weighted_metrics(self) -> list:
        return [keras.metrics.SparseCategoricalAccuracy("accuracy")]

    def predict_labels(self, x, batch_size: int | None = None, return_scores: bool = False):
        """Each sentence's tags, one per word, lined up with the input words, however
        long the sentence is (each word read in its max-context window).

        Args:
          x: sentences, each a list of words.
          batch_size: sentences per batch (32 when None).
          return_scores: also return each word's tag probabilities (the softmax
            at its first sub-token, [num_labels] in label order).

        Returns:
          Per sentence, a tag per word (its name if the model has
          `label_names`, else its index); with `return_scores`, a pair (tags,
          probabilities), the probabilities per sentence and word. [] for no
          sentences.

        Examples:

        >>> model.predict_labels([["John", "lives", "in", "Paris"]])
        [['B-PER', 'O', 'O', 'B-LOC']]
        """
        return_scores = check_flag("return_scores", return_scores)
        logits = self.predict(x, batch_size=batch_size, verbose=0)
        if not len(logits):
            return ([], []) if return_scores else []
        best = np.argmax(logits, axis=-1)
        lengths = sentence_lengths(x)
        tags = [label_outputs(best[row, :length].tolist(), self.label_names)
                for row, length in enumerate(lengths)]
        if not return_scores:
            return tags
        from scipy import special  # imported here: a runner that never predicts is spared it

        probabilities = special.softmax(logits, axis=-1)
        return tags, [list(probabilities[row, :length]) for row, length in enumerate(lengths)]
