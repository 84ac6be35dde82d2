"""A SavedModel for a fine-tuned SQuAD model: question and context strings in, answer out.

The signature does in the graph what `run_squad.py` does in Python for one
window: the question's pieces cut to `max_query_length`, the context split
on whitespace and each word tokenized on its own (the SQuAD reader's
`doc_tokens`), `[CLS] question [SEP] context [SEP]` packed by
`pack_ragged`, then the best span of at most `max_answer_length` pieces
inside the context. The answer is the context's own characters under the
span's pieces (its start and end are character offsets into the context),
which is what the original's `get_final_text` recovers; where
normalization moved a word's bytes (an accent stripped, a control
character deleted) the whole word stands in, as the original falls back to
its whole words when it cannot align them. Two departures, both for a graph
without Python:

- the context is read in one window (what does not fit after the question
  is not read), where the runner slides windows `doc_stride` apart;
- the best span is sought among all valid ones, not only among the
  `n_best_size` best starts and ends.

For SQuAD 2.0 the answer is "" when the null score ([CLS]'s) beats the best
span by more than `null_score_diff_threshold`, as in the runner. Load with
`import tensorflow_text` first.
"""

from __future__ import annotations

import tensorflow as tf

from tasks.serving import TEXTS, RawTextServing, export, fill_empty_rows, whitespace_words
from text.graph_checks import same_rows
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
        question, context = same_rows(question, context, ("question", "context"))
        question_ids, _ = self.tokenizer.tokenize_batch(question)
        question_ids = question_ids[:, :self.max_query_length]
        words, word_starts, _ = whitespace_words(context)
        # Each context piece with its bytes in the context: a word's pieces, offset by the word.
        ids, starts, ends = self.tokenizer.piece_offsets(words.flat_values)
        none = tf.zeros([ids.nrows()], tf.int64)
        ids = fill_empty_rows(ids, tf.fill([ids.nrows()], self.tokenizer.unk_id))
        word_bytes = tf.cast(tf.strings.length(words.flat_values), tf.int64)

        def in_context(offsets: tf.RaggedTensor) -> tf.RaggedTensor:
            word_start = tf.repeat(word_starts.flat_values, offsets.row_lengths())
            return offsets.with_flat_values(offsets.flat_values + tf.cast(word_start, tf.int64))

        starts = in_context(fill_empty_rows(starts, none))
        ends = in_context(fill_empty_rows(ends, word_bytes))

        def by_example(pieces: tf.RaggedTensor) -> tf.RaggedTensor:
            return tf.RaggedTensor.from_row_splits(pieces, words.row_splits).merge_dims(1, 2)

        context_ids, starts, ends = by_example(ids), by_example(starts), by_example(ends)
        room = self.max_seq_length - 3 - question_ids.row_lengths()
        kept = tf.ragged.range(context_ids.row_lengths()) < room[:, None]
        context_ids = tf.ragged.boolean_mask(context_ids, kept)
        logits = self._model(pack_ragged(question_ids, context_ids, *self._packing,
                                         names=("question", "context")), training=False)

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

        start_byte = _pick(tf.ragged.boolean_mask(starts, kept).to_tensor(0),
                           tf.maximum(best // self.max_seq_length - first[:, 0], 0))
        end_byte = _pick(tf.ragged.boolean_mask(ends, kept).to_tensor(0),
                         tf.maximum(best % self.max_seq_length - first[:, 0], 0))
        answer = tf.strings.substr(context, start_byte, end_byte - start_byte)
        start_char = tf.strings.length(tf.strings.substr(context, tf.zeros_like(start_byte),
                                                         start_byte), unit="UTF8_CHAR")
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
