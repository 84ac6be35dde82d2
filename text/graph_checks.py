"""Checks on tensors that end in one readable error, before the ops they guard can run.

A SavedModel signature or a `tf.data` map sees its inputs only as tensors,
so a bad input (two text columns of different lengths, a length out of
range) shows only when the graph runs. Some ops do not check their inputs:
tensorflow-text's trimmer and segment combiner, given segments of different
batch sizes, read past a buffer (a crash, or ids from uninitialised memory).
A check that merely sits somewhere in the graph may run after them, so here
the guarded tensors pass through it: nothing computed from them runs unless
it held. Eagerly, the check raises at once.

A failed check is a `tf.errors.InvalidArgumentError` whose message holds the
sentence given with its `{}` filled in from `values` (in a graph, after
TensorFlow's "assertion failed:").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf


def guarded(condition: tf.Tensor, message: str, values: Sequence[tf.Tensor], tensors: Any) -> Any:
    """`tensors` (a structure of tensors, ragged ones too), usable only once `condition` holds.

    Args:
      condition: a scalar bool tensor.
      message: the error, one `{}` for each of `values`.
      values: scalar tensors shown in the message.
      tensors: what the caller goes on to compute from; returned unchanged in value.
    """
    if tf.executing_eagerly():
        if not bool(condition):
            shown = [value.numpy() if hasattr(value, "numpy") else value for value in values]
            raise tf.errors.InvalidArgumentError(None, None, message.format(*shown))
        return tensors
    check = tf.debugging.Assert(condition, [tf.strings.format(message, tuple(values))])
    with tf.control_dependencies([check]):
        return tf.nest.map_structure(tf.identity, tensors, expand_composites=True)


def same_rows(first: tf.Tensor | tf.RaggedTensor, second: tf.Tensor | tf.RaggedTensor,
              names: tuple[str, str]) -> tuple[Any, Any]:
    """(first, second), guarded: they must hold as many rows (examples), named in the error."""
    rows = [tf.cast(_rows(tensor), tf.int64) for tensor in (first, second)]
    return guarded(tf.equal(*rows), rows_differ(*names, "{}", "{}"), rows, (first, second))


def rows_differ(first: str, second: str, first_rows: object, second_rows: object) -> str:
    """The error for two inputs that must hold one row (example) each and do not."""
    return (f"{first} and {second} differ in batch size: {first_rows} and {second_rows}; "
            "give one of each per example")


def same_row_lengths(first: tf.RaggedTensor, second: tf.RaggedTensor, names: tuple[str, str]
                     ) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """(first, second), guarded: [N, (items)] both, with as many items in each row."""
    first, second = same_rows(first, second, names)
    differs = tf.not_equal(first.row_lengths(), second.row_lengths())
    row = tf.reduce_min(tf.concat([tf.where(differs)[:, 0], [first.nrows()]], axis=0))
    shown = [tf.gather(tf.concat([tensor.row_lengths(), [0]], axis=0), row)
             for tensor in (first, second)]
    return guarded(tf.logical_not(tf.reduce_any(differs)),
                   f"{names[0]} and {names[1]} differ in row {{}}: {{}} and {{}} items; give "
                   "one of each per item", [row, *shown], (first, second))


def _rows(tensor: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
    return tensor.nrows() if isinstance(tensor, tf.RaggedTensor) else tf.shape(tensor)[0]
