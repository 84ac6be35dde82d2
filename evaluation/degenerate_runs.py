"""Whether a finished fine-tuning run looks degenerate, from its dev scores alone.

Few-sample fine-tuning sometimes ends far below what the same recipe reaches
with another seed, with a finite loss and exit 0 (Dodge et al., 2020;
Mosbach et al., 2021; Zhang et al., 2021). Nothing in the run itself says
so; two signs from the dev scores do:

- its accuracy is within `NEAR_MAJORITY` of always predicting the dev set's
  most frequent label (the model learnt the prior, not the task);
- its score is more than `BELOW_BEST` under the best finished run of the
  same sweep (a restart or a neighbouring rate found much better weights).

Scores are fractions, as the metrics give them; messages speak in points.
A run judged degenerate is kept and may still be the sweep's best (for
instance every run near the majority class): the warning is for the user.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

NEAR_MAJORITY = 0.01  # accuracy at most this far above the majority class
BELOW_BEST = 0.03  # score more than this far below the sweep's best finished run


def majority_accuracy(label_ids: Sequence[int] | np.ndarray) -> float:
    """The accuracy of always predicting the most frequent label of `label_ids`."""
    labels = np.asarray(label_ids).reshape(-1)
    if labels.size == 0:
        raise ValueError("no labels to find a majority class in")
    return float(np.unique(labels, return_counts=True)[1].max() / labels.size)


def run_warning(results: Mapping[str, float], majorities: Mapping[str, float],
                score: float, sibling_scores: Sequence[float]) -> str:
    """'' for a sane run, else `degenerate: <why>` (several reasons joined by '; ').

    `majorities` maps the name of each dev set's accuracy in the run's
    `results` (`eval_accuracy`) to that set's majority-class accuracy;
    `sibling_scores` are the scores of every run of the sweep, this one
    included; runs that did not finish (NaN) are ignored.
    """
    reasons = []
    for name, majority in sorted(majorities.items()):
        accuracy = results.get(name)
        if accuracy is not None and near_majority(accuracy, majority):
            reasons.append(f"near majority class ({name} {100 * accuracy:.1f}%, majority class "
                           f"{100 * majority:.1f}%)")
    finished = [value for value in sibling_scores if not math.isnan(value)]
    if len(finished) > 1 and not math.isnan(score) and _gap(max(finished), score) > BELOW_BEST:
        reasons.append(f"{100 * (max(finished) - score):.1f} points below the sweep's best run "
                       f"(dev score {100 * score:.1f} vs {100 * max(finished):.1f})")
    return "degenerate: " + "; ".join(reasons) if reasons else ""


def near_majority(accuracy: float, majority: float) -> bool:
    """Whether `accuracy` is at most `NEAR_MAJORITY` above the majority class's `majority`."""
    return _gap(majority, accuracy) >= -NEAR_MAJORITY


def majority_fields(results: Mapping[str, float], majorities: Mapping[str, float]
                    ) -> dict[str, float]:
    """What eval_results.txt says of the majority class, for each dev set of `majorities`.

    For a dev accuracy `<set>_accuracy`: `<set>_majority_class_accuracy`, the
    baseline, and `<set>_near_majority_class`, 1.0 when the run is within
    `NEAR_MAJORITY` of it (0.0 otherwise), so that a script reading the
    results sees a degenerate run without parsing the log.

    Examples:
      >>> majority_fields({"eval_accuracy": 0.69}, {"eval_accuracy": 0.684})
      {'eval_majority_class_accuracy': 0.684, 'eval_near_majority_class': 1.0}
    """
    fields = {}
    for name, majority in sorted(majorities.items()):
        prefix = name.removesuffix("_accuracy")
        fields[f"{prefix}_majority_class_accuracy"] = majority
        if name in results:
            fields[f"{prefix}_near_majority_class"] = float(near_majority(results[name],
                                                                          majority))
    return fields


def _gap(reference: float, value: float) -> float:
    """`reference - value`, rounded so that a gap of exactly a threshold compares as equal.

    (0.81 - 0.78 is 0.030000000000000027 in binary floating point.)
    """
    return round(reference - value, 9)
