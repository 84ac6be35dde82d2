"""Multi-label classification's score: F1 per label, micro and macro, one metric for all.

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

The runner scores predictions it has already made (logits over a dev set)
with the same metric the Python model's `evaluate` reports (`MultiLabelF1`),
so the two never disagree on what a predicted label is. Micro F1 (every
yes/no decision pooled) is the one number a sweep compares.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
from keras import ops

from core.arguments import check_threshold

AVERAGES = ("micro", "macro")


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


def multi_label_scores(logits: np.ndarray, targets: np.ndarray, labels: Sequence[str],
                       threshold: float) -> dict[str, float]:
    """`f1_micro`, `f1_macro`, `f1/<label>` for each label, and `score` (the micro F1).

    Args:
      logits: [N, K] the classifier's outputs.
      targets: [N, K] multi-hot label sets.
      labels: the K label names, in order.
      threshold: a label is predicted where its sigmoid exceeds this.
    """
    metric = MultiLabelF1(list(labels), threshold)
    metric.update_state(np.asarray(targets, np.float32), np.asarray(logits, np.float32))
    scores = {key: float(value) for key, value in metric.result().items()}
    scores["score"] = scores["f1_micro"]
    return scores
