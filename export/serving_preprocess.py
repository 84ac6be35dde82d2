"""The preprocessing SavedModels of the numeric exports: each raw-text model with its model cut off.

A numeric export (`export.serving_folders`) splits a raw-text SavedModel in
two, as TF Hub's BERT does: this preprocessing, which needs tensorflow-text,
and the model on ids (`export.numeric`), which does not. Each
preprocessing module here is its raw-text serving class (`export.serving`,
`serving_tagging`, `serving_span`, `serving_embedder`) with the same
signatures and the same packing code, only its last step (the model and
what follows it) replaced by returning the packed ids. So the ids cannot
differ from what the raw-text model computes. Every signature returns
`input_ids`, `input_mask`, `segment_ids` (int32, [batch, sequence length]),
and what a client needs to read the model's outputs back onto its text:

- classifier (`serve_single(text_a)`, the default, and `serve_pair(text_a,
  text_b)`): the ids alone; for a model that reads long texts through
  windows (`long_texts="windows"`, `serve_single` only), one row of ids per
  window and `window_row` [windows], the text it belongs to: a text's
  logits are the mean of its windows' `logits`, as on raw text;
- tagger (`serving_default(sentence)`, `tag_words(words)`): `words` [batch,
  words] (padded with "") and `first_piece` [batch, words], the position of
  each word's first piece, where the raw-text model reads its tag; -1 for
  padding and for a word beyond the window (the raw-text model's tag "");
- span model (`serving_default(question, context)`): one row of ids per
  window (the runner's `doc_stride` windows); `window_row` [windows], the
  question each window belongs to; `token_word` [windows, sequence length],
  the context word each position's piece belongs to, -1 for the question,
  [CLS], [SEP] and padding; `max_context` [windows, sequence length], where
  the window is the one of most context for its piece (a span starts only
  there, as in the runner); `words` [batch, words], the context's words;
  `word_start`, `word_end` [batch, words], each word's characters in the
  context (`context[word_start:word_end]` in Python; -1 for padding);
- embedder (`serving_default(text)`): the ids alone.
"""

from __future__ import annotations

import tensorflow as tf

from core.record_schema import ENCODER_INPUTS
from export.serving import ClassifierServing
from export.serving_embedder import EmbedderServing
from export.serving_span import SpanServing
from export.serving_tagging import TaggerServing
from text.text_windows import EXAMPLE_WINDOWS


class _Preprocess:
    """Put before a raw-text serving class: the model it was built with dropped (its weights
    stay in the numeric model), its signatures returning the packed ids."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._model = None
        self.model_weights = []

    def _outputs(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return {name: features[name] for name in ENCODER_INPUTS}


class ClassifierPreprocess(_Preprocess, ClassifierServing):
    """A classifier's `serve_single` / `serve_pair` -> the three ids; a windowed model's, one
    row per window, and `window_row`, the text each belongs to."""

    def _outputs(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        outputs = super()._outputs(features)
        if EXAMPLE_WINDOWS in features:
            counts = features[EXAMPLE_WINDOWS]
            outputs["window_row"] = tf.repeat(tf.range(tf.size(counts)), counts)
        return outputs


class EmbedderPreprocess(_Preprocess, EmbedderServing):
    """An embedder's `serve(text)` -> the three ids."""


class TaggerPreprocess(_Preprocess, TaggerServing):
    """A tagger's `tag_sentence` / `tag_words` -> the windows' ids, `words`, and each word's
    `word_window` and `first_piece` (where its tag is read)."""

    def _outputs(self, words: tf.RaggedTensor, packed: dict[str, tf.Tensor]
                 ) -> dict[str, tf.Tensor]:
        return {**packed, "words": words.to_tensor("")}


class SpanPreprocess(_Preprocess, SpanServing):
    """A span model's `serve(question, context)` -> each window's ids, the window's row, and
    the context's words mapped."""

    def _outputs(self, packed: dict) -> dict[str, tf.Tensor]:
        words, piece_words = packed["words"], packed["piece_words"]
        row, window_length = packed["row"], packed["window_length"]
        # Each window piece's word, counted from its row's first word; the context starts
        # after [CLS], the question and [SEP].
        first_piece = tf.gather(packed["context_ids"].row_starts(), row) + packed["window_start"]
        window_words = tf.gather(piece_words.flat_values,
                                 tf.ragged.range(first_piece, first_piece + window_length))
        row_words = window_words - tf.expand_dims(tf.gather(words.row_splits, row), 1)
        before = tf.ragged.range(packed["window_question"].row_lengths() + 2)
        token_word = tf.concat([-tf.ones_like(before), row_words], axis=1).to_tensor(
            -1, shape=[None, self.max_seq_length])
        max_context = tf.concat([tf.zeros_like(before, tf.bool), packed["owned"]],
                                axis=1).to_tensor(False, shape=[None, self.max_seq_length])
        # Bytes -> characters, as Python indexes a str.
        contexts = tf.repeat(packed["context"], words.row_lengths())
        starts = packed["word_starts"].flat_values
        start_chars = _characters(tf.strings.substr(contexts, tf.zeros_like(starts), starts))
        end_chars = start_chars + _characters(words.flat_values)
        return {**{name: packed[name] for name in ENCODER_INPUTS},
                "window_row": tf.cast(row, tf.int32),
                "token_word": tf.cast(token_word, tf.int32),
                "max_context": max_context,
                "words": words.to_tensor(""),
                "word_start": words.with_flat_values(start_chars).to_tensor(-1),
                "word_end": words.with_flat_values(end_chars).to_tensor(-1)}


def _characters(texts: tf.Tensor) -> tf.Tensor:
    return tf.cast(tf.strings.unicode_decode(texts, "UTF-8").row_lengths(), tf.int32)

