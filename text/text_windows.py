"""Texts longer than `sequence_length`, read whole through overlapping windows.

A text of more sub-tokens than fit between [CLS] and [SEP] is covered by
windows starting every `stride` sub-tokens (`text.sliding_windows_graph`),
so nothing is cut:

- The classifier trains on each window as an example carrying the text's
  label, and predicts (and evaluates) a text by the mean of its windows'
  logits: the batch's features carry `example_windows`, the number of
  windows of each text, and the model averages its rows by it.
- The tagger reads each word in every window that holds it but scores it
  in one: the window where its first sub-token has the most context, the
  rule the original run_squad.py applies to SQuAD contexts and the CoNLL
  runner here to long sentences. `fit` and `evaluate` put each word's tag in
  that window alone; `predict` gathers each word's logits from it through
  `word_positions` [words, 2] (window, position) in the batch's features.

All of it is TensorFlow ops, so it runs inside `tf.data` and inside the
tagger's SavedModel alike.
"""

from __future__ import annotations

import tensorflow as tf

from text.sentence_pairs import pack_ragged
from text.sliding_windows_graph import max_context_windows, plan_windows, window_tokens

TRUNCATE, WINDOWS = "truncate", "windows"
EXAMPLE_WINDOWS = "example_windows"
WORD_POSITIONS = "word_positions"


def text_windows(tokens: tf.RaggedTensor, sequence_length: int, stride: int, cls_id: int,
                 sep_id: int) -> dict[str, tf.Tensor]:
    """Texts as sub-token ids [N, (tokens)] -> `[CLS] window [SEP]` rows [W, sequence_length].

    Also `example_windows` [N]: the windows of each text, in order.
    """
    plan = plan_windows(tokens.row_lengths(), sequence_length - 2, stride)
    packed = pack_ragged(window_tokens(tokens, plan), None, sequence_length, cls_id, sep_id)
    return {**packed, EXAMPLE_WINDOWS: tf.cast(plan.counts, tf.int32)}


def mean_over_windows(logits: tf.Tensor, example_windows: tf.Tensor) -> tf.Tensor:
    """Each text's logits: the mean over its consecutive rows of window logits."""
    counts = tf.cast(example_windows, tf.int64)
    texts = tf.repeat(tf.range(tf.size(counts, tf.int64)), counts)
    return tf.math.unsorted_segment_mean(logits, texts, tf.size(counts, tf.int64))


def word_windows(word_pieces: tf.RaggedTensor, sequence_length: int, stride: int, cls_id: int,
                 sep_id: int, word_labels: tf.RaggedTensor | None = None
                 ) -> tuple[dict[str, tf.Tensor], tf.Tensor | None]:
    """Sentences as sub-tokens by word [N, (words), (pieces)] -> windows, and where words score.

    Returns the packed windows [W, sequence_length] with `example_windows`
    [N] and `word_positions` [words, 2]: the window and the position in it
    of each word's first sub-token, in the window where it has the most
    context. With
    `word_labels` [N, (words)], also token labels [W, sequence_length]
    holding each word's label at that one position and -1 elsewhere (no loss
    there); else None. Every word must have at least one sub-token.
    """
    tokens = word_pieces.merge_dims(1, 2)
    plan = plan_windows(tokens.row_lengths(), sequence_length - 2, stride)
    packed = pack_ragged(window_tokens(tokens, plan), None, sequence_length, cls_id, sep_id)
    first_piece = word_pieces.values.row_splits[:-1]  # in the batch's flat sub-tokens
    rows = word_pieces.value_rowids()
    window, offset = max_context_windows(plan, rows,
                                         first_piece - tf.gather(tokens.row_splits, rows),
                                         sequence_length - 2, stride)
    positions = tf.cast(tf.stack([window, offset + 1], axis=1), tf.int32)  # after [CLS]
    packed.update({WORD_POSITIONS: positions, EXAMPLE_WINDOWS: tf.cast(plan.counts, tf.int32)})
    if word_labels is None:
        return packed, None
    labels = tf.tensor_scatter_nd_update(
        tf.fill([tf.size(plan.rows), sequence_length], -1), positions,
        tf.cast(word_labels.flat_values, tf.int32))
    return packed, labels


def word_logits(logits: tf.Tensor, word_positions: tf.Tensor) -> tf.Tensor:
    """[words, labels]: each word's logits, read where it is scored."""
    return tf.gather_nd(logits, word_positions)


def stride_for(window_stride: int | None, sequence_length: int) -> int:
    """The stride in sub-tokens for windows of `sequence_length`: given, or half a window
    (the CoNLL runner's default). A stride wider than a window is refused: the
    sub-tokens between windows would be skipped."""
    capacity = sequence_length - 2
    if window_stride is None:
        return max(capacity // 2, 1)
    if window_stride > capacity:
        raise ValueError(f"window_stride={window_stride} is wider than a window of "
                         f"sequence_length={sequence_length} ({capacity} sub-tokens between "
                         "[CLS] and [SEP]): sub-tokens between windows would be skipped; "
                         f"give at most {capacity}")
    return window_stride
