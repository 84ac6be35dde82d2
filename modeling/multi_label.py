"""Multi-label classification: a label set per text, one sigmoid per label, F1 to score it.

A multi-label classifier (`BertClassifier(..., multi_label=True)`) keeps its
K logits, but reads each as an independent yes/no through a sigmoid rather
than all K through one softmax: a text may carry any number of labels,
none included. A label is predicted when its probability exceeds the
model's `threshold`, the same comparison Keras' `F1Score` makes, so the
labels `predict_labels` gives are the ones `evaluate`'s F1 counts.

Accuracy over label sets says little when most labels are absent from most
texts, so `evaluate` reports F1: per label, micro-averaged (every decision
pooled: dominated by the frequent labels) and macro-averaged (the labels'
mean: each label counts once), as scikit-learn's `f1_score` defines them
(0 where a label is neither predicted nor present).
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
from keras import ops

from core.arguments import check_number
from modeling.labels import label_outputs

AVERAGES = ("micro", "macro")


def check_threshold(threshold: Any) -> float:
    """`threshold` as a float, if it lies strictly between 0 and 1 (a probability cut)."""
    return check_number("threshold", threshold, 0.0, 1.0, above=True, below=True)


def label_sets(probabilities: np.ndarray, threshold: float,
               label_names: list[str] | None) -> list[list]:
    """Each row's labels whose probability exceeds `threshold`, in label order.

    Args:
      probabilities: [N, num_labels] per-label probabilities.
      threshold: the cut, in (0, 1).
      label_names: the model's names for its labels; None gives indices.
    """
    return [label_outputs(np.flatnonzero(row > threshold).tolist(), label_names)
            for row in probabilities]


@keras.saving.register_keras_serializable(package="bert")
class MultiLabelF1(keras.metrics.Metric):
    """F1 of thresholded sigmoid(logits) against multi-hot targets.

    Its result is a dict: `f1_micro`, `f1_macro` and `f1/<label>` for each
    label (its name, or its index), which Keras' `evaluate` and `fit` logs
    list side by side.

    Args:
      label_names: a name for each output unit, in order (the logs' keys).
      threshold: a label counts as predicted above this probability.
      name: the metric's name.

    Examples:

    >>> metric = MultiLabelF1(["sports", "politics"], threshold=0.5)
    >>> metric.update_state([[1.0, 0.0]], [[2.0, -2.0]])
    >>> float(metric.result()["f1_micro"])
    1.0
    """

    def __init__(self, label_names: list[str], threshold: float = 0.5, name: str = "f1",
                 **kwargs: Any):
        super().__init__(name=name, **kwargs)
        self.label_names = [str(label) for label in label_names]
        self.threshold = check_threshold(threshold)
        self.per_label, self.micro, self.macro = (
            keras.metrics.F1Score(average=average, threshold=self.threshold,
                                  name=f"f1_{average or 'labels'}")
            for average in (None, *AVERAGES))

    def update_state(self, y_true, y_pred, sample_weight=None):
        probabilities = ops.sigmoid(ops.cast(y_pred, "float32"))
        targets = ops.cast(y_true, "float32")
        for score in (self.per_label, self.micro, self.macro):
            score.update_state(targets, probabilities, sample_weight)

    def result(self) -> dict:
        per_label = self.per_label.result()
        results = {"f1_micro": self.micro.result(), "f1_macro": self.macro.result()}
        results.update({f"f1/{label}": per_label[index]
                        for index, label in enumerate(self.label_names)})
        return results

    def reset_state(self):
        for score in (self.per_label, self.micro, self.macro):
            score.reset_state()

    def get_config(self) -> dict:
        return {**super().get_config(), "label_names": self.label_names,
                "threshold": self.threshold}
