"""Span QA on raw text: a question and its context in, the answer's text out.

The context is split into the SQuAD reader's words (`text.whitespace_words`)
and each word tokenized alone, as the SQuAD runner reads it; the answer is
decoded as the runner decodes it (`text.answer_spans`): the best of the
`n_best_size` best starts and ends paired, at most `max_answer_length`
pieces inside the context, and its text by the original's `get_final_text`
(the span's words joined by single spaces, cut to the pieces where the
alignment allows). This is the quick path for one window of
`sequence_length` tokens: a context longer than the window loses its tail,
and the runner's sliding windows and SQuAD 2.0's null answer stay in
`run_squad.py`.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from core.arguments import check_integer
from modeling import truncation
from modeling.labelled_text import ragged_words
from modeling.text_tasks import TextTaskMixin
from text.answer_spans import (MAX_ANSWER_LENGTH, N_BEST_SIZE, BasicWords, candidate_spans,
                               final_text, pieces_text)
from text.whitespace_words import whitespace_words


class SpanTextMixin(TextTaskMixin):
    """`predict((questions, contexts))` gives the logits; `predict_answers` the texts."""

    def _text_columns(self, x, y, argument: str) -> tuple:
        if y is not None:
            raise ValueError("span models fit on packed features with start_positions and "
                             "end_positions (run_squad.py builds them); raw text is for "
                             "prediction")
        questions, contexts = _questions_and_contexts(x)
        return (tf.constant(questions, tf.string), _context_words(contexts)), None

    def _preprocess_batch(self, x, y=None, sample_weight=None):
        questions, context_words = x
        return self.preprocessor.pack_question_words(questions, context_words)[0]

    def _truncation(self, inputs) -> str | None:
        questions, context_words = inputs
        return truncation.contexts_cut(self.preprocessor.tokenizer, questions, context_words,
                                       self.preprocessor.sequence_length)

    def _empty_outputs(self, input_shape: tuple) -> dict[str, np.ndarray]:
        empty = np.zeros((0, input_shape[-1]), np.float32)
        return {"start_logits": empty, "end_logits": empty.copy()}

    def default_loss(self) -> keras.losses.Loss:
        raise ValueError(
            f"{type(self).__name__} has no default loss: its raw-text fit would need answer "
            "positions in sub-tokens, which the SQuAD task builds (tasks.squad, as "
            "run_squad.py trains). To fit packed features yourself, compile with a loss per "
            "output, e.g. loss={'start_logits': keras.losses.SparseCategoricalCrossentropy("
            "from_logits=True), 'end_logits': the same}, and give y={'start_logits': "
            "start_positions, 'end_logits': end_positions}")

    def predict_answers(self, questions: Sequence[str], contexts: Sequence[str],
                        max_answer_length: int = MAX_ANSWER_LENGTH,
                        batch_size: int | None = None,
                        n_best_size: int = N_BEST_SIZE) -> list[str]:
        """The best span of each context, as the SQuAD runner decodes it; [] for no questions.

        Args:
          questions, contexts: one question per context.
          max_answer_length: the longest answer, in sub-tokens.
          batch_size: examples per prediction batch (Keras' default when None).
          n_best_size: the best starts and the best ends that are paired.
        """
        max_answer_length = check_integer("max_answer_length", max_answer_length)
        n_best_size = check_integer("n_best_size", n_best_size)
        questions, contexts = _questions_and_contexts((questions, contexts))
        outputs = self.predict((questions, contexts), batch_size=batch_size, verbose=0)
        if not questions:
            return []
        context_words = [whitespace_words(context)[0] for context in contexts]
        packed, word_pieces = self.preprocessor.pack_question_words(
            tf.constant(list(questions), tf.string), ragged_words(context_words))
        pieces_per_word = word_pieces.row_lengths(axis=2).to_list()
        piece_ids = word_pieces.merge_dims(1, 2).to_list()
        tokens = self.preprocessor.tokenizer.inv_vocab
        found = []  # (row, the span's pieces as text, the words it covers joined by spaces)
        for row, words in enumerate(context_words):
            context_positions = np.flatnonzero(packed["segment_ids"][row].numpy())[:-1]
            allowed = set(context_positions.tolist())  # the context's pieces, not its [SEP]
            spans = candidate_spans(outputs["start_logits"][row], outputs["end_logits"][row],
                                    allowed, allowed, n_best_size, max_answer_length)
            if not spans:
                continue
            best = max(spans, key=lambda span: span.score)  # the first of the best
            pieces = range(best.start - context_positions[0], best.end - context_positions[0] + 1)
            word_of_piece = np.repeat(np.arange(len(pieces_per_word[row])), pieces_per_word[row])
            covered = words[word_of_piece[pieces[0]]:word_of_piece[pieces[-1]] + 1]
            found.append((row, pieces_text([tokens[piece_ids[row][i]] for i in pieces]),
                          " ".join(covered)))
        basic_words = BasicWords(self.preprocessor.tokenizer.do_lower_case)
        basic_words.prefetch(covered for _, _, covered in found)
        answers = [""] * len(contexts)
        for row, pred_text, covered in found:
            answers[row] = final_text(pred_text, covered, basic_words.get(covered))
        return answers


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
