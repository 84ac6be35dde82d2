"""Span QA on raw text: a question and its context in, the answer's text out.

The context is split into the SQuAD reader's words (`text.whitespace_words`)
and each word tokenized alone, as the SQuAD runner reads it. A context
longer than the room beside its question (cut to `max_query_length`
pieces) is read in windows `doc_stride` pieces apart, planned by the
runner's rule (`text.sliding_windows.question_windows`), so an answer past
the first window is found. Each window's answer is decoded as the runner
decodes it (`text.answer_spans`): the best of the `n_best_size` best
starts and ends paired, starting at a token the window holds with its
maximum context, at most `max_answer_length` pieces; the best score over
the windows wins, and its text is the original's `get_final_text` (the
span's words joined by single spaces, cut to the pieces where the
alignment allows). SQuAD 2.0's null answer stays in `run_squad.py`.
`predict((questions, contexts))` gives the logits of one window per
example (what does not fit is counted and logged).

`fit((questions, contexts), answers)` trains as the runner trains: each
answer, SQuAD's `{"text", "answer_start"}` (or a `(text, answer_start)`
pair), is placed on its words and pieces (`text.answer_targets`), every
window of its context (128 pieces apart) is a training row, and a window
without the whole answer points at [CLS]. The loss is the runner's, the
mean of the start and end cross-entropies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from core.arguments import check_integer, is_integer
from modeling import truncation
from modeling.labelled_text import ragged_words
from modeling.labels import as_list
from modeling.text_tasks import TextTaskMixin
from modeling.text_arguments import optional_count
from text.answer_spans import (MAX_ANSWER_LENGTH, MAX_QUERY_LENGTH, N_BEST_SIZE, BasicWords, Span,
                               candidate_spans, final_text, pieces_text)
from text.answer_targets import answer_pieces, answer_words, improve_answer_span, window_target
from text.sentence_pairs import pack_ids
from text.sliding_windows import DOC_STRIDE, question_windows
from text.whitespace_words import whitespace_words


class SpanTextMixin(TextTaskMixin):
    """`predict((questions, contexts))` gives the logits; `predict_answers` the texts."""

    def _text_columns(self, x, y, argument: str) -> tuple:
        questions, contexts = _questions_and_contexts(x)
        if y is None:
            return (tf.constant(questions, tf.string), _context_words(contexts)), None
        answers = _answers(y, contexts, argument)
        plan = self._windows(questions, contexts, self._query_limit(None), DOC_STRIDE)
        inverse = self.preprocessor.tokenizer.inv_vocab
        answer_ids = self.preprocessor.tokenizer.tokenize_batch(
            tf.constant([text for text, _ in answers], tf.string))[0].to_list()
        targets = []  # each answer's first and last context pieces
        for row, ((_, (first_word, last_word)), answer) in enumerate(zip(answers, answer_ids)):
            pieces = [inverse[piece] for piece in plan.piece_ids[row]]
            first_pieces = np.searchsorted(plan.piece_words[row], np.arange(len(plan.words[row])))
            start, end = answer_pieces(first_pieces.tolist(), len(pieces), first_word, last_word)
            targets.append(improve_answer_span(pieces, start, end,
                                               [inverse[piece] for piece in answer]))
        positions = np.asarray([window_target(targets[row], start, length, offset)
                                for (row, start, length, _), offset
                                in zip(plan.windows, plan.offsets)], np.int32).reshape(-1, 2)
        inputs = {key: tf.constant(value, tf.int32) for key, value in plan.packed.items()}
        return inputs, {"start_logits": tf.constant(positions[:, 0]),
                        "end_logits": tf.constant(positions[:, 1])}

    def _preprocess_batch(self, x, y=None, sample_weight=None):
        if isinstance(x, dict):  # training windows, packed when the answers were placed
            return tuple(part for part in (x, y, sample_weight) if part is not None)
        questions, context_words = x
        return self.preprocessor.pack_question_words(questions, context_words)[0]

    def _truncation(self, inputs) -> str | None:
        if isinstance(inputs, dict):  # training windows cover each context whole
            return None
        questions, context_words = inputs
        return truncation.contexts_cut(self.preprocessor.tokenizer, questions, context_words,
                                       self.preprocessor.sequence_length)

    def _empty_outputs(self, input_shape: tuple) -> dict[str, np.ndarray]:
        empty = np.zeros((0, input_shape[-1]), np.float32)
        return {"start_logits": empty, "end_logits": empty.copy()}

    def default_loss(self) -> dict[str, keras.losses.Loss]:
        # Half of each cross-entropy: Keras adds the outputs' losses, giving their mean.
        return {"start_logits": HalfCrossEntropy(name="start_loss"),
                "end_logits": HalfCrossEntropy(name="end_loss")}

    def predict_answers(self, questions: Sequence[str], contexts: Sequence[str],
                        doc_stride: int = DOC_STRIDE, max_query_length: int | None = None,
                        max_answer_length: int = MAX_ANSWER_LENGTH,
                        batch_size: int | None = None,
                        n_best_size: int = N_BEST_SIZE) -> list[str]:
        """The best span of each context over its windows, as the SQuAD runner finds it.

        A context longer than the room beside its question is read in windows
        `doc_stride` pieces apart, as `run_squad.py` reads it; each window
        proposes spans starting at the tokens it holds with the most context,
        and the best score over all windows wins. [] for no questions.

        Args:
          questions, contexts: one question per context.
          doc_stride: context pieces between the starts of two windows.
          max_query_length: question pieces kept; None: the runner's 64, or
            fewer where `sequence_length` leaves the context less than one
            position (`sequence_length - 4`).
          max_answer_length: the longest answer, in sub-tokens.
          batch_size: windows per prediction batch (Keras' default when None).
          n_best_size: the best starts and the best ends of a window that are paired.
        """
        doc_stride = check_integer("doc_stride", doc_stride)
        max_answer_length = check_integer("max_answer_length", max_answer_length)
        n_best_size = check_integer("n_best_size", n_best_size)
        batch_size = optional_count("batch_size", batch_size)
        max_query_length = self._query_limit(max_query_length)
        questions, contexts = _questions_and_contexts((questions, contexts))
        if not questions:
            return []
        plan = self._windows(questions, contexts, max_query_length, doc_stride)
        outputs = self.predict(plan.packed, batch_size=batch_size, verbose=0)
        tokens = self.preprocessor.tokenizer.inv_vocab
        best: dict[int, tuple[Span, int]] = {}  # example -> its best span and window
        for window, (row, start, length, owned) in enumerate(plan.windows):
            first = plan.offsets[window]  # the context's first position in the window
            starts = set((first + np.flatnonzero(owned)).tolist())
            for span in candidate_spans(outputs["start_logits"][window],
                                        outputs["end_logits"][window], starts,
                                        range(first, first + length), n_best_size,
                                        max_answer_length):
                if row not in best or span.score > best[row][0].score:  # ties: the first
                    best[row] = (span, window)
        found = []  # (row, the span's pieces as text, the words it covers joined by spaces)
        for row, (span, window) in best.items():
            _, start, _, _ = plan.windows[window]
            pieces = range(start + span.start - plan.offsets[window],
                           start + span.end - plan.offsets[window] + 1)
            words = plan.piece_words[row]
            covered = plan.words[row][words[pieces[0]]:words[pieces[-1]] + 1]
            found.append((row, pieces_text([tokens[plan.piece_ids[row][i]] for i in pieces]),
                          " ".join(covered)))
        basic_words = BasicWords(self.preprocessor.tokenizer.do_lower_case)
        basic_words.prefetch(covered for _, _, covered in found)
        answers = [""] * len(contexts)
        for row, pred_text, covered in found:
            answers[row] = final_text(pred_text, covered, basic_words.get(covered))
        return answers

    def _query_limit(self, max_query_length: int | None) -> int:
        """`max_query_length` checked against the room in `sequence_length` (None: default)."""
        self._require_preprocessor()
        most = self.preprocessor.sequence_length - 4  # [CLS] [SEP] [SEP] and one context piece
        if max_query_length is None:
            return min(MAX_QUERY_LENGTH, most)
        max_query_length = check_integer("max_query_length", max_query_length)
        if max_query_length > most:
            raise ValueError(
                f"max_query_length={max_query_length} leaves no room for the context in "
                f"sequence_length={self.preprocessor.sequence_length} positions ([CLS] "
                f"question [SEP] context [SEP]): give at most {most}")
        return max_query_length

    def _windows(self, questions: list[str], contexts: list[str], max_query_length: int,
                 doc_stride: int) -> "_Windows":
        """Every window of every context beside its question, packed, as the runner plans them."""
        tokenizer, length = self.preprocessor.tokenizer, self.preprocessor.sequence_length
        words = [whitespace_words(context)[0] for context in contexts]
        question_ids = tokenizer.tokenize_batch(tf.constant(questions, tf.string))[0].to_list()
        ragged = ragged_words(words)
        word_pieces = tf.RaggedTensor.from_row_splits(
            tokenizer.tokenize_batch(ragged.flat_values)[0], ragged.row_splits)
        piece_ids = word_pieces.merge_dims(1, 2).to_list()
        piece_words = [np.repeat(np.arange(len(counts)), counts).tolist()
                       for counts in word_pieces.row_lengths(axis=2).to_list()]
        plan = _Windows(words, piece_ids, piece_words, [], [], [])
        ids_a, ids_b = [], []
        for row, (question, context) in enumerate(zip(question_ids, piece_ids)):
            query = question[:max_query_length]
            spans, owned = question_windows(len(query), len(context), length, doc_stride)
            for (start, size), mine in zip(spans or [(0, 0)], owned or [np.zeros(0, bool)]):
                plan.windows.append((row, start, size, mine))
                plan.offsets.append(len(query) + 2)
                ids_a.append(query)
                ids_b.append(context[start:start + size])
        plan.packed = pack_ids(ids_a, ids_b, length, tokenizer.cls_id, tokenizer.sep_id)
        return plan


@dataclasses.dataclass
class _Windows:
    """A batch's contexts (words, pieces, each piece's word) and their packed windows.

    `windows` holds (example, first context piece, pieces, whether the window
    scores each of them); `offsets` the position of each window's first piece.
    """

    words: list[list[str]]
    piece_ids: list[list[int]]
    piece_words: list[list[int]]
    windows: list[tuple[int, int, int, np.ndarray]]
    offsets: list[int]
    packed: dict


@keras.saving.register_keras_serializable(package="bert")
class HalfCrossEntropy(keras.losses.Loss):
    """Half the sparse cross-entropy of logits: the start and end outputs' halves add up
    to the original run_squad.py's span loss, their mean (`span_loss`)."""

    def call(self, y_true, y_pred):
        return 0.5 * keras.losses.sparse_categorical_crossentropy(y_true, y_pred,
                                                                  from_logits=True)


def _answers(y, contexts: list[str], argument: str) -> list[tuple[str, tuple[int, int]]]:
    """Each answer's text and words, checked in Python: a dict with "text" and "answer_start"
    (SQuAD's JSON) or a (text, answer_start) pair per context."""
    answers = as_list(y, argument)
    if len(answers) != len(contexts):
        raise ValueError(f"{argument} holds {len(answers)} answers for {len(contexts)} "
                         "contexts: give one answer per question")
    checked = []
    for index, (answer, context) in enumerate(zip(answers, contexts)):
        if isinstance(answer, dict) and {"text", "answer_start"} <= answer.keys():
            text, start = answer["text"], answer["answer_start"]
        elif isinstance(answer, (tuple, list)) and len(answer) == 2:
            text, start = answer
        else:
            raise ValueError(f"{argument}[{index}] is {answer!r}: give each answer as "
                             "{'text': ..., 'answer_start': ...} or (text, answer_start)")
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{argument}[{index}]: the answer text is {text!r}; give the "
                             "non-blank text of the answer")
        if not is_integer(start) or not 0 <= start <= len(context) - len(text):
            raise ValueError(f"{argument}[{index}]: answer_start={start!r} is outside "
                             f"context {index} ({len(context)} characters) for an answer of "
                             f"{len(text)}: give the offset of its first character, from 0")
        words, char_to_word = whitespace_words(context)
        found = answer_words(words, char_to_word, text, int(start))
        if found is None:
            raise ValueError(f"{argument}[{index}]: the answer {text!r} is not at "
                             f"answer_start={start} in context {index}, which reads "
                             f"{context[start:start + len(text)]!r} there")
        checked.append((text, found))
    return checked


def _questions_and_contexts(x) -> tuple[list[str], list[str]]:
    if isinstance(x, list) and x and all(isinstance(row, (tuple, list)) for row in x):
        x = tuple(zip(*x))
    if not isinstance(x, tuple) or len(x) != 2 or isinstance(x[0], str) or \
            isinstance(x[1], str):
        raise ValueError("span models take (questions, contexts) or rows of "
                         "(question, context) pairs")
    questions, contexts = list(x[0]), list(x[1])
    if len(questions) != len(contexts):
        raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts")
    for name, texts in (("questions", questions), ("contexts", contexts)):
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"{name}[{index}] is {text!r}, not a str")
    return questions, contexts


def _context_words(contexts: Sequence[str]) -> tf.RaggedTensor:
    return ragged_words([whitespace_words(context)[0] for context in contexts])
