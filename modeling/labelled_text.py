"""The classifier and the tagger on raw text: labels in by name or index, names out.

A model given `label_names` (the order of its output units) reads labels
given as names and answers with names, so a fine-tuned model reloaded from
its folder speaks the task's own labels rather than bare indices. Labels
are checked against the head in `modeling.labels`; what the window of
`sequence_length` tokens cuts is counted in `modeling.truncation`.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from scipy import special

from core.arguments import check_flag
from modeling import truncation
from modeling.labels import (class_indices, label_outputs, multi_hot, regression_targets,
                             tag_indices)
from modeling.multi_label import MultiLabelF1, label_sets
from modeling.preprocessor import split_segments
from modeling.text_arguments import is_raw_text
from modeling.text_tasks import TextTaskMixin
from modeling.text_windows import (EXAMPLE_WINDOWS, WINDOWS, WORD_POSITIONS, stride_for,
                                   text_windows, word_windows)
from text.tag_schemes import check_aligned


class SentenceTextMixin(TextTaskMixin):
    """Raw text for the classifier: strings or pairs in, label names (or indices) out.

    A `multi_label` model takes a label set per text and answers with one
    (`modeling.multi_label`).
    """

    num_labels: int
    label_names: list[str] | None
    multi_label: bool
    threshold: float

    def _text_columns(self, x, y, argument: str) -> tuple:
        if getattr(self, "both_orders", False):
            raise ValueError("a both_orders model takes packed [batch, 2, seq] inputs")
        if isinstance(x, tuple) and len(x) == 2 and all(
                isinstance(column, (list, tuple, np.ndarray)) for column in x) and \
                len(x[0]) != len(x[1]):
            raise ValueError(f"the pair's columns differ in length: {len(x[0])} texts_a but "
                             f"{len(x[1])} texts_b; give one of each per example")
        texts_a, texts_b = split_segments(x)
        if texts_a.shape.rank == 0:
            raise ValueError("give a list of texts (or of pairs), not a single one")
        if texts_b is not None and self._windowed():
            raise ValueError(f"long_texts={WINDOWS!r} reads single texts through windows, "
                             "not pairs: give a list of texts, or build the model with "
                             "long_texts='truncate' for pairs")
        inputs = texts_a if texts_b is None else (texts_a, texts_b)
        if y is None:
            return inputs, None
        if self.num_labels == 1:
            return inputs, tf.constant(regression_targets(y, argument), tf.float32)
        if self.multi_label:
            return inputs, tf.constant(multi_hot(y, self.num_labels, self.label_names, argument))
        return inputs, tf.constant(class_indices(y, self.num_labels, self.label_names,
                                                 argument), tf.int32)

    def _preprocess_batch(self, x, y=None, sample_weight=None):
        """With windows, the model averages each text's windows (`example_windows`)."""
        if not self._windowed():
            return _with_targets(self.preprocessor(x), y, sample_weight)
        with tf.device("cpu"):
            tokens, _ = self.preprocessor.tokenizer.tokenize_batch(x)
        length = self.preprocessor.sequence_length
        tokenizer = self.preprocessor.tokenizer
        return _with_targets(text_windows(tokens, length, stride_for(self.window_stride, length),
                                          tokenizer.cls_id, tokenizer.sep_id), y, sample_weight)

    def _training_batch(self, x, y, sample_weight=None):
        """With windows, each window is an example carrying its text's label and weight."""
        if not self._windowed():
            return self._preprocess_batch(x, y, sample_weight)
        features = self._preprocess_batch(x)
        counts = features.pop(EXAMPLE_WINDOWS)
        return _with_targets(features, tf.repeat(y, counts, axis=0), None if sample_weight is None
                             else tf.repeat(sample_weight, counts, axis=0))

    def _windowed(self) -> bool:
        return getattr(self, "long_texts", None) == WINDOWS

    def _truncation(self, inputs) -> str | None:
        if self._windowed():
            return None
        texts_a, texts_b = inputs if isinstance(inputs, tuple) else (inputs, None)
        return truncation.texts_cut(self.preprocessor.tokenizer, texts_a, texts_b,
                                    self.preprocessor.sequence_length)

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
        if self.multi_label:
            probabilities = special.expit(logits)
            labels = label_sets(probabilities, self.threshold, self.label_names)
        else:
            probabilities = special.softmax(logits, axis=-1)
            labels = label_outputs(np.argmax(logits, axis=-1).tolist(), self.label_names)
        return (labels, probabilities) if return_scores else labels


class WordTaggerMixin(TextTaskMixin):
    """Raw text for the tagger: sentences as lists of words in, one tag per word out.

    A word's tag is read at its first sub-token, as the runners train and
    score it; the other positions carry no loss (sample weight 0). A sentence
    longer than one window is read through windows `window_stride` sub-tokens
    apart, each word scored in the one where it has the most context
    (`modeling.text_windows`), so every word is trained on and tagged.
    """

    num_labels: int
    label_names: list[str] | None

    def _text_columns(self, x, y, argument: str) -> tuple:
        words = ragged_words(x)
        if y is None:
            return words, None
        ids = tag_indices(y, self.num_labels, self.label_names, argument)
        check_aligned(x, y, "{first} sentences but {second} tag lists",
                      "sentence {index} has {first} words but {second} tags")
        return words, words.with_flat_values(tf.constant(ids, tf.int32))

    def _preprocess_batch(self, words, tags=None, sample_weight=None):
        """Windows; without tags the model reads each word's logits (`word_positions`)."""
        length = self.preprocessor.sequence_length
        tokenizer = self.preprocessor.tokenizer
        with tf.device("cpu"):
            pieces = self.preprocessor.word_pieces(words)
        packed, labels = word_windows(pieces, length, stride_for(self.window_stride, length),
                                      tokenizer.cls_id, tokenizer.sep_id, tags)
        counts = packed.pop(EXAMPLE_WINDOWS)
        if tags is None:
            return packed
        packed.pop(WORD_POSITIONS)
        weights = tf.cast(labels >= 0, tf.float32)
        if sample_weight is not None:
            weights *= tf.repeat(tf.cast(sample_weight, tf.float32), counts)[:, None]
        return packed, tf.maximum(labels, 0), weights

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
        probabilities = special.softmax(logits, axis=-1)
        return tags, [list(probabilities[row, :length]) for row, length in enumerate(lengths)]


def ragged_words(sentences) -> tf.RaggedTensor:
    """Sentences as lists of words -> [N, (words)] strings (empty sentences allowed)."""
    if isinstance(sentences, tf.RaggedTensor):
        return sentences
    for index, sentence in enumerate(sentences):
        if not isinstance(sentence, (list, tuple, np.ndarray)):
            raise TypeError(f"sentence {index} is a {type(sentence).__name__}: a tagger takes "
                            "each sentence as a list of words (str)")
        for position, word in enumerate(sentence):
            if not isinstance(word, (str, bytes)):
                raise TypeError(f"sentence {index}, word {position} is {word!r}: words must "
                                "be strings")
    return tf.RaggedTensor.from_row_lengths(
        tf.constant([word for sentence in sentences for word in sentence], tf.string),
        [len(sentence) for sentence in sentences])


def sentence_lengths(sentences) -> list[int]:
    """The words of each sentence, given as Python lists or as a dataset of batches."""
    if isinstance(sentences, tf.data.Dataset):
        return [int(length) for batch in sentences
                for length in (batch[0] if isinstance(batch, tuple) else batch).row_lengths()]
    return [len(sentence) for sentence in sentences]


def _with_targets(features, y, sample_weight):
    if y is None:
        return features
    return (features, y) if sample_weight is None else (features, y, sample_weight)
