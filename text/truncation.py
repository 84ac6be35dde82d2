"""Counting what the window of `sequence_length` tokens cuts off, so that the cut is reported.

The preprocessor keeps the first `sequence_length` tokens of an example,
as the runners' packing does; a longer text trains and predicts on its
beginning only (unless a classifier reads it through windows, or it is a
tagger's sentence, always read so: `text.text_windows`). Nothing in the
result shows the cut, so the task models count these examples before each
`fit`, `evaluate` and `predict` and log the count once per call. The counts follow the packing rules of
`text.sentence_pairs.pack_ragged`: [CLS] text [SEP], or [CLS] a [SEP] b
[SEP] for a pair whose second text has a token.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from absl import logging

from text.tokenization import FullTokenizer

_CHUNK = 4096  # texts tokenized at once: bounds the memory of the counting pass


def report(call: str, message: str | None) -> None:
    """Logs one warning for the call, if anything was cut."""
    if message:
        logging.warning("%s: %s", call, message)


def piece_counts(tokenizer: FullTokenizer, texts: tf.Tensor) -> np.ndarray:
    """The number of sub-tokens of each of `texts` [N]."""
    counts = [tokenizer.tokenize_batch(texts[start:start + _CHUNK])[0].row_lengths().numpy()
              for start in range(0, int(texts.shape[0]), _CHUNK)]
    return np.concatenate(counts) if counts else np.zeros([0], np.int64)


def texts_cut(tokenizer: FullTokenizer, texts_a: tf.Tensor, texts_b: tf.Tensor | None,
              sequence_length: int) -> str | None:
    """Says how many single texts or pairs exceed the window; None when none does."""
    length_a = piece_counts(tokenizer, texts_a)
    if texts_b is None:
        cut, what = length_a > sequence_length - 2, "texts"
    else:
        length_b = piece_counts(tokenizer, texts_b)
        cut = np.where(length_b > 0, length_a + length_b > sequence_length - 3,
                       length_a > sequence_length - 2)
        what = "text pairs"
    if not cut.any():
        return None
    return (f"{int(cut.sum())} of {len(cut)} {what} are longer than "
            f"sequence_length={sequence_length} tokens and were cut to it")


def contexts_cut(tokenizer: FullTokenizer, questions: tf.Tensor, context_words: tf.RaggedTensor,
                 sequence_length: int) -> str | None:
    """Says how many question and context pairs exceed the window (the context's tail is lost)."""
    length_q = piece_counts(tokenizer, questions)
    pieces = piece_counts(tokenizer, context_words.flat_values)  # none: no position
    length_c = np.bincount(context_words.value_rowids().numpy(), weights=pieces,
                           minlength=len(length_q))
    cut = np.where(length_c > 0, length_q + length_c > sequence_length - 3,
                   length_q > sequence_length - 2)
    if not cut.any():
        return None
    return (f"{int(cut.sum())} of {len(cut)} questions with their contexts are longer than "
            f"sequence_length={sequence_length} tokens: the contexts' ends were cut, and "
            "predict_answers reads them whole, in doc_stride windows")
