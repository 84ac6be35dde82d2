"""A SavedModel for a fine-tuned SQuAD model: question and context strings in, answer out.

The signature does in the graph what `run_squad.py` does in Python: the
question's pieces cut to `max_query_length`, the context split into the
SQuAD reader's words (`text.whitespace_words`) and each word tokenized on
its own (a word with no piece, such as a lone U+3000, takes no position,
as in the runner), the context read in windows `doc_stride` pieces apart
beside the question (`text.sliding_windows.graph_question_windows`, the
runner's plan), each `[CLS] question [SEP] window [SEP]` packed by
`pack_ragged`, then the span search and the answer's text of
`text.answer_spans` (the graph twins of the runner's): in each window the
best of the `n_best_size` best starts and ends paired, a start only where
the window holds its token with the most context, at most
`max_answer_length` pieces; the best score over the windows (the first
window on a tie), and its text by the original's `get_final_text`, cut
from the span's words joined by single spaces. `start` and `end` are the
answer's first character and the one after its last in the context.

For SQuAD 2.0 the answer is "" when the null score ([CLS]'s, the lowest of
the windows') beats the best span by more than `null_score_diff_threshold`,
as in the runner. Load with `import tensorflow_text` first.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from core.arguments import check_integer
from core.record_schema import ENCODER_INPUTS
from export.serving import TEXTS, RawTextServing, export
from text import answer_spans, sliding_windows
from text.graph_checks import same_rows
from text.sentence_pairs import pack_ragged
from text.whitespace_words import split_words


class SpanServing(RawTextServing):
    """`serve(question, context)` -> `answer`, `start`, `end` (characters), `score`."""

    def __init__(self, model, tokenizer, max_seq_length: int,
                 max_query_length: int = answer_spans.MAX_QUERY_LENGTH,
                 max_answer_length: int = answer_spans.MAX_ANSWER_LENGTH,
                 version_2_with_negative: bool = False,
                 null_score_diff_threshold: float = 0.0,
                 n_best_size: int = answer_spans.N_BEST_SIZE,
                 doc_stride: int = sliding_windows.DOC_STRIDE):
        super().__init__(model, tokenizer, max_seq_length, None, name="span_serving")
        if max_query_length > max_seq_length - 4:
            raise ValueError(f"max_query_length {max_query_length} leaves no room for the "
                             f"context in {max_seq_length} positions ([CLS] question [SEP] "
                             f"context [SEP]): at most {max_seq_length - 4}")
        self.max_query_length = max_query_length
        self.doc_stride = check_integer("doc_stride", doc_stride)
        self.max_answer_length = max_answer_length
        self.n_best_size = n_best_size
        self.version_2_with_negative = version_2_with_negative
        self.null_score_diff_threshold = null_score_diff_threshold
        tokens = tokenizer.inv_vocab
        self.pieces = tf.constant([tokens[index] for index in range(len(tokens))])

    @tf.function(input_signature=[TEXTS, TEXTS])
    def serve(self, question, context):
        return self._outputs(self._pack(question, context))

    def _pack(self, question: tf.Tensor, context: tf.Tensor) -> dict:
        """The packed ids, and what `_outputs` maps the answer back to the context with."""
        question, context = same_rows(question, context, ("question", "context"))
        question_ids, _ = self.tokenizer.tokenize_batch(question)
        question_ids = question_ids[:, :self.max_query_length]
        words, word_starts, _ = split_words(context)
        ids, _ = self.tokenizer.tokenize_batch(words.flat_values)
        # Each context piece with its word's index in words.flat_values.
        context_ids = tf.RaggedTensor.from_row_splits(ids, words.row_splits).merge_dims(1, 2)
        piece_words = context_ids.with_flat_values(ids.value_rowids())
        # The runner's windows: each row's context `doc_stride` pieces apart beside its question.
        row, window_start, window_length, owned = sliding_windows.graph_question_windows(
            question_ids.row_lengths(), context_ids.row_lengths(), self.max_seq_length,
            self.doc_stride)
        first_piece = tf.gather(context_ids.row_starts(), row) + window_start
        window_ids = tf.gather(context_ids.flat_values,
                               tf.ragged.range(first_piece, first_piece + window_length))
        window_question = tf.gather(question_ids, row)
        return {**pack_ragged(window_question, window_ids, *self._packing,
                              names=("question", "context")),
                "question": question, "context": context, "words": words,
                "word_starts": word_starts, "context_ids": context_ids,
                "piece_words": piece_words, "window_question": window_question,
                "row": row, "window_start": window_start, "window_length": window_length,
                "owned": owned}

    def _outputs(self, packed: dict) -> dict[str, tf.Tensor]:
        logits = self._model({name: packed[name] for name in ENCODER_INPUTS}, training=False)
        start, end, score, has_span = self._best_spans(packed, logits)
        answer, start_char, end_char = self._answer_texts(packed, start, end)
        return {"answer": tf.where(has_span, answer, ""),
                "start": tf.where(has_span, tf.cast(start_char, tf.int32), -1),
                "end": tf.where(has_span, tf.cast(end_char, tf.int32), -1),
                "score": tf.where(has_span, tf.cast(score, tf.float32), tf.float32.min)}

    def _window_spans(self, packed: dict, start_logits: tf.Tensor, end_logits: tf.Tensor
                      ) -> tuple[tf.Tensor, ...]:
        """Each window's best span (`answer_spans.best_spans`): `first` [windows, 1], the
        context's first position; `start`, `end` (window positions), `score`, `has_span`."""
        # Window positions: the context starts after [CLS] question [SEP].
        first = tf.cast(packed["window_question"].row_lengths(), tf.int32)[:, None] + 2
        position = tf.range(self.max_seq_length)[None, :]
        offset = position - first
        ends = (offset >= 0) & (offset < tf.cast(packed["window_length"], tf.int32)[:, None])
        starts = ends & tf.gather(
            packed["owned"].to_tensor(False, shape=[None, self.max_seq_length]),
            tf.maximum(offset, 0), batch_dims=1)
        return (first, *answer_spans.best_spans(start_logits, end_logits, starts, ends,
                                                self.n_best_size, self.max_answer_length))

    def _best_spans(self, packed: dict, logits: dict) -> tuple[tf.Tensor, ...]:
        """Each row's answer: `start`, `end` in its context's pieces, `score`, `has_span`;
        the best span over its windows (the first window of the best score)."""
        row, window_start = packed["row"], packed["window_start"]
        start_logits = tf.cast(logits["start_logits"], tf.float32)
        end_logits = tf.cast(logits["end_logits"], tf.float32)
        first, start, end, score, has_span = self._window_spans(packed, start_logits, end_logits)
        rows = tf.shape(packed["question"], out_type=tf.int64)[0]
        score = tf.where(has_span, score, tf.constant(-np.inf, tf.float64))
        best_score = tf.math.unsorted_segment_max(score, row, rows)
        window = tf.range(tf.size(row, out_type=tf.int64))
        first_window = tf.math.unsorted_segment_min(window, row, rows)
        chosen = tf.math.unsorted_segment_min(
            tf.where(has_span & (score >= tf.gather(best_score, row)), window, tf.int64.max),
            row, rows)
        has_span = chosen < tf.int64.max
        chosen = tf.where(has_span, chosen, first_window)
        if self.version_2_with_negative:
            # The null score of the window most sure there is an answer, as the runner.
            null_score = tf.math.unsorted_segment_min(
                tf.cast(start_logits[:, 0], tf.float64) + tf.cast(end_logits[:, 0], tf.float64),
                row, rows)
            has_span &= null_score - best_score <= self.null_score_diff_threshold
        first = tf.gather(first, chosen)
        start = tf.gather(start, chosen) + tf.cast(tf.gather(window_start, chosen), tf.int32)
        end = tf.gather(end, chosen) + tf.cast(tf.gather(window_start, chosen), tf.int32)
        start = tf.maximum(start - first[:, 0], 0)  # in the context's pieces
        end = tf.maximum(end - first[:, 0], start)
        return start, end, tf.gather(score, chosen), has_span

    def _answer_texts(self, packed: dict, start: tf.Tensor, end: tf.Tensor
                      ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Each row's answer text (`answer_spans.final_texts`) for its span of context pieces
        `start`..`end`, and its first character and the one after its last in the context."""
        words, context_ids, piece_words = (packed[name] for name in ("words", "context_ids",
                                                                     "piece_words"))
        # The span's pieces; a row without one reads the padding "" instead.
        pieces = tf.pad(tf.gather(self.pieces, context_ids).to_tensor(""), [[0, 0], [0, 1]])
        span = tf.ragged.range(start, end + 1)
        span = span.with_flat_values(tf.minimum(span.flat_values, tf.repeat(
            tf.cast(context_ids.row_lengths(), tf.int32), span.row_lengths())))
        pred_text = answer_spans.pieces_texts(tf.gather(pieces, span, batch_dims=1))
        no_word = tf.size(words.flat_values, out_type=tf.int64)  # a stand-in for empty rows
        first_word = _pick(piece_words, start, no_word)
        last_word = _pick(piece_words, end, no_word)
        span_words = tf.gather(tf.concat([words.flat_values, [""]], axis=0),
                               tf.ragged.range(first_word, last_word + 1))
        answer, first_char, last_char = answer_spans.final_texts(
            pred_text, tf.strings.reduce_join(span_words, axis=1, separator=" "),
            self.tokenizer.do_lower_case)
        in_context_chars = _context_characters(packed, first_word, last_word, span_words)
        return (answer, _pick(in_context_chars, first_char, -1),
                _pick(in_context_chars, last_char, -1) + 1)


def _context_characters(packed: dict, first_word: tf.Tensor, last_word: tf.Tensor,
                        span_words: tf.RaggedTensor) -> tf.RaggedTensor:
    """Characters of each row's span words joined by single spaces -> characters of its
    context: each word's own, then one for the space after it. Characters are counted as
    `final_texts` counts them, which for UTF-8 is as Python does."""

    def characters(texts: tf.Tensor) -> tf.Tensor:
        return tf.strings.unicode_decode(texts, "UTF-8").row_lengths()

    word_start_bytes = tf.gather(tf.concat([packed["word_starts"].flat_values, [0]], axis=0),
                                 tf.ragged.range(first_word, last_word + 1)).flat_values
    word_start_chars = characters(tf.strings.substr(
        tf.repeat(packed["context"], span_words.row_lengths()), tf.zeros_like(word_start_bytes),
        word_start_bytes))
    in_context_chars = tf.ragged.range(
        word_start_chars, word_start_chars + characters(span_words.flat_values) + 1)
    return tf.RaggedTensor.from_row_splits(in_context_chars,
                                           span_words.row_splits).merge_dims(1, 2)


def _pick(table: tf.RaggedTensor, index: tf.Tensor, default) -> tf.Tensor:
    """table[row, index[row]] for every row; `default` where the row has no such entry."""
    dense = table.to_tensor(default)
    padded = tf.pad(dense, [[0, 0], [0, 1]], constant_values=default)
    index = tf.clip_by_value(tf.cast(index, tf.int64), 0, tf.shape(dense, tf.int64)[1])
    return tf.gather(padded, index, batch_dims=1)


def export_span_model(model, tokenizer, max_seq_length: int, task, path: str,
                      module_class: type[SpanServing] = SpanServing) -> str:
    """Writes the SavedModel to `path` (replacing it) with `serving_default(question, context)`.

    `task` is the `tasks.squad.SquadTask` the model was fine-tuned for: its
    query and answer lengths, `doc_stride`, n-best size and SQuAD 2.0 threshold are the
    served ones; None serves `run_squad.py`'s defaults (`SpanServing`'s). `module_class`
    as in `export.serving.export_classifier`.
    """
    settings = () if task is None else (
        task.max_query_length, task.max_answer_length, task.version_2_with_negative,
        task.null_score_diff_threshold, task.n_best_size, task.doc_stride)
    module = module_class(model, tokenizer, max_seq_length, *settings)
    return export(module, path, {"serving_default": module.serve})
