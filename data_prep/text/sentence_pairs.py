"""Packing one text or a text pair into BERT's fixed-length input.

Every runner that feeds sentences to the encoder (feature extraction,
classification, multiple choice) builds the same layout:
`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, segment id 0 for the first part
and 1 for the second, zero padding to `max_seq_length`. It lives here once.
A second text without tokens (empty or blank) makes a single-text input, as
the original's `if tokens_b:` did, rather than `[CLS] A [SEP] [SEP]`.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence


@dataclasses.dataclass(frozen=True)
class PackedInput:
    """One packed example; `tokens` are the visible tokens, without padding."""

    tokens: list[str]
    input_ids: list[int]
    input_mask: list[int]
    segment_ids: list[int]


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


def pack(tokens_a: Sequence[str], tokens_b: Sequence[str] | None, max_seq_length: int,
         vocab: dict[str, int]) -> PackedInput:
    """Builds `[CLS] A [SEP] (B [SEP])` with segment ids and zero padding.

    A single text (`tokens_b` None or empty) loses its tail beyond
    `max_seq_length - 2` positions; a pair is shortened longest-first to
    `max_seq_length - 3` (room for one [CLS] and two [SEP]).
    """
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
    tokens_a = list(tokens_a)
    tokens_b = list(tokens_b) if tokens_b else None
    if tokens_b is None:
        del tokens_a[max_seq_length - 2:]
    else:
        truncate_pair(tokens_a, tokens_b, max_seq_length - 3)

    tokens = ["[CLS]", *tokens_a, "[SEP]"]
    segment_ids = [0] * len(tokens)
    if tokens_b is not None:
        tokens += [*tokens_b, "[SEP]"]
        segment_ids += [1] * (len(tokens_b) + 1)

    input_ids = [vocab[token] for token in tokens]
    input_mask = [1] * len(input_ids)
    padding = max_seq_length - len(input_ids)
    return PackedInput(tokens=tokens,
                       input_ids=input_ids + [0] * padding,
                       input_mask=input_mask + [0] * padding,
                       segment_ids=segment_ids + [0] * padding)
