"""Overlapping windows over rows of tokens as TensorFlow ops, and which one scores a token.

The task models window long texts inside their `tf.data` pipeline, and the
tagger's SavedModel inside its signature, where the numpy rule of
`text.sliding_windows` cannot run. The windows are the CoNLL runner's
(`data_prep.datasets.conll` without document context): `text.sliding_windows`'
windows, `max_tokens` long and `stride` apart, except that the last one of
a row with several is pulled back to end at the row's last token with a
full window's tokens, so it reads as much context as the others. The window
that scores a token is chosen by the original run_squad.py's
`_check_is_max_context`: the most context on the token's shorter side,
`min(left, right) + 0.01 * window length`, ties to the earlier window. The
score is computed in integers, `100 * min + length`, which orders windows
as the original's float does without its rounding. A test holds this module
to the runner's windows.

A row of no tokens gets one empty window, so every example has an output row.
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
    row_lengths = tf.gather(lengths, rows)
    starts = tf.minimum(tf.ragged.range(counts).flat_values * stride,
                        tf.maximum(row_lengths - max_tokens, 0))  # the last one pulled back
    return WindowPlan(rows, starts, tf.minimum(row_lengths, max_tokens), counts)


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
    # Windows k of a row but its last start at k * stride: they hold position t only for
    # (t - max_tokens) / stride < k <= t / stride. The last window is a candidate of its own.
    candidates = max_tokens // stride + 1
    latest = tf.minimum(positions // stride, counts - 1)
    k = tf.concat([latest[:, None] - tf.range(candidates, dtype=tf.int64)[::-1][None, :],
                   counts[:, None] - 1], axis=1)  # ascending
    window = first[:, None] + tf.maximum(k, 0)
    start, length = tf.gather(plan.starts, window), tf.gather(plan.lengths, window)
    left, right = positions[:, None] - start, start + length - 1 - positions[:, None]
    holds = (k >= 0) & (left >= 0) & (right >= 0)
    score = tf.where(holds, 100 * tf.minimum(left, right) + length, -1)
    best = tf.argmax(score, axis=1)  # the first of equal scores: the earlier window
    return (tf.gather(window, best, batch_dims=1), tf.gather(left, best, batch_dims=1))
