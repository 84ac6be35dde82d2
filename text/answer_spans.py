"""Start and end logits -> an answer span -> the answer's text, as the original run_squad.py.

Spans. Of a window's logits, the `n_best_size` highest starts and the
`n_best_size` highest ends (over all its positions, the lower position
first on a tie, as Python's stable sort) are paired. A pair is a candidate
when its start may begin an answer (a context token, in the window where
it has its maximum context: `text.sliding_windows`), its end may close one
(a context token) and start <= end < start + `max_answer_length`.
Candidates rank by start logit + end logit.

Text. A span of WordPieces stands for part of the whitespace words
(`text.whitespace_words`) it falls in: "steve smith" are the pieces of
"Steve Smith's" up to the possessive. The original's `get_final_text`
finds the pieces' text in the BasicTokenizer's words of those whitespace
words joined by single spaces, and maps its ends back through both texts
with spaces removed, which works where the two then have the same length.
Where they do not (an accent stripped or a control character deleted by
normalization, a U+00A0 or U+3000 inside a word, which the BasicTokenizer
drops as a space) or the pieces are not found (an [UNK] among them), the
answer is the whole words. Either way the answer is cut from the words
joined by single spaces, whatever whitespace stood between them.

The runner's post-processing (`tasks.squad_predictions`) and the span
model's `predict_answers` (`modeling.span_model`) decode with the Python
functions; the QA SavedModel (`export.serving_span`), which has no Python,
with their graph twins `best_spans` and `final_texts`, which tests hold to
them. One difference: on an exact tie of two spans' scores the graph keeps
the lower start, the original the one listed first (by start, then end logit).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Container, Iterable, Sequence

import numpy as np
import tensorflow as tf

from text import normalization

N_BEST_SIZE = 20  # the original's --n_best_size: starts and ends paired per window
MAX_ANSWER_LENGTH = 30  # the original's --max_answer_length, in WordPieces
MAX_QUERY_LENGTH = 64  # the original's --max_query_length: question WordPieces kept
_BATCH = 4096  # texts re-tokenized per graph call


@dataclasses.dataclass(frozen=True)
class Span:
    """Window positions `start` to `end` (inclusive) and their logits."""

    start: int
    end: int
    start_logit: float
    end_logit: float

    @property
    def score(self) -> float:
        return self.start_logit + self.end_logit


def candidate_spans(start_logits: np.ndarray, end_logits: np.ndarray, starts: Container[int],
                    ends: Container[int], n_best_size: int, max_answer_length: int
                    ) -> list[Span]:
    """A window's candidate spans, in the original's order (by start, then end logit rank).

    Args:
      start_logits, end_logits: the window's logits [positions].
      starts: the positions an answer may start at.
      ends: the positions an answer may end at.
      n_best_size: the highest starts and ends paired.
      max_answer_length: the longest span, in positions.
    """
    start_logits = np.asarray(start_logits, dtype=np.float64)
    end_logits = np.asarray(end_logits, dtype=np.float64)
    spans = []
    for start in _top(start_logits, n_best_size):
        if start not in starts:
            continue
        for end in _top(end_logits, n_best_size):
            if end in ends and start <= end < start + max_answer_length:
                spans.append(Span(start, end, float(start_logits[start]),
                                  float(end_logits[end])))
    return spans


def _top(logits: np.ndarray, count: int) -> list[int]:
    """Positions of the `count` highest logits, the lower position first on a tie."""
    return np.argsort(-logits, kind="stable")[:count].tolist()


def pieces_text(pieces: Sequence[str]) -> str:
    """WordPieces as text: "##" joins undone, spaces single (the original's `tok_text`)."""
    return " ".join(" ".join(pieces).replace(" ##", "").replace("##", "").split())


class BasicWords:
    """Texts re-tokenized by the BasicTokenizer, batched into few graph calls and cached.

    One call per text would cost a graph call per n-best entry; instead the
    likely texts of all examples are tokenized up front in large batches.
    """

    def __init__(self, lower_case: bool):
        self._cache: dict[str, str] = {}
        self._lower_case = lower_case

    def prefetch(self, texts: Iterable[str]) -> None:
        new = [text for text in dict.fromkeys(texts) if text not in self._cache]
        for begin in range(0, len(new), _BATCH):
            chunk = new[begin:begin + _BATCH]
            joined = _joined_words_function(self._lower_case)(tf.constant(chunk, tf.string))
            for text, words in zip(chunk, joined.numpy().tolist()):
                self._cache[text] = words.decode("utf-8")

    def get(self, text: str) -> str:
        """The BasicTokenizer words of `text`, joined by spaces."""
        if text not in self._cache:
            self.prefetch([text])
        return self._cache[text]


def _joined_words(texts: tf.Tensor, lower_case: bool) -> tf.Tensor:
    """The BasicTokenizer words of each text, joined by single spaces."""
    return tf.strings.reduce_join(normalization.split_words(texts, lower_case), axis=1,
                                  separator=" ")


@functools.cache
def _joined_words_function(lower_case: bool) -> tf.types.experimental.PolymorphicFunction:
    """`_joined_words` as one traced graph per casing."""
    return tf.function(lambda texts: _joined_words(texts, lower_case),
                       input_signature=[tf.TensorSpec([None], tf.string)])


def get_final_text(pred_text: str, orig_text: str, do_lower_case: bool) -> str:
    """The part of `orig_text` that the WordPiece text `pred_text` stands for (else all of it)."""
    return final_text(pred_text, orig_text, BasicWords(do_lower_case).get(orig_text))


def final_text(pred_text: str, orig_text: str, tokenized: str) -> str:
    """`get_final_text` given `tokenized`, the BasicTokenizer's words of `orig_text`.

    Both texts are compared with spaces removed; this only works when they
    then have the same length (normalization changed no character count),
    so a character's position in one is its position in the other.
    """
    start = tokenized.find(pred_text)
    if start < 0 or not pred_text:
        return orig_text
    end = start + len(pred_text) - 1
    if (len(orig_text) - orig_text.count(" ") != len(tokenized) - tokenized.count(" ")
            or " " in (tokenized[start], tokenized[end])):
        return orig_text
    orig_positions = [i for i, char in enumerate(orig_text) if char != " "]
    # The rank of a character among the non-spaces is its position less the spaces before it.
    first = orig_positions[start - tokenized.count(" ", 0, start)]
    last = orig_positions[end - tokenized.count(" ", 0, end)]
    return orig_text[first:last + 1]


def best_spans(start_logits: tf.Tensor, end_logits: tf.Tensor, starts: tf.Tensor,
               ends: tf.Tensor, n_best_size: int, max_answer_length: int
               ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """`candidate_spans`' best, in the graph, for a batch of windows.

    Args:
      start_logits, end_logits: [batch, positions].
      starts: [batch, positions] bool, where an answer may start (the context's
        tokens the window holds with their maximum context).
      ends: [batch, positions] bool, where an answer may end (the context's tokens).
      n_best_size, max_answer_length: as for `candidate_spans`.

    Returns:
      (start, end) int32 [batch], their score (float64) and whether the row has a candidate.
    """
    positions = tf.shape(start_logits)[1]

    def in_top(logits: tf.Tensor, allowed: tf.Tensor) -> tf.Tensor:
        _, best = tf.math.top_k(logits, tf.minimum(n_best_size, positions))  # ties: lower first
        return tf.reduce_any(tf.one_hot(best, positions, on_value=True, off_value=False,
                                        dtype=tf.bool), axis=1) & allowed

    start_logits = tf.cast(start_logits, tf.float64)
    end_logits = tf.cast(end_logits, tf.float64)
    position = tf.range(positions)
    length = position[None, None, :] - position[None, :, None]  # end - start
    valid = (in_top(start_logits, starts)[:, :, None] & in_top(end_logits, ends)[:, None, :]
             & (length >= 0) & (length < max_answer_length))
    scores = tf.where(valid, start_logits[:, :, None] + end_logits[:, None, :],
                      tf.constant(-np.inf, tf.float64))
    flat = tf.reshape(scores, [-1, positions * positions])
    best = tf.argmax(flat, axis=1, output_type=tf.int32)
    has_span = tf.reduce_any(tf.reshape(valid, [-1, positions * positions]), axis=1)
    return best // positions, best % positions, tf.reduce_max(flat, axis=1), has_span


def pieces_texts(pieces: tf.RaggedTensor) -> tf.Tensor:
    """`pieces_text` in the graph: [batch, (pieces)] strings -> [batch]."""
    text = tf.strings.reduce_join(pieces, axis=1, separator=" ")
    text = tf.strings.regex_replace(tf.strings.regex_replace(text, " ##", ""), "##", "")
    return tf.strings.strip(tf.strings.regex_replace(text, " +", " "))


def final_texts(pred_text: tf.Tensor, orig_text: tf.Tensor, lower_case: bool
                ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """`get_final_text` in the graph: [batch] texts -> the answers [batch] and the positions
    of their first and last characters in `orig_text` (int64 [batch])."""
    tokenized = _joined_words(orig_text, lower_case)
    found = _find(tokenized, pred_text)
    prefix = tf.strings.substr(tokenized, tf.zeros_like(found), tf.maximum(found, 0))
    orig_chars, char_bytes = tf.strings.unicode_decode_with_offsets(orig_text, "UTF-8")
    chars = orig_chars.row_lengths()
    same_length = chars - _spaces(orig_text) == _length(tokenized) - _spaces(tokenized)
    aligned = (found >= 0) & (pred_text != "") & same_length
    first_rank = _length(prefix) - _spaces(prefix)
    last_rank = first_rank + _length(pred_text) - _spaces(pred_text) - 1
    # Each character's position, among the non-spaces only.
    non_spaces = tf.ragged.boolean_mask(tf.ragged.range(chars), orig_chars != ord(" "))
    first = tf.where(aligned, _at(non_spaces, first_rank), tf.zeros_like(chars))
    last = tf.where(aligned, _at(non_spaces, last_rank), chars - 1)
    # Cut by bytes, so that bytes that are not UTF-8 come out as they went in.
    start_byte = _at(char_bytes, first)
    end_byte = tf.where(last + 1 < chars, _at(char_bytes, last + 1),
                        tf.cast(tf.strings.length(orig_text), tf.int64))
    answer = tf.strings.substr(orig_text, start_byte, tf.maximum(end_byte - start_byte, 0))
    return tf.where(chars > 0, answer, ""), first, last


def _at(rows: tf.RaggedTensor, index: tf.Tensor) -> tf.Tensor:
    """rows[row, index[row]] for each row, `index` clipped to the row's entries (0 if none)."""
    table = tf.pad(rows.to_tensor(0), [[0, 0], [0, 1]])
    last = tf.maximum(rows.row_lengths() - 1, 0)
    return tf.gather(table, tf.clip_by_value(index, 0, last), batch_dims=1)


def _length(texts: tf.Tensor) -> tf.Tensor:
    """Characters per text (Python's `len`), int64."""
    return tf.strings.unicode_decode(texts, "UTF-8").row_lengths()


def _spaces(texts: tf.Tensor) -> tf.Tensor:
    """Spaces (" ") per text, int64."""
    return tf.cast(tf.strings.length(texts) - tf.strings.length(
        tf.strings.regex_replace(texts, " ", "")), tf.int64)


def _find(texts: tf.Tensor, parts: tf.Tensor) -> tf.Tensor:
    """`text.find(part)` in bytes for each row, -1 where `part` is not in `text` or is empty."""
    def find(pair: tf.Tensor) -> tf.Tensor:
        # NUL never survives normalization: an empty part is sought as one, found nowhere.
        part = tf.where(pair[1] == "", "\0", pair[1])
        split = tf.raw_ops.StringSplitV2(input=pair[:1], sep=part, maxsplit=1)
        before = tf.concat([split.values, [""]], axis=0)[0]
        return tf.where(tf.size(split.values) > 1, tf.strings.length(before), -1)

    return tf.map_fn(find, tf.stack([texts, parts], axis=1), fn_output_signature=tf.int32)
