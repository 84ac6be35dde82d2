"""Overlapping windows over a token sequence too long for one input, and which one scores a token.

SQuAD contexts and CoNLL sentences longer than the encoder's input are
covered by windows starting every `stride` tokens, so a span cut by one
window's edge lies whole in another. A token seen in several windows is
then scored in only one: the original run_squad.py's `_check_is_max_context`
picks the window where it has the most context on its shorter side,
`min(tokens left of it, tokens right of it) + 0.01 * window length` (the
small term prefers longer windows; ties go to the earlier window), since a
token near a window's edge is predicted with half its context missing.
Both tasks use the rule from here, so they cannot score windows differently.

A question and its context share one input, `[CLS] question [SEP] window
[SEP]`, so the context's windows are as long as the question leaves room
for (`question_windows`): the SQuAD runner's features, the span model's
`predict_answers` and `fit` plan them here, and the QA SavedModel with the
graph twin `graph_question_windows`, which a test holds to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    import tensorflow as tf

DOC_STRIDE = 128  # the original's --doc_stride: context tokens between windows' starts


def windows(num_tokens: int, max_tokens: int, stride: int) -> list[tuple[int, int]]:
    """(start, length) of the windows over `num_tokens` tokens; none for no tokens.

    Windows of `max_tokens` start `stride` tokens apart (at most a window
    apart, so no token is skipped); the last one ends at the last token.
    """
    if max_tokens < 1 or stride < 1:
        raise ValueError(f"window length ({max_tokens}) and stride ({stride}) must be positive")
    spans: list[tuple[int, int]] = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, stride)
    return spans


def max_context_owners(spans: Sequence[tuple[int, int]], num_tokens: int) -> np.ndarray:
    """For each of `num_tokens` tokens, the index of the (start, length) span that scores it.

    A token in no span gets 0; callers ask only about covered tokens.
    """
    scores = np.full((max(len(spans), 1), num_tokens), -np.inf)
    for index, (start, length) in enumerate(spans):
        left = np.arange(length)
        scores[index, start:start + length] = np.minimum(left, left[::-1]) + 0.01 * length
    return np.argmax(scores, axis=0)


def question_windows(query_length: int, context_length: int, max_seq_length: int,
                     stride: int) -> tuple[list[tuple[int, int]], list[np.ndarray]]:
    """The context's windows beside a question, and where each window scores its tokens.

    Args:
      query_length: the question's tokens (already cut to the query limit).
      context_length: the context's tokens.
      max_seq_length: positions of `[CLS] question [SEP] window [SEP]`.
      stride: tokens between the starts of two windows (the runner's `doc_stride`).

    Returns:
      (start, length) of each window in the context's tokens, and per window a
      bool array [length]: whether the window is the one where that token has
      its maximum context. No windows for no context tokens.
    """
    spans = windows(context_length, max_seq_length - query_length - 3, stride)
    owners = max_context_owners(spans, context_length)
    return spans, [owners[start:start + length] == index
                   for index, (start, length) in enumerate(spans)]


def graph_question_windows(query_lengths: tf.Tensor, context_lengths: tf.Tensor,
                           max_seq_length: int, stride: int
                           ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.RaggedTensor]:
    """`question_windows` for a batch, in the graph; a row without context gets one empty window.

    Args:
      query_lengths, context_lengths: int64 [batch].
      max_seq_length, stride: as for `question_windows` (each row must leave
        the context at least one position).

    Returns:
      the row of each window, its start and its length (int64 [windows], rows
      in order, windows of a row in order), and whether it is the window of
      maximum context of each of its tokens ([windows, (length)] bool).
    """
    import tensorflow as tf  # not at the top: the numpy rule above is used without TensorFlow

    room = max_seq_length - 3 - query_lengths
    step = tf.minimum(tf.cast(stride, tf.int64), room)
    # Windows start `step` apart until one reaches the last token: 1 + ceil((n - room) / step).
    count = 1 + tf.maximum(context_lengths - room + step - 1, 0) // step
    row = tf.repeat(tf.range(tf.size(count, out_type=tf.int64)), count)
    index = tf.ragged.range(count).flat_values  # the window's index within its row
    start = index * tf.gather(step, row)
    length = tf.minimum(tf.gather(context_lengths, row) - start, tf.gather(room, row))
    # Each window's score of every token of its row ([windows, (tokens of its row)]).
    token = tf.ragged.range(tf.gather(context_lengths, row))
    offset = token - start[:, None]
    covered = (offset >= 0) & (offset < length[:, None])
    score = tf.where(covered, tf.cast(tf.minimum(offset, length[:, None] - 1 - offset),
                                      tf.float64) + 0.01 * tf.cast(length[:, None], tf.float64),
                     tf.constant(-np.inf, tf.float64))
    # The best score of each token over its row's windows: the first window reaching it owns it.
    dense = score.to_tensor(-np.inf)  # [windows, most tokens]
    best = tf.math.unsorted_segment_max(dense, row, tf.size(count))
    reaches = covered.to_tensor(False) & (dense >= tf.gather(best, row))
    first_owner = tf.math.unsorted_segment_min(
        tf.where(reaches, index[:, None], tf.int64.max), row, tf.size(count))
    owns = reaches & (tf.gather(first_owner, row) == index[:, None])
    in_window = tf.ragged.range(start, start + length)
    return row, start, length, tf.gather(owns, in_window, batch_dims=1)
