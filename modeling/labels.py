"""Labels as the task models take them: names or indices in, checked against the head; names out.

A model given `label_names` (the order of its output units) reads labels
given as names and answers with names, so a fine-tuned model reloaded from
its folder speaks the task's own labels rather than bare indices.

Every label is checked here, in Python, before any tensor is built from
it. Past this point an index outside the head reaches the loss, where
TensorFlow fails with a graph error naming no example; a tag of -1 (the
runners' "no label") silently carries no loss; a NaN regression target
turns every weight into NaN. So each error names the example (and word),
the value and what the model takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from core.arguments import is_integer, is_number


def class_indices(labels: Any, num_labels: int, label_names: list[str] | None,
                  argument: str = "y") -> list[int]:
    """Each example's label as its class index.

    Args:
      labels: one label per example: an index in [0, num_labels), or a name
        from `label_names`.
      num_labels: the size of the model's head.
      label_names: the model's names for its labels, or None.
      argument: the argument the labels came in, for messages.
    """
    labels = as_list(labels, argument)
    lookup = {name: index for index, name in enumerate(label_names or ())}
    return [_class_index(label, num_labels, label_names, lookup, f"{argument}: example {index}")
            for index, label in enumerate(labels)]


def tag_indices(tags: Sequence[Sequence], num_labels: int, label_names: list[str] | None,
                argument: str = "y") -> list[int]:
    """Every word's tag, sentence after sentence, as class indices (one flat list).

    Args:
      tags: one list of tags per sentence, one tag per word (index or name).
      num_labels: the size of the model's head.
      label_names: the model's names for its tags, or None.
      argument: the argument the tags came in, for messages.
    """
    lookup = {name: index for index, name in enumerate(label_names or ())}
    indices = []
    for row, sentence_tags in enumerate(as_list(tags, argument)):
        if isinstance(sentence_tags, (str, bytes)):
            raise TypeError(f"{argument}: sentence {row}'s tags must be a list (one tag per "
                            f"word), got {sentence_tags!r}")
        indices.extend(_class_index(tag, num_labels, label_names, lookup,
                                    f"{argument}: sentence {row}, word {word}")
                       for word, tag in enumerate(as_list(sentence_tags, argument)))
    return indices


def multi_hot(labels: Any, num_labels: int, label_names: list[str] | None,
              argument: str = "y") -> np.ndarray:
    """Each example's label set as a row of 0s and 1s, float32 [N, num_labels].

    A 2-D NumPy array is taken as multi-hot rows already; anything else as
    one label set per example (a list of names or indices, possibly empty).
    A label named twice in one set is refused: a multi-hot row given as a
    Python list ([0, 1, 1]) would otherwise read as the indices {0, 1}.

    Args:
      labels: one label set per example, or a multi-hot array [N, num_labels].
      num_labels: the size of the model's head.
      label_names: the model's names for its labels, or None.
      argument: the argument the labels came in, for messages.
    """
    if isinstance(labels, np.ndarray) and labels.ndim == 2:
        return _multi_hot_rows(labels, num_labels, argument)
    rows = as_list(labels, argument)
    lookup = {name: index for index, name in enumerate(label_names or ())}
    targets = np.zeros((len(rows), num_labels), np.float32)
    for row, label_set in enumerate(rows):
        where = f"{argument}: example {row}"
        if not isinstance(label_set, (list, tuple, set, frozenset, np.ndarray)):
            raise TypeError(f"{where} has labels {label_set!r}; a multi-label model takes a "
                            "label set per example (a list of names or indices, [] for none) "
                            "or a multi-hot array [N, num_labels]")
        for label in (label_set.tolist() if isinstance(label_set, np.ndarray) else label_set):
            index = _class_index(label, num_labels, label_names, lookup, where)
            if targets[row, index]:
                raise ValueError(f"{where} names label {label!r} twice; give each label once "
                                 "(multi-hot rows go in as a 2-D NumPy array)")
            targets[row, index] = 1.0
    return targets


def _multi_hot_rows(rows: np.ndarray, num_labels: int, argument: str) -> np.ndarray:
    if rows.shape[1] != num_labels:
        raise ValueError(f"{argument} is a multi-hot array of {rows.shape[1]} columns, but the "
                         f"model has {num_labels} labels")
    if rows.dtype.kind not in "biuf":
        raise TypeError(f"{argument} is a 2-D array of {rows.dtype}; multi-hot rows hold 0 or 1")
    bad = np.argwhere((rows != 0) & (rows != 1))
    if len(bad):
        row, column = bad[0]
        raise ValueError(f"{argument}: example {row}, label {column} is {rows[row, column].item()!r}; "
                         "multi-hot rows hold 0 or 1")
    return rows.astype(np.float32)


def regression_targets(labels: Any, argument: str = "y") -> list[float]:
    """Each example's target as a float; NaN and infinity are refused (they train NaN weights)."""
    labels = as_list(labels, argument)
    for index, label in enumerate(labels):
        if not is_number(label):
            raise ValueError(f"{argument}: example {index} has label {label!r}; a regression "
                             "model (num_labels=1) takes finite numbers")
    return [float(label) for label in labels]


def label_outputs(indices: list[int], label_names: list[str] | None) -> list:
    return indices if label_names is None else [label_names[i] for i in indices]


def check_label_names(label_names, num_labels: int | None) -> list[str] | None:
    """`label_names` as a list, checked against the head's size (None: any size).

    A bare string is refused rather than read as one name per character.
    """
    if label_names is None:
        return None
    if not isinstance(label_names, (list, tuple, np.ndarray)):
        raise TypeError(f"label_names must be a list of distinct strings, one per label, got "
                        f"{label_names!r}")
    names = label_names.tolist() if isinstance(label_names, np.ndarray) else list(label_names)
    if not names:
        raise ValueError("label_names is empty: give one name per label, or None")
    if not all(isinstance(name, str) for name in names) or len(set(names)) != len(names):
        raise ValueError(f"label_names must be distinct strings, got {names}")
    if num_labels is not None and len(names) != num_labels:
        raise ValueError(f"{len(names)} label_names for {num_labels} labels: {names}")
    return names


def as_list(values: Any, argument: str) -> list:
    """A list, tuple or NumPy array as a list of Python values; anything else is refused."""
    if isinstance(values, np.ndarray):
        return values.tolist()
    if isinstance(values, (list, tuple)):
        return list(values)
    raise TypeError(f"{argument} must be a list (or array) with one entry per example, "
                    f"got {type(values).__name__}")


def _class_index(label: Any, num_labels: int, label_names: list[str] | None,
                 lookup: dict[str, int], where: str) -> int:
    allowed = f"class indices in [0, {num_labels})" + (
        " or names from label_names" if label_names else "")
    if isinstance(label, str):
        if label_names is None:
            raise ValueError(f"{where} has label {label!r}, a name, but the model has no "
                             f"label_names: give {allowed}, or build the model with "
                             "label_names=[...]")
        if label not in lookup:
            raise ValueError(f"{where} has label {label!r}, which is not among the model's "
                             f"label_names {label_names}")
        return lookup[label]
    if not is_integer(label):
        raise ValueError(f"{where} has label {label!r}; the model takes {allowed}")
    if not 0 <= label < num_labels:
        raise ValueError(f"{where} has label {label}, outside [0, {num_labels}): the model has "
                         f"{num_labels} labels")
    return int(label)


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
