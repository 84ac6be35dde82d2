"""The encoder's packed inputs checked inside its graph: ids outside their tables refused.

Not every bad id fails an embedding lookup by itself. Keras' `take` reads
a negative index from the end, as NumPy does, so input id -7 silently reads
word V-7; and the padding mask enters attention as a number, so a mask
value of 2 or -1 gives a position a weight no real mask has. A served model
(a SavedModel, a TF Hub encoder, a LiteRT flat buffer) has no Python of
ours to check its inputs with, so the checks live in the graph, beside the
lookups they guard:

- an Assert per input, whose message names the input, its allowed range
  and its smallest and largest values; the guarded tensor passes through
  it, so nothing computed from the input runs unless it held (a failed one
  is a `tf.errors.InvalidArgumentError`, "assertion failed: [...]");
- an Assert that the mask and the segment ids have the ids' shape, and
  that a row holds 1 to max_position_embeddings positions, each naming
  the input and the shapes it has;
- lookups done with `tf.gather`, which refuses an index outside the table
  at either end, in TensorFlow and in LiteRT's interpreter alike; the mask
  passes through a lookup in the table [0, 1], so that LiteRT, whose
  converter drops Assert ops, fails the call on a bad mask too.

The message is static text beside the two extremes (no string op), so the
check compiles under XLA, where Asserts are dropped and gathers clamp: a
graph compiled with XLA does not check its inputs.

Each check is two reductions over the ids, nothing next to the encoder's
matrix products.
"""

from __future__ import annotations

import tensorflow as tf

_MASK_VALUES = (0, 1)


def checked_ids(ids: tf.Tensor, size: int, name: str, table: str) -> tf.Tensor:
    """`ids`, usable only once each lies in [0, size): the rows of the `table` it indexes.

    Args:
      ids: integer ids of any shape.
      size: the number of rows of the table they index.
      name: the input, as the error names it (`input_ids`).
      table: the table's size setting, named beside the range (`vocab_size`).
    """
    return _guarded(ids, 0, size - 1,
                    f"{name} holds values outside [0, {size}) ({table}={size}); its smallest "
                    "and largest:")


def checked_mask(mask: tf.Tensor) -> tf.Tensor:
    """`mask`, usable only once each value is 0 (padding) or 1 (a real token).

    The result is looked up in the table [0, 1] (the same values), so that a
    LiteRT model, which keeps no Assert, fails its gather on a bad mask.
    """
    mask = _guarded(mask, 0, 1, "input_mask holds values other than 0 (padding) and 1 "
                                "(a real token); its smallest and largest:")
    return tf.gather(tf.constant(_MASK_VALUES, mask.dtype), mask)


def checked_shape(values: tf.Tensor, input_ids: tf.Tensor, name: str) -> tf.Tensor:
    """`values` (the mask or the segment ids), usable only once its shape is `input_ids'`.

    Of another length, it would be broadcast against the ids or fail in a
    product deep inside, naming a node rather than the input.
    """
    if values.shape.rank is not None and input_ids.shape.rank is not None and (
            values.shape.rank != input_ids.shape.rank):
        raise ValueError(f"{name} has rank {values.shape.rank} but input_ids has rank "
                         f"{input_ids.shape.rank}: they must have one shape")
    shape, wanted = tf.shape(values), tf.shape(input_ids)
    check = tf.debugging.Assert(tf.reduce_all(tf.equal(shape, wanted)), [
        f"{name} must have the shape of input_ids; its shape, then theirs:", shape, wanted])
    with tf.control_dependencies([check]):
        return tf.identity(values)


def checked_length(input_ids: tf.Tensor, positions: int) -> tf.Tensor:
    """`input_ids`, usable only once its rows hold 1 to `positions` tokens: a row of none has
    no [CLS] to pool, one longer than the position table has no embedding for its end."""
    length = tf.shape(input_ids)[1]
    check = tf.debugging.Assert((length >= 1) & (length <= positions), [
        f"input_ids must hold 1 to {positions} positions (max_position_embeddings={positions})"
        "; it holds", length])
    with tf.control_dependencies([check]):
        return tf.identity(input_ids)


def _guarded(values: tf.Tensor, lowest: int, highest: int, message: str) -> tf.Tensor:
    """`values` behind an Assert that each lies in [lowest, highest], naming both extremes."""
    smallest, largest = tf.reduce_min(values), tf.reduce_max(values)
    check = tf.debugging.Assert((smallest >= lowest) & (largest <= highest),
                                [message, smallest, largest])
    with tf.control_dependencies([check]):
        return tf.identity(values)
