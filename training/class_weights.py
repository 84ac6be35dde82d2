"""Class weights for imbalanced labels: read from a spec, balanced from counts (the loss that
applies them: `modeling.losses.weighted_classification_loss`).

A classifier trained on 90% of one label learns to answer that label. The
usual remedy weighs each example's loss by its class's weight, as Keras'
`fit(class_weight=...)` does: the batch's loss is the mean over its
examples of weight x cross-entropy (Keras' default `sum_over_batch_size`
reduction; a class without a weight counts 1). "Balanced" weights are
scikit-learn's: N / (K x count of the class), so every class carries the
same total weight; a class absent from the training data gets 1, since no
example of it is ever weighed.

The spec is one string, so a command line and a settings file carry it
alike: `balanced`, or `label:weight` pairs separated by commas
(`neg:1,pos:4`), labels named as the task names them. From Python, the
task models' `fit(class_weight={...})` is checked by the same rule
(`check_class_weight`): Keras itself takes a negative weight (which
maximises that class's loss), a NaN one (which stops training at its first
step) and a class the model does not have (which it drops) without a word.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.arguments import FieldError, is_integer, is_number

BALANCED = "balanced"


def parse_class_weights(spec: str, field: str = "class_weights") -> dict[str, float] | str:
    """`BALANCED`, or {label: weight} from `label:weight,...`; refuses what is not a weight.

    Args:
      spec: "balanced", or comma-separated `label:weight` pairs.
      field: the settings field the spec came from, named in messages.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise FieldError(f"{{{field}}} must be {BALANCED!r} or label:weight pairs separated "
                         "by commas (e.g. neg:1,pos:4), got {0!r}", spec)
    if spec.strip() == BALANCED:
        return BALANCED
    weights: dict[str, float] = {}
    for pair in spec.split(","):
        label, colon, number = pair.strip().rpartition(":")
        if not colon or not label:
            raise FieldError(f"{{{field}}}: {{0!r}} is not label:weight; give {BALANCED!r} "
                             "or label:weight pairs separated by commas (e.g. neg:1,pos:4)",
                             pair.strip())
        try:
            weight = float(number)
        except ValueError:
            weight = math.nan
        if not math.isfinite(weight) or weight < 0:
            raise FieldError(f"{{{field}}}: the weight of {{0!r}} is {{1!r}}; a weight is a "
                             "finite number >= 0", label, number)
        if label in weights:
            raise FieldError(f"{{{field}}} gives label {{0!r}} twice", label)
        weights[label] = weight
    if not any(weights.values()):
        raise FieldError(f"{{{field}}}={{0}} weighs every label 0: nothing would be learned",
                         spec)
    return weights


def check_class_weight(class_weight: Any, num_labels: int,
                       label_names: Sequence[str] | None = None) -> dict[int, float]:
    """Keras' `class_weight` as {class index: weight} over every class, if it weighs classes
    the model has.

    Each key is a class index in [0, num_labels) or one of `label_names`
    (a class given both ways is refused); each weight a finite number >= 0,
    and some class weighs more than 0. A class left out weighs 1, as in Keras.

    Args:
      class_weight: what the caller gave `fit`.
      num_labels: the classifier's number of classes.
      label_names: the classifier's names for them, or None.
    """
    if not isinstance(class_weight, Mapping) or not class_weight:
        raise FieldError("{class_weight} must be a dict {{class: weight}} naming at least one "
                         "class, got {0!r}", class_weight)
    classes = (f"class indices 0 to {num_labels - 1}"
               + (f" or the names {', '.join(map(repr, label_names))}" if label_names else ""))
    lookup = {name: index for index, name in enumerate(label_names or ())}
    weights: dict[int, float] = {}
    for key, weight in class_weight.items():
        if is_integer(key) and 0 <= key < num_labels:
            index = int(key)
        elif isinstance(key, str) and key in lookup:
            index = lookup[key]
        else:
            raise FieldError(f"{{class_weight}} names class {{0!r}}, which the model does not "
                             f"have: it takes {classes}", key)
        if not is_number(weight) or weight < 0:
            raise FieldError("{class_weight}: the weight of class {0!r} is {1!r}; a weight is "
                             "a finite number >= 0", key, weight)
        if index in weights:
            raise FieldError("{class_weight} weighs class {0} twice (by index and by name)",
                             index)
        weights[index] = float(weight)
    if not any(weights.values()) and len(weights) == num_labels:
        raise FieldError("{class_weight}={0!r} weighs every class it names 0 and leaves none "
                         "out: nothing would be learned", class_weight)
    # Every class, since Keras' dataset path looks a label up in a table as long as the
    # largest key given, and fails on a label past it.
    return {index: weights.get(index, 1.0) for index in range(num_labels)}


def balanced_class_weights(label_ids: Sequence[int], num_labels: int) -> list[float]:
    """scikit-learn's balanced weights, N / (K x count), in label order (1 for absent labels).

    Args:
      label_ids: each training example's class index.
      num_labels: K, the classifier's number of outputs.
    """
    counts = np.bincount(np.asarray(label_ids, dtype=np.int64), minlength=num_labels)
    total = int(counts.sum())
    return [total / (num_labels * int(count)) if count else 1.0 for count in counts]


def resolve_class_weights(spec: str, labels: Sequence[str], label_ids: Sequence[int],
                          field: str = "class_weights") -> list[float]:
    """The spec's weights in label order; an explicit spec's unlisted labels weigh 1.

    Args:
      spec: as `parse_class_weights` reads it.
      labels: the classifier's label names, in the order of its outputs.
      label_ids: the training examples' class indices (for "balanced").
      field: the settings field the spec came from, named in messages.
    """
    parsed = parse_class_weights(spec, field)
    if parsed == BALANCED:
        return balanced_class_weights(label_ids, len(labels))
    unknown = [label for label in parsed if label not in labels]
    if unknown:
        raise FieldError(f"{{{field}}} names {{0}}, not among the task's labels {{1}}",
                         ", ".join(map(repr, unknown)), ", ".join(labels))
    return [parsed.get(label, 1.0) for label in labels]
