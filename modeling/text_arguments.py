"""What the raw-text methods' arguments hold: text or packed ids, how many examples, steps.

Judged in Python, before Keras or TensorFlow meets them, so that a wrong
argument is refused naming it rather than failing inside a dataset.
"""

from __future__ import annotations

import math
import numbers
import os

import numpy as np
import tensorflow as tf

from core.arguments import INT32_MAX, FieldError, check_integer, check_number, is_number
from core.record_schema import ENCODER_INPUTS
from modeling.labels import as_list

DEFAULT_BATCH_SIZE = 32  # Keras' own default for arrays


def is_raw_text(x) -> bool:
    """Whether `x` holds strings (or a dataset whose inputs are strings), not packed ids.

    Lists are judged by their first string or number, however deeply nested,
    so a batch of sentences may start with an empty one.
    """
    if isinstance(x, tf.data.Dataset):
        spec = x.element_spec
        spec = spec[0] if isinstance(spec, tuple) and len(spec) in (2, 3) and not all(
            getattr(part, "dtype", None) == tf.string for part in spec) else spec
        return all(getattr(part, "dtype", None) == tf.string for part in tf.nest.flatten(spec))
    if isinstance(x, (dict, type(None))):
        return False
    if isinstance(x, (str, bytes)):
        return True
    if isinstance(x, (tf.Tensor, tf.RaggedTensor)):
        return x.dtype == tf.string
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "USO"
    if isinstance(x, (list, tuple)):
        leaf = _first_leaf(x)
        return isinstance(leaf, (str, bytes)) or (leaf is None and _nested(x))
    return False


def example_count(x) -> int | None:
    """How many examples `x` holds, where Python can tell without reading a dataset.

    A tuple of sequences is a pair of text columns; a dict holds packed arrays.
    """
    if isinstance(x, dict):
        return len(next(iter(x.values()))) if x else 0
    if isinstance(x, tuple) and x and all(_is_sequence(column) for column in x):
        return len(x[0])
    if isinstance(x, (list, tuple, np.ndarray)) or (
            isinstance(x, (tf.Tensor, tf.RaggedTensor)) and x.shape.rank):
        return len(x)
    return None


def _first_leaf(x):
    """The first item of nested lists and tuples that is neither, or None if all are empty."""
    for item in x:
        leaf = _first_leaf(item) if isinstance(item, (list, tuple)) else item
        if leaf is not None:
            return leaf
    return None


def _nested(x) -> bool:
    """A list of (empty) lists: sentences without words, still raw text for a tagger."""
    return bool(x) and all(isinstance(item, (list, tuple)) for item in x)


def _is_sequence(column) -> bool:
    return isinstance(column, (list, tuple, np.ndarray)) or (
        isinstance(column, (tf.Tensor, tf.RaggedTensor)) and bool(column.shape.rank))


def check_examples(x, argument: str, needed: str) -> None:
    """Refuses a missing or empty `x` before Keras meets it (its error: `pop from an empty set`).

    `needed` ends the message: why no examples will not do.
    """
    if x is None:
        raise ValueError(f"{argument} is None: {needed}")
    check_packed(x, argument)
    if example_count(x) == 0:
        raise ValueError(f"{argument} holds no examples: {needed}")


def check_packed(x, argument: str = "x") -> None:
    """Refuses a lone number (Keras meets it as an IndexError), a dict of packed inputs
    without `input_ids` (a KeyError, or for an empty one a StopIteration), and a list that
    is neither text nor ids (a dict, a float or an array of words among its items: a
    KeyError, IndexError or dtype error), far from the argument."""
    if isinstance(x, (numbers.Number, np.generic)) or (
            isinstance(x, (np.ndarray, tf.Tensor)) and len(x.shape) == 0):
        raise TypeError(f"{argument} must hold examples (texts, a dict of packed inputs or a "
                        f"dataset), got one {type(x).__name__}: {x!r}")
    if isinstance(x, dict) and "input_ids" not in x:
        held = ", ".join(sorted(map(str, x))) or "nothing"
        raise ValueError(f"{argument} is a dict of packed inputs without input_ids (it holds "
                         f"{held}): give {', '.join(ENCODER_INPUTS)}")
    if isinstance(x, list) and not is_raw_text(x):
        for index, item in enumerate(x):
            if not _packable(item):
                raise TypeError(
                    f"{argument}[{index}] is {_described(item)}: give texts as str, sentences as "
                    f"lists of words (str), or packed inputs as a dict of "
                    f"{', '.join(ENCODER_INPUTS)}")


def _packable(item) -> bool:
    """An item of a list that is not text: ids, or a row of them, as Keras packs them."""
    if isinstance(item, (list, tuple)):
        return all(map(_packable, item))
    if isinstance(item, np.ndarray):
        return item.dtype.kind in "iu"
    return isinstance(item, (numbers.Integral, np.integer)) and not isinstance(item, bool)


def _described(item) -> str:
    if isinstance(item, np.ndarray):
        return f"an array of {item.dtype}"
    return f"a {type(item).__name__} ({item!r:.40})"




def optional_count(name: str, value) -> int | None:
    """A batch size or step count, or None; one past int32 is refused here, naming `name`,
    rather than as a shape error inside TensorFlow."""
    if value is None:
        return None
    count = check_integer(name, value)
    if count > INT32_MAX:
        raise FieldError("{%s}={0} is more than a batch or step count can be (2**31 - 1)" % name,
                         count)
    return count


def rows(column) -> int:
    """The number of examples in a column (or a pair of columns) of tensors."""
    first = tf.nest.flatten(column, expand_composites=False)[0]
    return int(first.nrows()) if isinstance(first, tf.RaggedTensor) else int(first.shape[0])


def sample_weights(sample_weight, argument: str) -> tf.Tensor | None:
    """Finite weights >= 0 as a float32 column; None when none is given."""
    if sample_weight is None:
        return None
    name = "sample_weight" if argument == "x" else f"{argument}'s sample weights"
    weights = as_list(sample_weight, name)
    for index, weight in enumerate(weights):
        if not is_number(weight) or weight < 0:
            raise ValueError(f"{name}: example {index} has weight {weight!r}; weights must be "
                             "finite numbers >= 0")
    return tf.constant(weights, tf.float32)


def check_rows(examples: int, labels: int | None, weights: tf.Tensor | None) -> None:
    """Refuses labels (their count, or None) or weights not one per example."""
    if labels is not None and labels != examples:
        raise ValueError(f"x holds {examples} examples but y {labels} labels: give one label "
                         "per example")
    if weights is not None and rows(weights) != examples:
        raise ValueError(f"x holds {examples} examples but sample_weight {rows(weights)} "
                         "weights: give one weight per example")


def epoch_steps(x, batch_size: int | None, steps_per_epoch: int | None,
                     validation_split: float | None) -> int | None:
    """How many steps Keras runs per epoch of `x`; None for a dataset of unknown size."""
    if steps_per_epoch:
        return steps_per_epoch
    if isinstance(x, tf.data.Dataset):
        count = int(x.cardinality())
        if count == 0:
            raise ValueError("x is an empty dataset: fit needs at least one batch")
        return count if count > 0 else None
    first = next(iter(x.values())) if isinstance(x, dict) else x
    examples = len(first)
    if validation_split:
        examples = split_point(examples, validation_split)
    return math.ceil(examples / (batch_size or DEFAULT_BATCH_SIZE))


def split_point(count: int, validation_split: float) -> int:
    """How many of `count` examples train when `validation_split` holds out the last ones.

    Keras' rule: the first floor(N (1 - split)) examples train, the rest
    validate; a split that leaves either side empty is refused.

    Args:
      count: the examples given to `fit`.
      validation_split: the share held out, in (0, 1).
    """
    validation_split = check_number("validation_split", validation_split, 0.0, 1.0, above=True,
                                    below=True)
    at = int(math.floor(count * (1.0 - validation_split)))
    if at == 0 or at == count:
        raise FieldError("{validation_split}={0} of {1} examples leaves "
                         + ("none to train on" if at == 0 else "none to validate on")
                         + ": give more examples or another split", validation_split, count)
    return at


def folder_argument(name: str, value) -> str | None:
    """An optional folder argument as a str; None stays None.

    A path that is a file, or lies under one, is refused here: the folder is
    created only once training starts, and `os.makedirs`' "File exists"
    would name neither the argument nor the file.
    """
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise FieldError(f"{{{name}}} must be a folder path (a non-empty str or os.PathLike), "
                         "got {0!r}", value)
    path = os.fspath(value)
    blocking = next((place for place in (path, *_parents(path))
                     if os.path.exists(place) and not os.path.isdir(place)), None)
    if blocking is not None:
        where = "is a file" if blocking == path else "lies under {1!r}, which is a file"
        raise FieldError(f"{{{name}}}={{0!r}} {where}; pass a folder path (it is created if "
                         "missing)", path, blocking)
    return path


def _parents(path: str) -> list[str]:
    """The folders above `path`, nearest first."""
    parents, current = [], os.path.dirname(os.path.abspath(path))
    while current not in parents:
        parents.append(current)
        current = os.path.dirname(current)
    return parents


def kind(x) -> str:
    """What `x` is, for a message: "a tf.data.Dataset", "a dict of packed inputs"..."""
    if isinstance(x, tf.data.Dataset):
        return "a tf.data.Dataset"
    return f"a {type(x).__name__} of packed inputs"
