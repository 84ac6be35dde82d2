"""Packing one text or a text pair into BERT's fixed-length input.

Every path that feeds sentences to the encoder builds the same layout:
`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, segment id 0 for the first part
and 1 for the second, zero padding to `max_seq_length`. A second text
without tokens (empty or blank) makes a single-text input, as the original's
`if tokens_b:` did, rather than `[CLS] A [SEP] [SEP]`. A pair too long loses
tokens as the original's `_truncate_seq_pair` did: from the end of the
currently longer segment, the second one on a tie.

The rules are written once, over arrays, and run on numpy or in the graph
(`ArrayOps`): `kept_lengths` (how much of each segment survives) and
`layout_rows` (where each token goes). `pack_ids` applies them to examples
held as id lists (GLUE, SWAG, SQuAD, CoNLL, feature extraction), `pack` to
token strings, pre-training calls `layout_rows` after its own (random)
truncation, and `pack_ragged` runs both on ragged id tensors inside an
exported model or a `tf.data` pipeline. Written as a few elementwise ops and
one gather, the in-graph packer is a tenth of the graph that
tensorflow-text's trimmer and `combine_segments` built (their ragged
concatenation adds a runtime assertion per row partition), which every
serving signature, preprocessor and TF Hub export traced and ran. A test
holds `pack_ragged` to `pack_ids` on random inputs, so serving cannot drift
from training.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, NamedTuple, Sequence

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


class ArrayOps(NamedTuple):
    """The array functions the packing rules use, which numpy and TensorFlow spell alike."""

    arange: Callable
    where: Callable
    take: Callable
    minimum: Callable
    maximum: Callable


NUMPY_OPS = ArrayOps(lambda size: np.arange(size, dtype=np.int32), np.where, np.take,
                     np.minimum, np.maximum)


def tensorflow_ops() -> ArrayOps:
    """`ArrayOps` for graph tensors (imported on use: see `pack_ragged`)."""
    import tensorflow as tf

    return ArrayOps(lambda size: tf.range(size, dtype=tf.int32), tf.where, tf.gather,
                    tf.minimum, tf.maximum)


def kept_lengths(a_length, b_length, max_seq_length, ops: ArrayOps = NUMPY_OPS) -> tuple:
    """(A's kept length, B's kept length, is a pair) for rows of `max_seq_length` positions.

    A row whose B has no token is a single text, as the original's `if
    tokens_b:` made it, and keeps its first `max_seq_length - 2` tokens. A
    pair shares `max_seq_length - 3`: the original's `_truncate_seq_pair`
    removed one token at a time from the end of the currently longer segment
    (the second on a tie). Cutting the longer one, rather than the same share
    of each, keeps as much of the short text as possible: a short text is
    more likely to need every token to keep its meaning. Its end state in
    closed form: a segment of at most half the budget is kept whole and the
    other fills the rest; two long ones split it, the first keeping the odd
    token. The arguments are ints or arrays ([rows, 1] columns), so that
    packing needs no loop over examples.
    """
    budget = max_seq_length - 3
    pair_a = ops.minimum(a_length, ops.maximum(budget - b_length, (budget + 1) // 2))
    pair = b_length > 0
    return (ops.where(pair, pair_a, ops.minimum(a_length, max_seq_length - 2)),
            ops.where(pair, ops.minimum(b_length, budget - pair_a), 0), pair)


def layout_rows(token_ids, a_start, a_length, b_start, b_length, pair, max_seq_length,
                cls_id: int, sep_id: int, ops: ArrayOps = NUMPY_OPS) -> PackedRows:
    """`[CLS] A [SEP] (B [SEP])` rows whose segments are ranges of one flat `token_ids` array.

    Start and length arguments are [rows, 1] columns; segments must already
    fit. `pair` (scalar or [rows, 1]) adds B and its [SEP]; a row that is not
    a pair must have `b_length` 0. Working on ranges of one array lets
    pre-training lay out thousands of instances without building lists, and
    the same lines run in the graph (`ops`, with int32 columns there).
    `input_mask` and `segment_ids` come back boolean.
    """
    position = ops.arange(max_seq_length)[None, :]
    b_first = a_length + 2
    in_a = (position >= 1) & (position <= a_length)
    in_b = (position >= b_first) & (position < b_first + b_length)
    in_text = in_a | in_b
    source = ops.where(in_a, a_start - 1 + position, b_start - b_first + position)
    length = a_length + 2 + ops.where(pair, b_length + 1, 0)
    input_mask = position < length
    # The positions of a row that hold no text are [CLS] (the first) and the [SEP]s. Written
    # from `position` to keep its int32: numpy would make a choice of two bare ints int64.
    marks = ops.where(position == 0, position + cls_id, position * 0 + sep_id)
    special = ops.where(input_mask, marks, 0)
    input_ids = ops.where(in_text, ops.take(token_ids, ops.where(in_text, source, 0)), special)
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
    firsts = [list(first) for first in ids_a]
    seconds = [list(second or ()) for second in ids_b]
    a_length = np.asarray([len(first) for first in firsts], np.int32).reshape(-1, 1)
    b_length = np.asarray([len(second) for second in seconds], np.int32).reshape(-1, 1)
    a_start, b_start = _starts(a_length, b_length)
    # One spare id keeps the gather valid when no example has a token.
    token_ids = np.asarray([*(i for first, second in zip(firsts, seconds)
                              for i in first + second), 0], dtype=np.int32)
    kept_a, kept_b, pair = kept_lengths(a_length, b_length, max_seq_length)
    packed = layout_rows(token_ids, a_start, kept_a, b_start, kept_b, pair, max_seq_length,
                         cls_id, sep_id)
    return {"input_ids": packed.input_ids, "input_mask": packed.input_mask.astype(np.int32),
            "segment_ids": packed.segment_ids.astype(np.int32)}


def _starts(a_length: np.ndarray, b_length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each row's A and B begin when the rows' segments are laid end to end, A B A B."""
    lengths = a_length + b_length
    a_start = (np.cumsum(lengths) - lengths[:, 0]).astype(np.int32).reshape(-1, 1)
    return a_start, a_start + a_length


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
    naming them by `names` (the caller's arguments), raised before any
    position is read.
    """
    # Imported here, not at the top: pre-training's main process imports this module and must
    # stay free of TensorFlow (its workers are forked, and TensorFlow is not fork-safe).
    import tensorflow as tf

    from text.graph_checks import same_rows

    if isinstance(max_seq_length, int):
        _check_length(max_seq_length)
    ops = tensorflow_ops()
    if ids_b is None:
        ids_b = tf.RaggedTensor.from_row_splits(
            tf.zeros([0], ids_a.flat_values.dtype), tf.zeros_like(ids_a.row_splits),
            validate=False)
    else:
        ids_a, ids_b = same_rows(ids_a, ids_b, names)

    def column(lengths: tf.Tensor) -> tf.Tensor:
        return tf.cast(lengths, tf.int32)[:, None]

    kept_a, kept_b, pair = kept_lengths(column(ids_a.row_lengths()),
                                        column(ids_b.row_lengths()), max_seq_length, ops)
    flat_a = tf.cast(ids_a.flat_values, tf.int32)
    token_ids = tf.concat([flat_a, tf.cast(ids_b.flat_values, tf.int32), [0]], axis=0)
    packed = layout_rows(token_ids, column(ids_a.row_starts()), kept_a,
                         column(ids_b.row_starts()) + tf.size(flat_a), kept_b, pair,
                         max_seq_length, cls_id, sep_id, ops)
    return {"input_ids": packed.input_ids,
            "input_mask": tf.cast(packed.input_mask, tf.int32),
            "segment_ids": tf.cast(packed.segment_ids, tf.int32)}


def _check_length(max_seq_length: int) -> None:
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
