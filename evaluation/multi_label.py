"""A multi-label classifier's dev scores: F1 per label, micro and macro, as `evaluate` gives them.

The runner scores predictions it has already made (logits over a dev set)
with the same metric the Python model's `evaluate` reports
(`modeling.multi_label.MultiLabelF1`), so the two never disagree on what a
predicted label is. Micro F1 (every yes/no decision pooled) is the one
number a sweep compares.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from modeling.multi_label import MultiLabelF1


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
