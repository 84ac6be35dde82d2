"""The rule of `text.sliding_windows` as TensorFlow ops, batched over rows of tokens.

The task models window long texts inside their `tf.data` pipeline, and the
tagger's SavedModel inside its signature, where the numpy rule cannot run.
The windows are the same (`max_tokens` long, `stride` apart, the last one
ending at the last token) and so is the choice of the window that scores a
token: the most context on its shorter side, `min(left, right) + 0.01 *
window length`, ties to the earlier window (the original run_squad.py's
`_check_is_max_context`). The score is computed in integers, `100 * min +
length`, which orders windows as the original's float does without its
rounding. A test holds the two modules together.

Unlike the numpy rule, a row of no tokens gets one empty window, so that
every example has an output row.
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf


class WindowPlan(NamedTuple):
    """Windows over a batch of rows; each tensor has one entry per window [W]."""

    rows: tf.Tensor  # the row each window covers
    starts: tf.Tensor  # its first token in that row
    lengths: tf.Tensor  # its number of tokens
    counts: tf.Tensor  # windows per row [N]


def plan_windows(row_lengths: tf.Tensor, max_tokens: int, stride: int) -> WindowPlan:
    """Windows over rows of `row_lengths` [N] tokens, in row order.

    Args:
      row_lengths: tokens in each row, int [N].
      max_tokens: the most tokens a window holds (positive).
      stride: tokens between the starts of two windows of a row (positive;
        a stride above `max_tokens` steps by `max_tokens`, so no token is skipped).
    """
    if max_tokens < 1 or stride < 1:
        raise ValueError(f"window length ({max_tokens}) and stride ({stride}) must be positive")
    stride = min(stride, max_tokens)
    lengths = tf.cast(row_lengths, tf.int64)
    counts = tf.where(lengths > max_tokens,
                      (lengths - max_tokens + stride - 1) // stride + 1, 1)
    rows = tf.repeat(tf.range(tf.size(lengths, tf.int64)), counts)
    starts = tf.ragged.range(counts).flat_values * stride
    window_lengths = tf.minimum(tf.gather(lengths, rows) - starts, max_tokens)
    return WindowPlan(rows, starts, window_lengths, counts)


def window_tokens(tokens: tf.RaggedTensor, plan: WindowPlan) -> tf.RaggedTensor:
    """The tokens of each window [W, (tokens)], from `tokens` [N, (tokens)]."""
    first = tf.gather(tokens.row_splits, plan.rows) + plan.starts
    indices = tf.ragged.range(first, first + plan.lengths)
    return indices.with_flat_values(tf.gather(tokens.flat_values, indices.flat_values))


def max_context_windows(plan: WindowPlan, rows: tf.Tensor, positions: tf.Tensor,
                        max_tokens: int, stride: int) -> tuple[tf.Tensor, tf.Tensor]:
    """(window, offset in it) that scores each token at `positions` of `rows` [M].

    The windows are `plan`'s, indexed over the whole batch; each position
    must lie in its row.
    """
    stride = min(stride, max_tokens)
    rows, positions = tf.cast(rows, tf.int64), tf.cast(positions, tf.int64)
    counts = tf.gather(plan.counts, rows)
    first = tf.gather(tf.cumsum(plan.counts, exclusive=True), rows)
    # Windows k of a row hold position t only for (t - max_tokens) / stride < k <= t / stride.
    candidates = max_tokens // stride + 1
    last = tf.minimum(positions // stride, counts - 1)
    k = last[:, None] - tf.range(candidates, dtype=tf.int64)[::-1][None, :]  # ascending
    window = first[:, None] + tf.maximum(k, 0)
    start, length = tf.gather(plan.starts, window), tf.gather(plan.lengths, window)
    left, right = positions[:, None] - start, start + length - 1 - positions[:, None]
    holds = (k >= 0) & (left >= 0) & (right >= 0)
    score = tf.where(holds, 100 * tf.minimum(left, right) + length, -1)
    best = tf.argmax(score, axis=1)  # the first of equal scores: the earlier window
    return (tf.gather(window, best, batch_dims=1), tf.gather(left, best, batch_dims=1))
