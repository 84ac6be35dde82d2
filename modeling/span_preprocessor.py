"""The span model's preprocessor: a question and its context in, windows and answer targets out.

The context is split into the SQuAD reader's words (`text.whitespace_words`)
and each word tokenized alone, as the SQuAD runner reads it. A context
longer than the room beside its question (cut to `max_query_length`
pieces) is read in windows `doc_stride` pieces apart, planned by the
runner's rule (`text.sliding_windows.question_windows`), so an answer past
the first window can be found (`BertSpanModel.predict_answers`) and trained
on.

An answer, SQuAD's `{"text", "answer_start"}` (or a `(text, answer_start)`
pair), is placed on its words and pieces as the runner places it
(`text.answer_targets`): every window of its context (128 pieces apart) is
a training row, with its example's weight, and a window without the whole
answer points at [CLS]. Those rows are packed when the answers are placed,
in Python, so the layer passes them through; `predict` packs the first
window of each (question, context) in the graph, counting what it cuts.
"""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
import tensorflow as tf

from core.arguments import check_integer, is_integer
from modeling.labels import as_list
from modeling.preprocessor import ragged_words
from modeling.task_preprocessor import TaskPreprocessor, with_targets
from modeling.text_arguments import check_rows, sample_weights
from text import truncation
from text.answer_spans import MAX_QUERY_LENGTH
from text.answer_targets import answer_pieces, answer_words, improve_answer_span, window_target
from text.sentence_pairs import pack_ids
from text.sliding_windows import DOC_STRIDE, question_windows
from text.whitespace_words import split_words, whitespace_words


@keras.saving.register_keras_serializable(package="bert")
class BertSpanPreprocessor(TaskPreprocessor):
    """(questions, contexts) and their answers -> a span model's windows and targets.

    Args:
      vocabulary: the WordPiece tokens, in id order.
      do_lower_case: lowercase and strip accents first (an uncased model).
      sequence_length: tokens per packed row: [CLS] question [SEP] context [SEP].
      **kwargs: Keras layer arguments (`name`).

    Examples:

    >>> preprocessor = BertSpanPreprocessor.from_pretrained("uncased_L-12_H-768_A-12", 32)
    >>> features, targets = preprocessor.text_columns(
    ...     (["who sleeps?"], ["john sleeps here"]), [{"text": "john", "answer_start": 0}])
    >>> int(targets["start_logits"][0]), int(targets["end_logits"][0])
    (5, 5)
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("name", "bert_span_preprocessor")
        super().__init__(*args, **kwargs)

    def call(self, x, y=None, sample_weight=None, training: bool = False):
        if isinstance(x, dict):  # training windows, packed when the answers were placed
            return with_targets(x, y, sample_weight)
        if not (isinstance(x, (tuple, list)) and len(x) == 2):
            raise TypeError("x: a span preprocessor takes (questions, contexts) or packed "
                            f"windows (a dict), got {type(x).__name__}")
        questions, contexts = x
        if not isinstance(contexts, tf.RaggedTensor):  # whole contexts: the reader's words
            contexts = split_words(tf.convert_to_tensor(contexts, tf.string))[0]
        return self.pack_question_words(questions, contexts)[0]

    def text_columns(self, x, y=None, sample_weight=None, argument: str = "x") -> tuple:
        """Without answers: (questions, context words). With them: each context's windows,
        packed, their start and end targets and their examples' weights."""
        questions, contexts = questions_and_contexts(x)
        weights = sample_weights(sample_weight, argument)
        check_rows(len(questions), None, weights)
        if y is None:
            inputs = (tf.constant(questions, tf.string),
                      ragged_words([whitespace_words(context)[0] for context in contexts]))
            return tuple(column for column in (inputs, weights) if column is not None)
        answers = _answers(y, contexts, "y" if argument == "x" else argument)
        plan = self.windows(questions, contexts, self.query_limit(None), DOC_STRIDE)
        answer_ids = self.tokenizer.tokenize_batch(
            tf.constant([text for text, _ in answers], tf.string))[0].to_list()
        targets = [self._answer_target(plan, row, words, ids)
                   for row, ((_, words), ids) in enumerate(zip(answers, answer_ids))]
        positions = np.asarray([window_target(targets[row], start, length, offset)
                                for (row, start, length, _), offset
                                in zip(plan.windows, plan.offsets)], np.int32).reshape(-1, 2)
        inputs = {key: tf.constant(value, tf.int32) for key, value in plan.packed.items()}
        labels = {"start_logits": tf.constant(positions[:, 0]),
                  "end_logits": tf.constant(positions[:, 1])}
        if weights is None:
            return inputs, labels
        return inputs, labels, tf.gather(weights, [row for row, *_ in plan.windows])

    def _answer_target(self, plan: "SpanWindows", row: int, word_span: tuple[int, int],
                       answer_ids: list[int]) -> tuple[int, int]:
        """The answer's first and last context pieces, as the runner improves them."""
        first_word, last_word = word_span
        inverse = self.tokenizer.inv_vocab
        pieces = [inverse[piece] for piece in plan.piece_ids[row]]
        first_pieces = np.searchsorted(plan.piece_words[row], np.arange(len(plan.words[row])))
        start, end = answer_pieces(first_pieces.tolist(), len(pieces), first_word, last_word)
        return improve_answer_span(pieces, start, end, [inverse[piece] for piece in answer_ids])

    def truncation(self, inputs) -> str | None:
        if isinstance(inputs, dict):  # training windows cover each context whole
            return None
        questions, context_words = inputs
        return truncation.contexts_cut(self.tokenizer, questions, context_words,
                                       self.sequence_length)

    def query_limit(self, max_query_length: int | None) -> int:
        """`max_query_length` checked against the room in `sequence_length` (None: default)."""
        most = self.sequence_length - 4  # [CLS] [SEP] [SEP] and one context piece
        if max_query_length is None:
            return min(MAX_QUERY_LENGTH, most)
        max_query_length = check_integer("max_query_length", max_query_length)
        if max_query_length > most:
            raise ValueError(
                f"max_query_length={max_query_length} leaves no room for the context in "
                f"sequence_length={self.sequence_length} positions ([CLS] "
                f"question [SEP] context [SEP]): give at most {most}")
        return max_query_length

    def windows(self, questions: list[str], contexts: list[str], max_query_length: int,
                doc_stride: int) -> "SpanWindows":
        """Every window of every context beside its question, packed, as the runner plans them."""
        words = [whitespace_words(context)[0] for context in contexts]
        question_ids = self.tokenizer.tokenize_batch(tf.constant(questions, tf.string))[0]
        ragged = ragged_words(words)
        word_pieces = tf.RaggedTensor.from_row_splits(
            self.tokenizer.tokenize_batch(ragged.flat_values)[0], ragged.row_splits)
        piece_ids = word_pieces.merge_dims(1, 2).to_list()
        piece_words = [np.repeat(np.arange(len(counts)), counts).tolist()
                       for counts in word_pieces.row_lengths(axis=2).to_list()]
        plan = SpanWindows(words, piece_ids, piece_words, [], [], {})
        ids_a, ids_b = [], []
        for row, (question, context) in enumerate(zip(question_ids.to_list(), piece_ids)):
            query = question[:max_query_length]
            spans, owned = question_windows(len(query), len(context), self.sequence_length,
                                            doc_stride)
            for (start, size), mine in zip(spans or [(0, 0)], owned or [np.zeros(0, bool)]):
                plan.windows.append((row, start, size, mine))
                plan.offsets.append(len(query) + 2)
                ids_a.append(query)
                ids_b.append(context[start:start + size])
        plan.packed = pack_ids(ids_a, ids_b, self.sequence_length, self.tokenizer.cls_id,
                               self.tokenizer.sep_id)
        return plan


@dataclasses.dataclass
class SpanWindows:
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


def questions_and_contexts(x) -> tuple[list[str], list[str]]:
    """(questions, contexts) as lists of str, from columns or rows of pairs; else refused."""
    if isinstance(x, list) and x and all(isinstance(row, (tuple, list)) for row in x):
        x = tuple(zip(*x))
    if not isinstance(x, tuple) or len(x) != 2 or not all(
            isinstance(column, (list, tuple, np.ndarray)) for column in x):
        raise ValueError("span models take (questions, contexts), each a list of str, or rows "
                         f"of (question, context) pairs; got {_described(x)}")
    questions, contexts = list(x[0]), list(x[1])
    if len(questions) != len(contexts):
        raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts")
    for name, texts in (("questions", questions), ("contexts", contexts)):
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"{name}[{index}] is {text!r}, not a str")
    return questions, contexts


def _described(x) -> str:
    """What was given instead of (questions, contexts), for a message: its kinds, not its text."""
    if isinstance(x, tuple):
        return f"a tuple of {', '.join(type(column).__name__ for column in x) or 'nothing'}"
    return f"a {type(x).__name__}"


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
