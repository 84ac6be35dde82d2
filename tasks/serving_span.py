"""A SavedModel for a fine-tuned SQuAD model: question and context strings in, answer out.

The signature does in the graph what `run_squad.py` does in Python for one
window: the question's pieces cut to `max_query_length`, the context split
on whitespace and each word tokenized on its own (the SQuAD reader's
`doc_tokens`), `[CLS] question [SEP] context [SEP]` packed by
`pack_ragged`, then the best span of at most `max_answer_length` pieces
inside the context. Two departures, both for a graph without Python:

- the context is read in one window (what does not fit after the question
  is not read), where the runner slides windows `doc_stride` apart;
- the answer is the context's whitespace-separated words that hold the
  span, as the original's `orig_text`, without its last step that trims
  them to the span's own characters (so "Paris." may come back with its
  period); the best span is sought among all valid ones, not only the
  `n_best_size` best starts and ends.

For SQuAD 2.0 the answer is "" when the null score ([CLS]'s) beats the best
span by more than `null_score_diff_threshold`, as in the runner. Load with
`import tensorflow_text` first.
"""

from __future__ import annotations

import tensorflow as tf

from tasks.serving import TEXTS, RawTextServing, export, whitespace_words
from text.sentence_pairs import pack_ragged


class SpanServing(RawTextServing):
    """`serve(question, context)` -> `answer`, `start`, `end` (characters), `score`."""

    def __init__(self, model, tokenizer, max_seq_length: int, max_query_length: int,
                 max_answer_length: int, version_2_with_negative: bool = False,
                 null_score_diff_threshold: float = 0.0):
        super().__init__(model, tokenizer, max_seq_length, None, name="span_serving")
        if max_query_length > max_seq_length - 3:
            raise ValueError(f"max_query_length {max_query_length} leaves no room for the "
                             f"context in {max_seq_length} positions")
        self.max_query_length = max_query_length
        self.max_answer_length = max_answer_length
        self.version_2_with_negative = version_2_with_negative
        self.null_score_diff_threshold = null_score_diff_threshold

    @tf.function(input_signature=[TEXTS, TEXTS])
    def serve(self, question, context):
        question_ids, _ = self.tokenizer.tokenize_batch(question)
        question_ids = question_ids[:, :self.max_query_length]
        words, word_starts, word_ends = whitespace_words(context)
        pieces = self.word_pieces(words)  # [batch, (words), (pieces)]
        word_of_piece = tf.RaggedTensor.from_row_splits(
            tf.repeat(tf.ragged.range(words.row_lengths()).flat_values,
                      pieces.values.row_lengths()),
            tf.gather(pieces.values.row_splits, pieces.row_splits))
        room = self.max_seq_length - 3 - question_ids.row_lengths()
        kept = tf.ragged.range(word_of_piece.row_lengths()) < room[:, None]
        context_ids = tf.ragged.boolean_mask(pieces.merge_dims(1, 2), kept)
        word_of_piece = tf.ragged.boolean_mask(word_of_piece, kept)
        logits = self._model(pack_ragged(question_ids, context_ids, *self._packing),
                             training=False)

        first = tf.cast(question_ids.row_lengths(), tf.int32)[:, None] + 2  # context's start
        position = tf.range(self.max_seq_length)[None, :]
        in_context = (position >= first) & (
            position < first + tf.cast(context_ids.row_lengths(), tf.int32)[:, None])
        start_logits = tf.cast(logits["start_logits"], tf.float32)
        end_logits = tf.cast(logits["end_logits"], tf.float32)
        scores = start_logits[:, :, None] + end_logits[:, None, :]
        length = position[:, None, :] - position[:, :, None]  # end - start
        valid = (in_context[:, :, None] & in_context[:, None, :] & (length >= 0)
                 & (length < self.max_answer_length))
        scores = tf.where(valid, scores, tf.float32.min)
        flat = tf.reshape(scores, [-1, self.max_seq_length ** 2])
        best = tf.argmax(flat, axis=1, output_type=tf.int32)
        best_score = tf.reduce_max(flat, axis=1)
        has_span = tf.reduce_any(tf.reshape(valid, [tf.shape(valid)[0], -1]), axis=1)
        if self.version_2_with_negative:
            null_score = start_logits[:, 0] + end_logits[:, 0]
            has_span &= null_score - best_score <= self.null_score_diff_threshold

        piece_words = word_of_piece.to_tensor(0)
        start_word = _pick(piece_words, tf.maximum(best // self.max_seq_length - first[:, 0], 0))
        end_word = _pick(piece_words, tf.maximum(best % self.max_seq_length - first[:, 0], 0))
        start_byte = _pick(word_starts.to_tensor(0), start_word)
        end_byte = _pick(word_ends.to_tensor(0), end_word)
        answer = tf.strings.substr(context, start_byte, end_byte - start_byte)
        start_char = tf.strings.length(tf.strings.substr(context, tf.zeros_like(start_byte),
                                                         start_byte),
                                       unit="UTF8_CHAR")
        end_char = start_char + tf.strings.length(answer, unit="UTF8_CHAR")
        return {"answer": tf.where(has_span, answer, ""),
                "start": tf.where(has_span, start_char, -1),
                "end": tf.where(has_span, end_char, -1),
                "score": tf.where(has_span, best_score, tf.float32.min)}


def _pick(table: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
    """table[row, index[row]] for every row; a row without entries reads a padding 0."""
    padded = tf.pad(table, [[0, 0], [0, 1]])
    return tf.gather(padded, tf.cast(index, tf.int32), batch_dims=1)


def export_span_model(model, tokenizer, max_seq_length: int, task, path: str) -> str:
    """Writes the SavedModel to `path` (replacing it) with `serving_default(question, context)`.

    `task` is the `tasks.squad.SquadTask` the model was fine-tuned for: its
    query and answer lengths and SQuAD 2.0 threshold are the served ones.
    """
    module = SpanServing(model, tokenizer, max_seq_length, task.max_query_length,
                         task.max_answer_length, task.version_2_with_negative,
                         task.null_score_diff_threshold)
    return export(module, path, {"serving_default": module.serve})
