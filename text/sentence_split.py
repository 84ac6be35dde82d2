"""A small rule-based English sentence splitter for building corpora.

The pre-training data format wants one sentence per line, because the
next-sentence task cuts documents at sentence boundaries. A statistical
splitter would add a dependency for little gain on edited prose such as
Wikipedia and news, so the rule is simple and written down here:

A sentence ends at `.`, `!` or `?` (possibly repeated, possibly followed by
closing quotes or brackets) when whitespace follows and the next word starts
with an uppercase letter or a digit, optionally after opening quotes or
brackets. It does not end there when the word carrying the period is

- a known abbreviation (`Mr.`, `Dr.`, `St.`, `No.`, `vol.`, `Jan.`, ...),
- a dotted abbreviation (`e.g.`, `i.e.`, `U.S.`, `a.m.`: a period inside
  the word), or
- a single letter (an initial, as in `J. R. R. Tolkien`).

Numbers such as `3.5` never split, since no whitespace follows their
period. The known failure is a sentence that really ends with such an
abbreviation (`... in the U.S. The ...`): it stays joined to the next one.
"""

from __future__ import annotations

import re

# Abbreviations that are usually followed by a capitalised word or a number
# inside a sentence (titles, references, months), compared in lower case
# without the final period.
ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "ft", "rev", "hon", "gen", "col",
    "lt", "capt", "cmdr", "adm", "sgt", "gov", "sen", "rep", "pres", "messrs", "mme", "mlle",
    "no", "nos", "vol", "vols", "p", "pp", "ch", "chap", "fig", "figs", "sec", "art", "ed",
    "eds", "trans", "op", "cf", "ca", "c", "approx", "est", "vs", "viz", "al", "inc", "ltd",
    "co", "corp", "bros", "dept", "univ", "assn", "jan", "feb", "mar", "apr", "jun", "jul",
    "aug", "sep", "sept", "oct", "nov", "dec", "ave", "blvd", "rd",
})
CLOSING = "\"'”’»)]"
OPENING = "\"'“‘«(["

_CANDIDATE = re.compile(r"[.!?]+[%s]*(?=\s)" % re.escape(CLOSING))
_WORD_BEFORE = re.compile(r"(\S+)$")


def split_sentences(text: str) -> list[str]:
    """Splits a paragraph into sentences; whitespace inside them is kept as is."""
    sentences = []
    start = 0
    for match in _CANDIDATE.finditer(text):
        end = match.end()
        if _starts_sentence(text, end) and not _is_abbreviation(text, match):
            sentence = text[start:end].strip()
            if sentence:
                sentences.append(sentence)
            start = end
    rest = text[start:].strip()
    if rest:
        sentences.append(rest)
    return sentences


def _starts_sentence(text: str, position: int) -> bool:
    """Whether the next word after `position` looks like a sentence start."""
    rest = text[position:].lstrip()
    rest = rest.lstrip(OPENING)
    return bool(rest) and (rest[0].isupper() or rest[0].isdigit())


def _is_abbreviation(text: str, match: re.Match) -> bool:
    """Whether the period ending `match` belongs to an abbreviation."""
    if not match.group().startswith("."):
        return False
    word = _WORD_BEFORE.search(text, 0, match.end())
    token = word.group(1) if word else ""
    if len(match.group().rstrip(CLOSING)) > 1:  # "..." or ".?" ends a sentence
        return False
    token = token.rstrip(CLOSING).removesuffix(".").lstrip(OPENING)
    if not token:
        return False
    if "." in token:
        return True
    if len(token) == 1 and token.isalpha():
        return True
    return token.lower() in ABBREVIATIONS
