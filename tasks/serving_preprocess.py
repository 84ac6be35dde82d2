"""The preprocessing SavedModels of the numeric exports: each raw-text model with its model cut off.

A numeric export (`tasks.serving_folders`) splits a raw-text SavedModel in
two, as TF Hub's BERT does: this preprocessing, which needs tensorflow-text,
and the model on ids (`tasks.numeric_export`), which does not. Each
preprocessing module here is its raw-text serving class (`tasks.serving`,
`serving_tagging`, `serving_span`, `serving_embedder`) with the same
signatures and the same packing code, only its last step (the model and
what follows it) replaced by returning the packed ids. So the ids cannot
differ from what the raw-text model computes. Every signature returns
`input_ids`, `input_mask`, `segment_ids` (int32, [batch, sequence length]),
and what a client needs to read the model's outputs back onto its text:

- classifier (`serve_single(text_a)`, the default, and `serve_pair(text_a,
  text_b)`): the ids alone;
- tagger (`serving_default(sentence)`, `tag_words(words)`): `words` [batch,
  words] (padded with "") and `first_piece` [batch, words], the position of
  each word's first piece, where the raw-text model reads its tag; -1 for
  padding and for a word beyond the window (the raw-text model's tag "");
- span model (`serving_default(question, context)`): `words` [batch, words],
  the context's words; `word_start`, `word_end` [batch, words], each word's
  characters in the context (`context[word_start:word_end]` in Python; -1
  for padding); `token_word` [batch, sequence length], the context word each
  position's piece belongs to, -1 for the question, [CLS], [SEP] and padding;
- embedder (`serving_default(text)`): the ids alone.
"""

from __future__ import annotations

import tensorflow as tf

from core.record_schema import ENCODER_INPUTS
from tasks.serving import ClassifierServing
from tasks.serving_embedder import EmbedderServing
from tasks.serving_span import SpanServing
from tasks.serving_tagging import TaggerServing


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
    """A classifier's `serve_single` / `serve_pair` -> the three ids."""


class EmbedderPreprocess(_Preprocess, EmbedderServing):
    """An embedder's `serve(text)` -> the three ids."""


class TaggerPreprocess(_Preprocess, TaggerServing):
    """A tagger's `tag_sentence` / `tag_words` -> the ids, `words` and `first_piece`."""

    def _outputs(self, words: tf.RaggedTensor, packed: dict[str, tf.Tensor]
                 ) -> dict[str, tf.Tensor]:
        return {**packed, "words": words.to_tensor("")}


class SpanPreprocess(_Preprocess, SpanServing):
    """A span model's `serve(question, context)` -> the ids and the context's words mapped."""

    def _outputs(self, packed: dict) -> dict[str, tf.Tensor]:
        words, piece_words = packed["words"], packed["piece_words"]
        # Each context piece's word, counted from its row's first word; the context starts
        # after [CLS], the question and [SEP].
        row_words = piece_words - tf.expand_dims(words.row_splits[:-1], 1)
        first = packed["question_ids"].row_lengths() + 2
        before = -tf.ones_like(tf.ragged.range(first))  # -1 for [CLS], question and [SEP]
        token_word = tf.concat([before, row_words], axis=1).to_tensor(
            -1, shape=[None, self.max_seq_length])
        # Bytes -> characters, as Python indexes a str.
        contexts = tf.repeat(packed["context"], words.row_lengths())
        starts = packed["word_starts"].flat_values
        start_chars = _characters(tf.strings.substr(contexts, tf.zeros_like(starts), starts))
        end_chars = start_chars + _characters(words.flat_values)
        return {**{name: packed[name] for name in ENCODER_INPUTS},
                "token_word": tf.cast(token_word, tf.int32),
                "words": words.to_tensor(""),
                "word_start": words.with_flat_values(start_chars).to_tensor(-1),
                "word_end": words.with_flat_values(end_chars).to_tensor(-1)}


def _characters(texts: tf.Tensor) -> tf.Tensor:
    return tf.cast(tf.strings.unicode_decode(texts, "UTF-8").row_lengths(), tf.int32)

