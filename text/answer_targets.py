"""Where a training answer lies: its characters -> its words -> its WordPieces -> each window's.

A SQuAD answer is given as text and the offset of its first character in
the context (`answer_start`). Its words are the reader's whitespace words
(`text.whitespace_words`) holding its first and last characters; the
offset is trusted only when those words contain the answer text
(whitespace normalized), as in the original reader. Its pieces are those
words' pieces narrowed to the improved span, and in each window the target
is its positions when the window holds it whole, else [CLS] (0, 0), as the
original trained. The SQuAD reader and features (`data_prep.datasets`) and
the span model's `fit` on raw text (`modeling.span_preprocessor`) use these rules.
"""

from __future__ import annotations

from collections.abc import Sequence


def answer_words(words: Sequence[str], char_to_word: Sequence[int], text: str,
                 answer_start: int) -> tuple[int, int] | None:
    """(first word, last word) of the answer `text` at `answer_start`; None when not there.

    Args:
      words, char_to_word: the context as `text.whitespace_words.whitespace_words` splits it.
      text: the answer.
      answer_start: the offset of its first character in the context.
    """
    last_char = answer_start + len(text) - 1
    expected = " ".join(text.split())
    if not expected or not 0 <= answer_start <= last_char < len(char_to_word):
        return None
    first, last = max(char_to_word[answer_start], 0), char_to_word[last_char]
    return (first, last) if expected in " ".join(words[first:last + 1]) else None


def answer_pieces(first_pieces: Sequence[int], num_pieces: int, first_word: int,
                  last_word: int) -> tuple[int, int]:
    """The pieces (first, last) of words `first_word` to `last_word`.

    Args:
      first_pieces: the index of each word's first piece.
      num_pieces: the context's pieces.
      first_word, last_word: the answer's words.
    """
    end = first_pieces[last_word + 1] - 1 if last_word + 1 < len(first_pieces) else num_pieces - 1
    return first_pieces[first_word], end


def improve_answer_span(doc_pieces: Sequence[str], start: int, end: int,
                        answer_pieces: Sequence[str]) -> tuple[int, int]:
    """The sub-span of [start, end] whose pieces are exactly the answer's, else (start, end).

    Answers are given on whitespace words, but WordPiece splits words
    further: for the answer "1990" in the word "(1990)", the word span
    covers `( 1990 )` while the answer is the single piece `1990`. Starts
    are tried left to right and, for each, ends right to left; the first
    match wins, so a repeated answer resolves to its leftmost copy.
    """
    wanted = " ".join(answer_pieces)
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if " ".join(doc_pieces[new_start:new_end + 1]) == wanted:
                return new_start, new_end
    return start, end


def window_target(target: tuple[int, int] | None, window_start: int, window_length: int,
                  offset: int) -> tuple[int, int]:
    """The answer's positions in a window whose first context piece sits at `offset`.

    Args:
      target: the answer's first and last context pieces; None for no answer.
      window_start, window_length: the window's context pieces.
      offset: the position of the window's first context piece ([CLS] question [SEP]).

    Returns:
      the positions, or [CLS]'s (0, 0) when the window does not hold the whole answer.
    """
    if target is None or not window_start <= target[0] <= target[1] < window_start + window_length:
        return 0, 0
    return target[0] - window_start + offset, target[1] - window_start + offset
