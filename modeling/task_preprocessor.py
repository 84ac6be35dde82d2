"""What a task's preprocessor owes its model: raw inputs checked in Python, batches mapped in tf.data.

Each task model holds one preprocessor, a Keras layer like keras-hub's
`TextClassifierPreprocessor`: the classifier's (`modeling.classifier_preprocessor`),
the tagger's (`modeling.tagger_preprocessor`) and the span model's
(`modeling.span_preprocessor`). The model's raw-text `fit`, `evaluate` and
`predict` (`modeling.text_tasks`) use it in two steps:

1. `text_columns(x, y, sample_weight)` runs once per call, in Python: it
   checks what the user gave (texts, labels by name or index, weights) and
   turns it into columns of tensors, one row per example, so every mistake
   is a Python error naming the argument before TensorFlow sees it.
2. The layer itself, `preprocessor(x, y, sample_weight, training=...)`, is
   mapped over the batches of those columns in the input pipeline: tokenize,
   pack (or slide windows), and hand Keras `(features, labels, weights)`.

Each preprocessor keeps the settings that decide how labels and long texts
are read (`SETTINGS`); a model builds its preprocessor with its own values
(`for_task`), so the two cannot disagree.
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

import keras
import tensorflow as tf

from modeling.preprocessor import BertPreprocessor
from modeling.text_arguments import check_rows, rows, sample_weights


class TaskPreprocessor(BertPreprocessor):
    """A `BertPreprocessor` that also reads a task's labels; subclasses give the task.

    Subclasses list their settings in `SETTINGS` (constructor arguments kept
    as attributes of the same name) and give `example_columns` and `call`.
    """

    SETTINGS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def for_task(cls, preprocessor: BertPreprocessor | dict | None,
                 **settings: Any) -> "TaskPreprocessor | None":
        """This task's preprocessor for a model given `preprocessor`, with the model's settings.

        A plain `BertPreprocessor` (or its config) lends its vocabulary,
        casing and length. One of this class is kept when it holds `settings`;
        where it holds a setting's default instead (another model's
        preprocessor, built without labels), a copy takes the model's value;
        a value of its own that the model contradicts is refused, naming both.
        None stays None (a model of packed inputs).
        """
        if isinstance(preprocessor, dict):
            preprocessor = keras.saving.deserialize_keras_object(preprocessor)
        if preprocessor is None:
            return None
        if isinstance(preprocessor, cls):
            defaults = inspect.signature(cls.__init__).parameters
            differ = {name: value for name, value in settings.items()
                      if getattr(preprocessor, name) != value}
            contradicted = [f"{name}: the model's {value!r}, the preprocessor's "
                            f"{getattr(preprocessor, name)!r}" for name, value in differ.items()
                            if getattr(preprocessor, name) != defaults[name].default]
            if contradicted:
                raise ValueError(f"preprocessor {preprocessor.name!r} reads the task otherwise "
                                 f"than the model ({'; '.join(contradicted)}): build the "
                                 "model with the preprocessor's settings, or pass a "
                                 "BertPreprocessor")
            if not differ:
                return preprocessor
        elif type(preprocessor) is not BertPreprocessor:
            raise TypeError(f"preprocessor must be a BertPreprocessor or a {cls.__name__}, got "
                            f"{type(preprocessor).__name__}")
        return cls(preprocessor.vocabulary, do_lower_case=preprocessor.tokenizer.do_lower_case,
                   sequence_length=preprocessor.sequence_length, **settings)

    def text_columns(self, x, y=None, sample_weight=None, argument: str = "x") -> tuple:
        """(inputs, labels, weights), without those not given: one row per example, as tensors.

        Raises TypeError or ValueError, in Python, for inputs, labels or
        weights the task cannot read; labels are checked against the
        settings (`num_labels`, `label_names`).
        """
        inputs, labels = self.example_columns(x, y, "y" if argument == "x" else argument)
        weights = sample_weights(sample_weight, argument)
        check_rows(rows(inputs), None if labels is None else rows(labels), weights)
        return tuple(column for column in (inputs, labels, weights) if column is not None)

    def example_columns(self, x, y, argument: str) -> tuple:
        """(inputs, labels or None) as tensors, or tuples of them, of one row per example."""
        raise NotImplementedError

    def truncation(self, inputs) -> str | None:
        """What the window of `sequence_length` tokens cuts from `inputs`; None for nothing."""
        return None

    def get_config(self) -> dict:
        return {**super().get_config(),
                **{name: getattr(self, name) for name in self.SETTINGS}}


def with_targets(features, y=None, sample_weight=None):
    """What Keras takes from a dataset: features, (features, y) or (features, y, weights)."""
    if y is None:
        return features
    return (features, y) if sample_weight is None else (features, y, sample_weight)


def repeated(column: tf.Tensor | None, counts: tf.Tensor) -> tf.Tensor | None:
    """Each example's row repeated once per window of it (`counts` [N])."""
    return None if column is None else tf.repeat(column, counts, axis=0)
