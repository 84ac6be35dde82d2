"""A SavedModel for a fine-tuned tagger: a sentence, or its words, in; a tag per word out.

The signature reads a sentence as the CoNLL reader's tagger saw it: words
(split on the SQuAD reader's whitespace, `text.whitespace_words`, or
given), each tokenized on its own ([UNK] for a word without pieces),
`[CLS] pieces [SEP]` packed by `pack_ragged`, and
each word tagged at its first piece, as in the paper. The tags come back as
the label names the model was trained with. A sentence longer than one
window is read up to the window (the runner slides windows over it): its
words beyond get the tag "" so that nothing unread passes for "O". Load
with `import tensorflow_text` first.
"""

from __future__ import annotations

import tensorflow as tf

from core.record_schema import ENCODER_INPUTS
from tasks.serving import TEXTS, RawTextServing, export
from text.sentence_pairs import pack_ragged
from text.whitespace_words import split_words


class TaggerServing(RawTextServing):
    """`tag_sentence(sentence)` or `tag_words(words)` -> `words` and `tags` [N, words]."""

    def __init__(self, model, tokenizer, max_seq_length: int, labels: list[str]):
        if not labels:
            raise ValueError("a tagger's export needs its label names")
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
        """The packed ids and `first_piece` [N, words]: each word's first piece's position,
        -1 for a word beyond the window (or padding)."""
        pieces = self.word_pieces(words)
        features = pack_ragged(pieces.merge_dims(1, 2), None, *self._packing)
        lengths = tf.cast(pieces.values.row_lengths(), tf.int32)
        pieces_before = tf.concat([[0], tf.cumsum(lengths)], axis=0)  # over the whole batch
        row_start = tf.repeat(tf.gather(pieces_before, pieces.row_splits[:-1]),
                              pieces.row_lengths())
        # Each word's first piece: after [CLS] and the pieces of its row's words before it.
        first_piece = tf.RaggedTensor.from_row_splits(
            1 + pieces_before[:-1] - row_start, words.row_splits).to_tensor(self.max_seq_length)
        read = first_piece < self.max_seq_length - 1  # before the closing [SEP]
        return {**features, "first_piece": tf.where(read, first_piece, -1)}

    def _outputs(self, words: tf.RaggedTensor, packed: dict[str, tf.Tensor]
                 ) -> dict[str, tf.Tensor]:
        logits = self._model({name: packed[name] for name in ENCODER_INPUTS}, training=False)
        first_piece = packed["first_piece"]
        tag_ids = tf.argmax(tf.gather(logits, tf.maximum(first_piece, 0), batch_dims=1),
                            axis=-1)
        tags = tf.where(first_piece >= 0, tf.gather(self.labels, tag_ids), "")
        return {"words": words.to_tensor(""), "tags": tags}

def export_tagger(model, tokenizer, max_seq_length: int, labels: list[str], path: str,
                  module_class: type[TaggerServing] = TaggerServing) -> str:
    """Writes the SavedModel to `path` (replacing it): `serving_default` takes a sentence,
    `tag_words` words; `labels.txt` inside lists the tags. `module_class` as in
    `tasks.serving.export_classifier`."""
    module = module_class(model, tokenizer, max_seq_length, labels)
    return export(module, path, {"serving_default": module.tag_sentence,
                                 "tag_words": module.tag_words})
