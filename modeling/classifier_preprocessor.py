"""The classifier's preprocessor: texts or pairs in, packed rows (or windows) and labels out.

Labels are read as the classifier's head needs them (`modeling.labels`):
class indices or names for a single-label model, label sets for a
`multi_label` one (`evaluation.multi_label`), numbers for regression
(`num_labels=1`). Texts longer than `sequence_length` are cut, counted and
logged once per call (`text.truncation`), or with `long_texts="windows"`
read whole through windows (`text.text_windows`): each window trains as
an example carrying its text's label and weight, and a text is evaluated
and predicted by the mean of its windows' logits, which the model takes
from the `example_windows` the batch carries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from core.arguments import check_flag, check_integer
from modeling.labels import check_label_names, class_indices, multi_hot, regression_targets
from modeling.preprocessor import DEFAULT_SEQUENCE_LENGTH, split_segments
from modeling.task_preprocessor import TaskPreprocessor, repeated, with_targets
from network.model_folder import check_window_settings
from text import truncation
from text.text_windows import EXAMPLE_WINDOWS, TRUNCATE, WINDOWS, stride_for, text_windows


@keras.saving.register_keras_serializable(package="bert")
class BertClassifierPreprocessor(TaskPreprocessor):
    """Texts, or pairs `(texts_a, texts_b)`, and their labels -> a classifier's batches.

    Called on a batch, `preprocessor(x)` gives the packed features and
    `preprocessor(x, y, sample_weight)` the tuple Keras trains on; with
    `long_texts="windows"` and `training=True` each window is a row carrying
    its text's label. `text_columns` checks Python inputs and labels first.

    Args:
      vocabulary: the WordPiece tokens, in id order.
      do_lower_case: lowercase and strip accents first (an uncased model).
      sequence_length: tokens per packed row, [CLS] and [SEP] included.
      num_labels: classes; 1 for regression. None: as many as `label_names`,
        or none, so labels are refused (a model sets it).
      label_names: a name per class, in order, so labels may be given by name.
      multi_label: labels are label sets (a multi-hot row each).
      long_texts: "truncate" (cut to `sequence_length`) or "windows" (read
        single texts whole).
      window_stride: with "windows", sub-tokens between window starts
        (default: half a window).
      **kwargs: Keras layer arguments (`name`).

    Examples:

    >>> preprocessor = BertClassifierPreprocessor.from_pretrained(
    ...     "uncased_L-12_H-768_A-12", 16, num_labels=2, label_names=["neg", "pos"])
    >>> columns = preprocessor.text_columns(["a fine film"], ["pos"])
    >>> features, labels = preprocessor(*columns)
    >>> features["input_ids"].shape, labels.numpy().tolist()
    (TensorShape([1, 16]), [1])
    """

    SETTINGS = ("num_labels", "label_names", "multi_label", "long_texts", "window_stride")

    def __init__(self, vocabulary: Sequence[str], do_lower_case: bool = True,
                 sequence_length: int = DEFAULT_SEQUENCE_LENGTH, num_labels: int | None = None,
                 label_names: Sequence[str] | None = None, multi_label: bool = False,
                 long_texts: str = TRUNCATE, window_stride: int | None = None, **kwargs: Any):
        kwargs.setdefault("name", "bert_classifier_preprocessor")
        super().__init__(vocabulary, do_lower_case, sequence_length, **kwargs)
        if num_labels is None and label_names is not None:  # the names say how many there are
            num_labels = len(check_label_names(label_names, None))
        self.num_labels = None if num_labels is None else check_integer("num_labels",
                                                                        num_labels)
        self.label_names = check_label_names(label_names, self.num_labels)
        self.multi_label = check_flag("multi_label", multi_label)
        self.window_stride = check_window_settings(long_texts, window_stride)
        self.long_texts = long_texts
        stride_for(self.window_stride, self.sequence_length)  # a stride wider than a window

    @property
    def windowed(self) -> bool:
        return self.long_texts == WINDOWS

    def call(self, x, y=None, sample_weight=None, training: bool = False):
        if not self.windowed:
            return with_targets(super().call(x), y, sample_weight)
        with tf.device("cpu"):  # string ops have no accelerator kernels
            tokens, _ = self.tokenizer.tokenize_batch(x)
        features = text_windows(tokens, self.sequence_length,
                                stride_for(self.window_stride, self.sequence_length),
                                self.tokenizer.cls_id, self.tokenizer.sep_id)
        if not training:  # the model averages each text's windows
            return with_targets(features, y, sample_weight)
        counts = features.pop(EXAMPLE_WINDOWS)
        return with_targets(features, repeated(y, counts), repeated(sample_weight, counts))

    def example_columns(self, x, y, argument: str) -> tuple:
        if isinstance(x, tuple) and len(x) == 2 and all(
                isinstance(column, (list, tuple, np.ndarray)) for column in x) and \
                len(x[0]) != len(x[1]):
            raise ValueError(f"the pair's columns differ in length: {len(x[0])} texts_a but "
                             f"{len(x[1])} texts_b; give one of each per example")
        texts_a, texts_b = split_segments(x)
        if texts_a.shape.rank == 0:
            raise ValueError("give a list of texts (or of pairs), not a single one")
        if texts_b is not None and self.windowed:
            raise ValueError(f"long_texts={WINDOWS!r} reads single texts through windows, "
                             "not pairs: give a list of texts, or build the model with "
                             "long_texts='truncate' for pairs")
        inputs = texts_a if texts_b is None else (texts_a, texts_b)
        if y is None:
            return inputs, None
        if self.num_labels is None:
            raise ValueError(f"{argument}: {self.name} has no num_labels, so it cannot read "
                             "labels: build it with num_labels=..., as a BertClassifier does")
        if self.num_labels == 1:
            return inputs, tf.constant(regression_targets(y, argument), tf.float32)
        if self.multi_label:
            return inputs, tf.constant(multi_hot(y, self.num_labels, self.label_names, argument))
        return inputs, tf.constant(class_indices(y, self.num_labels, self.label_names,
                                                 argument), tf.int32)

    def truncation(self, inputs) -> str | None:
        if self.windowed:
            return None
        texts_a, texts_b = inputs if isinstance(inputs, tuple) else (inputs, None)
        return truncation.texts_cut(self.tokenizer, texts_a, texts_b, self.sequence_length)
