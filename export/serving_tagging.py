"""A SavedModel for a fine-tuned tagger: a sentence, or its words, in; a tag per word out.

The signature reads a sentence as the CoNLL reader's tagger saw it: words
(split on the SQuAD reader's whitespace, `text.whitespace_words`, or
given), each tokenized on its own ([UNK] for a word without pieces),
`[CLS] pieces [SEP]` packed by `pack_ragged`, and
each word tagged at its first piece, as in the paper. The tags come back as
the label names the model was trained with. A sentence longer than one
window is read through windows `window_stride` pieces apart, as the runner
reads it, each word tagged in the window where it has the most context
(`text.text_windows`), so every word gets a tag. Load with
`import tensorflow_text` first.
"""

from __future__ import annotations

import tensorflow as tf

from core.record_schema import ENCODER_INPUTS
from export.serving import TEXTS, RawTextServing, export
from text.text_windows import WORD_POSITIONS, stride_for, word_logits, word_windows
from text.whitespace_words import split_words


class TaggerServing(RawTextServing):
    """`tag_sentence(sentence)` or `tag_words(words)` -> `words` and `tags` [N, words]."""

    def __init__(self, model, tokenizer, max_seq_length: int, labels: list[str],
                 window_stride: int | None = None):
        if not labels:
            raise ValueError("a tagger's export needs its label names")
        self.window_stride = stride_for(window_stride, max_seq_length)
        super().__init__(model, tokenizer, max_seq_length, labels, name="tagger_serving")

    @tf.function(input_signature=[TEXTS])
    def tag_sentence(self, sentence):
        words, _, _ = split_words(sentence)
        return self._tag(words)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.string)])
    def tag_words(self, words):
        """Words [N, W], each row padded at its end with "" (the padding gets no tag)."""
        return self._tag(tf.RaggedTensor.from_tensor(words, padding=""))

    def _tag(self, words: tf.RaggedTensor) -> dict[str, tf.Tensor]:
        return self._outputs(words, self._pack(words))

    def _pack(self, words: tf.RaggedTensor) -> dict[str, tf.Tensor]:
        """The windows' ids [windows, max_seq_length], and where each word is read:
        `word_window` [N, words], the row of the window where it has the most context,
        and `first_piece` [N, words], its first piece's position there (-1: padding)."""
        windows, _ = word_windows(self.word_pieces(words), self.max_seq_length,
                                  self.window_stride, self.tokenizer.cls_id,
                                  self.tokenizer.sep_id)
        positions = windows[WORD_POSITIONS]
        return {**{key: windows[key] for key in ENCODER_INPUTS},
                "word_window": words.with_flat_values(positions[:, 0]).to_tensor(-1),
                "first_piece": words.with_flat_values(positions[:, 1]).to_tensor(-1)}

    def _outputs(self, words: tf.RaggedTensor, packed: dict[str, tf.Tensor]
                 ) -> dict[str, tf.Tensor]:
        logits = self._model({key: packed[key] for key in ENCODER_INPUTS}, training=False)
        read = packed["first_piece"] >= 0
        positions = tf.stack([tf.boolean_mask(packed["word_window"], read),
                              tf.boolean_mask(packed["first_piece"], read)], axis=1)
        tag_ids = tf.argmax(word_logits(logits, positions), axis=-1)
        tags = words.with_flat_values(tf.gather(self.labels, tag_ids))
        return {"words": words.to_tensor(""), "tags": tags.to_tensor("")}


def export_tagger(model, tokenizer, max_seq_length: int, labels: list[str], path: str,
                  window_stride: int | None = None,
                  module_class: type[TaggerServing] = TaggerServing) -> str:
    """Writes the SavedModel to `path` (replacing it): `serving_default` takes a sentence,
    `tag_words` words; `labels.txt` inside lists the tags.

    Args:
      model: the fine-tuned tagger.
      tokenizer: its `FullTokenizer`.
      max_seq_length: the pieces of a window, [CLS] and [SEP] included.
      labels: the tag names, in the order of the model's outputs.
      path: the SavedModel's folder.
      window_stride: pieces between the windows over a long sentence (default:
        the model's own `window_stride`, else half a window, as the runner).
      module_class: the serving class (`export.serving_preprocess` gives the
        preprocessing half of the same class).
    """
    if window_stride is None:
        window_stride = model.serving_spec().window_stride
    module = module_class(model, tokenizer, max_seq_length, labels, window_stride)
    return export(module, path, {"serving_default": module.tag_sentence,
                                 "tag_words": module.tag_words})
