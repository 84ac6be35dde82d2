"""Packing one text or a text pair into BERT's fixed-length input.

Every path that feeds sentences to the encoder builds the same layout:
`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, segment id 0 for the first part
and 1 for the second, zero padding to `max_seq_length`. A second text
without tokens (empty or blank) makes a single-text input, as the original's
`if tokens_b:` did, rather than `[CLS] A [SEP] [SEP]`. A pair too long loses
tokens as the original's `_truncate_seq_pair` did: from the end of the
currently longer segment, the second one on a tie.

The layout is written once, in numpy (`layout_rows`), and used three ways:
`pack_ids` for examples held as id lists (GLUE, SWAG, SQuAD, CoNLL,
feature extraction), `pack` for token strings, and directly by pre-training,
which chooses its own (random) truncation. `pack_ragged` does the same in
the graph of an exported model, with tensorflow-text's `RoundRobinTrimmer`:
giving the first segment the first unit of budget, then alternating, ends
where popping from the longer one (ties: the second) ends. A test holds
`pack_ragged` to `pack_ids` on random inputs, so serving cannot drift from
training.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, NamedTuple, Sequence

import numpy as np

if TYPE_CHECKING:
    import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class PackedInput:
    """One packed example; `tokens` are the visible tokens, without padding."""

    tokens: list[str]
    input_ids: list[int]
    input_mask: list[int]
    segment_ids: list[int]


class PackedRows(NamedTuple):
    """Rows of `max_seq_length` positions; `in_text` marks the segments' own tokens."""

    input_ids: np.ndarray
    input_mask: np.ndarray
    segment_ids: np.ndarray
    in_text: np.ndarray


def truncate_pair(tokens_a: list, tokens_b: list, max_length: int) -> None:
    """Truncates a pair in place to `max_length` tokens in total.

    One token at a time is removed from the end of the currently longer
    sequence. Cutting the longer one, rather than the same share of each,
    keeps as much of the short text as possible: a short text is more likely
    to need every token to keep its meaning.
    """
    while len(tokens_a) + len(tokens_b) > max_length:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        longer.pop()


def layout_rows(token_ids: np.ndarray, a_start: np.ndarray, a_length: np.ndarray,
                b_start: np.ndarray, b_length: np.ndarray, pair: bool | np.ndarray,
                max_seq_length: int, cls_id: int, sep_id: int) -> PackedRows:
    """`[CLS] A [SEP] (B [SEP])` rows whose segments are ranges of one flat `token_ids` array.

    Start and length arguments are [rows, 1] columns; segments must already
    fit. `pair` (scalar or [rows, 1]) adds B and its [SEP]; a row that is not
    a pair must have `b_length` 0. Working on ranges of one array lets
    pre-training lay out thousands of instances without building lists.
    `input_mask` and `segment_ids` come back boolean.
    """
    rows = np.arange(len(a_start))[:, None]
    position = np.arange(max_seq_length, dtype=np.int32)[None, :]
    b_first = a_length + 2
    in_a = (position >= 1) & (position <= a_length)
    in_b = (position >= b_first) & (position < b_first + b_length)
    in_text = in_a | in_b
    source = np.where(in_a, a_start - 1 + position, b_start - b_first + position)
    input_ids = np.where(in_text, token_ids[np.where(in_text, source, 0)], 0).astype(np.int32)
    length = a_length + 2 + np.where(pair, b_length + 1, 0)
    input_ids[:, 0] = cls_id
    input_ids[rows, a_length + 1] = sep_id
    input_ids[rows, length - 1] = sep_id
    input_mask = position < length
    segment_ids = (position >= b_first) & input_mask & pair
    return PackedRows(input_ids, input_mask, segment_ids, in_text)


def pack_ids(ids_a: Sequence[Sequence[int]], ids_b: Sequence[Sequence[int] | None],
             max_seq_length: int, cls_id: int, sep_id: int) -> dict[str, np.ndarray]:
    """Packs example i from `ids_a[i]` and `ids_b[i]` (None or empty: a single text).

    A single text loses its tail beyond `max_seq_length - 2` positions; a
    pair is shortened longest-first to `max_seq_length - 3`. Returns int32
    `input_ids`, `input_mask`, `segment_ids` of shape [examples, max_seq_length].
    """
    _check_length(max_seq_length)
    if len(ids_a) != len(ids_b):
        raise ValueError(f"{len(ids_a)} first segments but {len(ids_b)} second ones")
    flat: list[int] = []
    columns: list[tuple[int, int, int, int, bool]] = []
    for first, second in zip(ids_a, ids_b):
        first, second, is_pair = list(first), list(second or ()), bool(second)
        if is_pair:  # (still a pair when truncation leaves B no token)
            truncate_pair(first, second, max_seq_length - 3)
        else:
            del first[max_seq_length - 2:]
        columns.append((len(flat), len(first), len(flat) + len(first), len(second), is_pair))
        flat += first + second
    # One spare id keeps the gather valid when no example has a token.
    token_ids = np.asarray(flat + [0], dtype=np.int64)
    table = np.asarray(columns, dtype=np.int64).reshape(-1, 5)
    a_start, a_length, b_start, b_length, pair = (table[:, k:k + 1] for k in range(5))
    packed = layout_rows(token_ids, a_start, a_length, b_start, b_length, pair.astype(bool),
                         max_seq_length, cls_id, sep_id)
    return {"input_ids": packed.input_ids, "input_mask": packed.input_mask.astype(np.int32),
            "segment_ids": packed.segment_ids.astype(np.int32)}


def pack(tokens_a: Sequence[str], tokens_b: Sequence[str] | None, max_seq_length: int,
         vocab: dict[str, int]) -> PackedInput:
    """`pack_ids` for one example of token strings, keeping the visible tokens.

    The tokens are kept for callers that report per-token results (feature
    extraction writes one record per visible token). Packing the tokens'
    indices, then looking them up, truncates them exactly as the ids.
    """
    tokens = [*tokens_a, *(tokens_b or ()), "[CLS]", "[SEP]"]
    count = len(tokens) - 2
    packed = pack_ids([range(len(tokens_a))], [range(len(tokens_a), count)], max_seq_length,
                      count, count + 1)
    length = int(packed["input_mask"][0].sum())
    visible = [tokens[index] for index in packed["input_ids"][0][:length].tolist()]
    padding = [0] * (max_seq_length - length)
    return PackedInput(tokens=visible, input_ids=[vocab[token] for token in visible] + padding,
                       input_mask=packed["input_mask"][0].tolist(),
                       segment_ids=packed["segment_ids"][0].tolist())


def pack_ragged(ids_a: tf.RaggedTensor, ids_b: tf.RaggedTensor | None, max_seq_length: int,
                cls_id: int, sep_id: int, names: tuple[str, str] = ("ids_a", "ids_b")
                ) -> dict[str, tf.Tensor]:
    """`pack_ids` in the graph, on [batch, (ids)] ragged tensors; int32 [batch, max_seq_length].

    A row whose `ids_b` is empty packs as a single text, as `pack_ids` does.
    `max_seq_length` may be a scalar tensor (checked by the caller then).
    `ids_a` and `ids_b` of different batch sizes are one InvalidArgumentError
    naming them by `names` (the caller's arguments), raised before
    tensorflow-text's trimmer, which would read past a buffer.
    """
    # Imported here, not at the top: pre-training's main process imports this module and must
    # stay free of TensorFlow (its workers are forked, and TensorFlow is not fork-safe).
    import tensorflow as tf
    import tensorflow_text as tf_text

    from text.graph_checks import same_rows

    if isinstance(max_seq_length, int):
        _check_length(max_seq_length)
    if ids_b is not None:
        ids_a, ids_b = same_rows(ids_a, ids_b, names)

    def combine(segments: list[tf.RaggedTensor]) -> dict[str, tf.Tensor]:
        budget = max_seq_length - 1 - len(segments)
        trimmed = tf_text.RoundRobinTrimmer(budget, axis=-1).trim(segments)
        ids, segment_ids = tf_text.combine_segments(
            trimmed, start_of_sequence_id=cls_id, end_of_segment_id=sep_id)
        input_ids, input_mask = tf_text.pad_model_inputs(ids, max_seq_length)
        segment_ids, _ = tf_text.pad_model_inputs(segment_ids, max_seq_length)
        return {"input_ids": tf.cast(input_ids, tf.int32),
                "input_mask": tf.cast(input_mask, tf.int32),
                "segment_ids": tf.cast(segment_ids, tf.int32)}

    single = combine([ids_a])
    if ids_b is None:
        return single
    pair = combine([ids_a, ids_b])
    has_b = (ids_b.row_lengths() > 0)[:, None]
    return {name: tf.where(has_b, pair[name], single[name]) for name in pair}


def _check_length(max_seq_length: int) -> None:
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
