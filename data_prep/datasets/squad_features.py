"""SQuAD examples -> fixed-length model inputs: `[CLS] question [SEP] window of context [SEP]`.

Three choices of the original BERT are kept, because predictions and
scores depend on them:

- The improved answer span. Answers are given on whitespace words, but
  WordPiece splits words further: for the answer "1990" in the word
  "(1990)", the word span covers `( 1990 )` while the answer is the single
  token `1990`. The target becomes the tightest sub-token span whose text
  equals the WordPiece tokenization of the answer (when there is one;
  `text.answer_targets`, shared with the span model's `fit`).
- Sliding windows. A context longer than the room left after the question
  is cut into windows of `max_seq_length - len(question) - 3` tokens, each
  starting `doc_stride` tokens after the previous one, so an answer cut
  by one window's edge lies whole in another.
- The max-context flag. A token seen in several windows is scored, at
  prediction time, only in the window where it has the most context
  (`text.sliding_windows`, shared with CoNLL tagging).

Training targets are token positions in the window; an answer not wholly
inside a window, and an impossible v2 question, point at [CLS] (0, 0).

Tokenization is batched: every distinct context word, question and answer
is tokenized once, through the tokenizer's graph-mode batch call (the
original called the tokenizer once per word, the bulk of its run time).
The pieces are the same, since the original too tokenized each whitespace
word on its own.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

import numpy as np

from core.arguments import FieldError
from core.record_schema import ENCODER_INPUTS
from data_prep.datasets.squad import SquadExample
from text.answer_targets import answer_pieces, improve_answer_span, window_target
from text.sentence_pairs import pack_ids
from text.sliding_windows import question_windows
from text.tokenization import FullTokenizer

FIRST_UNIQUE_ID = 1000000000


@dataclasses.dataclass
class InputFeatures:
    """One window of one example. Maps are keyed by position in `tokens`.

    `token_to_orig_map`: document token -> index in the example's
    `doc_tokens`; `token_is_max_context`: whether this window is the one
    where that token has the most context. Positions are None outside
    training.
    """

    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: list[str]
    token_to_orig_map: dict[int, int]
    token_is_max_context: dict[int, bool]
    input_ids: list[int]
    input_mask: list[int]
    segment_ids: list[int]
    start_position: int | None = None
    end_position: int | None = None
    is_impossible: bool = False


def tokenize_all(tokenizer: FullTokenizer, texts: Iterable[str]) -> dict[str, list[str]]:
    """WordPiece tokens of each distinct text (a context repeats for each of its questions)."""
    distinct = list(dict.fromkeys(texts))
    return dict(zip(distinct, tokenizer.tokenize_many(distinct)))


def convert_examples_to_features(examples: Sequence[SquadExample], tokenizer: FullTokenizer,
                                 max_seq_length: int, doc_stride: int, max_query_length: int,
                                 is_training: bool) -> list[InputFeatures]:
    """All windows of all examples, unique ids counting up from FIRST_UNIQUE_ID."""
    if doc_stride < 1 or max_query_length < 1:
        raise FieldError("{doc_stride} ({0}) and {max_query_length} ({1}) must be positive",
                         doc_stride, max_query_length)
    if max_seq_length - max_query_length - 3 < 1:
        raise FieldError("{max_seq_length} ({0}) leaves no room for the context after a "
                         "question of {max_query_length} ({1}) tokens and [CLS] [SEP] [SEP]",
                         max_seq_length, max_query_length)
    pieces = tokenize_all(tokenizer, (word for e in examples for word in e.doc_tokens))
    questions = tokenize_all(tokenizer, (example.question_text for example in examples))
    answers = (tokenize_all(tokenizer, (e.orig_answer_text for e in examples
                                        if not e.is_impossible)) if is_training else {})
    features: list[InputFeatures] = []
    document = _Document([], pieces, tokenizer.vocab)
    for example_index, example in enumerate(examples):
        if example.doc_tokens is not document.words:  # questions on one context share it
            document = _Document(example.doc_tokens, pieces, tokenizer.vocab)
        query = questions[example.question_text][:max_query_length]
        features.extend(_example_features(example, example_index, query, document, answers,
                                          tokenizer, max_seq_length, doc_stride, is_training,
                                          FIRST_UNIQUE_ID + len(features)))
    return features


class _Document:
    """A context's WordPiece tokens with the maps between them and its whitespace words."""

    def __init__(self, words: list[str], pieces: dict[str, list[str]], vocab: dict[str, int]):
        self.words = words
        self.pieces: list[str] = []
        self.piece_to_word: list[int] = []
        self.word_to_first_piece: list[int] = []
        for word_index, word in enumerate(words):
            self.word_to_first_piece.append(len(self.pieces))
            self.pieces.extend(pieces[word])
            self.piece_to_word.extend([word_index] * len(pieces[word]))
        self.ids = [vocab[piece] for piece in self.pieces]

    def answer_span(self, start_word: int, end_word: int, answer: list[str]) -> tuple[int, int]:
        """Pieces of the answer's words, narrowed to the improved span."""
        start, end = answer_pieces(self.word_to_first_piece, len(self.pieces), start_word,
                                   end_word)
        return improve_answer_span(self.pieces, start, end, answer)


def _example_features(example: SquadExample, example_index: int, query: list[str],
                      document: _Document, answers: dict[str, list[str]],
                      tokenizer: FullTokenizer, max_seq_length: int, doc_stride: int,
                      is_training: bool, first_id: int) -> list[InputFeatures]:
    target = None
    if is_training and not example.is_impossible:
        target = document.answer_span(example.start_position, example.end_position,
                                      answers[example.orig_answer_text])
    doc_pieces, piece_to_word = document.pieces, document.piece_to_word
    query_ids = tokenizer.convert_tokens_to_ids(query)
    spans, owned = question_windows(len(query), len(doc_pieces), max_seq_length, doc_stride)
    # Each window fits beside the question, so packing truncates nothing.
    packed = pack_ids([query_ids] * len(spans),
                      [document.ids[start:start + length] for start, length in spans],
                      max_seq_length, tokenizer.cls_id, tokenizer.sep_id)
    offset = len(query) + 2  # window token i sits at offset + i
    features = []
    for span_index, (span_start, span_length) in enumerate(spans):
        tokens = ["[CLS]", *query, "[SEP]", *doc_pieces[span_start:span_start + span_length],
                  "[SEP]"]
        positions = range(span_start, span_start + span_length)
        to_orig = {offset + i: piece_to_word[p] for i, p in enumerate(positions)}
        is_max = {offset + i: bool(mine) for i, mine in enumerate(owned[span_index])}
        feature = InputFeatures(
            unique_id=first_id + span_index, example_index=example_index,
            doc_span_index=span_index, tokens=tokens, token_to_orig_map=to_orig,
            token_is_max_context=is_max,
            input_ids=packed["input_ids"][span_index].tolist(),
            input_mask=packed["input_mask"][span_index].tolist(),
            segment_ids=packed["segment_ids"][span_index].tolist(),
            is_impossible=example.is_impossible if is_training else False)
        if is_training:
            feature.start_position, feature.end_position = window_target(
                target, span_start, span_length, offset)
        features.append(feature)
    return features


def features_to_arrays(features: Sequence[InputFeatures]) -> dict[str, np.ndarray]:
    """Model inputs and targets as arrays; positions are 0 where not set (prediction)."""
    def column(name: str, dtype: type) -> np.ndarray:
        values = [getattr(f, name) for f in features]
        return np.asarray([0 if v is None else v for v in values], dtype=dtype)

    arrays = {name: column(name, np.int32) for name in ENCODER_INPUTS}
    arrays["start_positions"] = column("start_position", np.int32)
    arrays["end_positions"] = column("end_position", np.int32)
    arrays["unique_ids"] = column("unique_id", np.int64)
    return arrays
