"""Span QA on raw text: a question and its context in, the answer's text out.

The context is split on whitespace into words and each word tokenized
alone, as the SQuAD runner reads it, so the best span of sub-tokens maps
back to whole words, and the answer is the context's own characters from
the first to the last of them. This is the quick path for one window of
`sequence_length` tokens: a context longer than the window loses its tail,
and the runner's n-best ranking over sliding windows, its re-alignment of
a span that starts or ends inside a word (`get_final_text`) and SQuAD 2.0's
null answer stay in `run_squad.py`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from core.arguments import check_integer
from modeling import truncation
from modeling.labelled_text import ragged_words
from modeling.text_tasks import TextTaskMixin

# The original run_squad.py's whitespace; other characters belong to words.
_WORD = re.compile("[^ \t\r\n\u202f]+")
MAX_ANSWER_LENGTH = 30  # the original's --max_answer_length, in sub-tokens


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
                        batch_size: int | None = None) -> list[str]:
        """The best-scoring span of each context (start before end, at most
        `max_answer_length` sub-tokens), as the context's own text; [] for no questions."""
        max_answer_length = check_integer("max_answer_length", max_answer_length)
        questions, contexts = _questions_and_contexts((questions, contexts))
        outputs = self.predict((questions, contexts), batch_size=batch_size, verbose=0)
        if not questions:
            return []
        words = [[match.span() for match in _WORD.finditer(context)] for context in contexts]
        packed, word_pieces = self.preprocessor.pack_question_words(
            tf.constant(list(questions), tf.string), _context_words(contexts))
        pieces_per_word = word_pieces.row_lengths(axis=2).to_list()
        answers = []
        for row, context in enumerate(contexts):
            in_context = np.flatnonzero(packed["segment_ids"][row].numpy())[:-1]  # not [SEP]
            if not len(in_context):
                answers.append("")
                continue
            start, end = best_span(outputs["start_logits"][row][in_context],
                                   outputs["end_logits"][row][in_context], max_answer_length)
            word_of_piece = np.repeat(np.arange(len(words[row])), pieces_per_word[row])
            answers.append(context[words[row][word_of_piece[start]][0]:
                                   words[row][word_of_piece[end]][1]])
        return answers


def best_span(start_logits: np.ndarray, end_logits: np.ndarray,
              max_answer_length: int) -> tuple[int, int]:
    """(start, end) maximizing start + end logits with start <= end < start + max length."""
    scores = start_logits[:, None] + end_logits[None, :]
    offsets = np.arange(len(end_logits))[None, :] - np.arange(len(start_logits))[:, None]
    scores = np.where((offsets >= 0) & (offsets < max_answer_length), scores, -np.inf)
    start, end = np.unravel_index(np.argmax(scores), scores.shape)
    return int(start), int(end)


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
    return ragged_words([_WORD.findall(context) for context in contexts])
