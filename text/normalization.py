"""The original BERT BasicTokenizer's text normalization, as TensorFlow string ops.

Google's `BasicTokenizer` (google-research/bert, `tokenization.py`) does, per
text: delete U+0000, U+FFFD and every control character (categories Cc and
Cf, except tab, newline and carriage return); turn tab, newline, carriage
return and space separators (Zs) into spaces; put spaces around CJK
ideographs; split on whitespace; for uncased models lowercase each word with
Python's `str.lower()`, decompose it (NFD) and drop nonspacing marks (Mn);
finally split every punctuation character (ASCII 33-47, 58-64, 91-96,
123-126 and Unicode P*) off as a word of its own.

tensorflow-text's fast WordPiece tokenizer, run end to end, already splits
text on exactly the original's whitespace (tab, newline, carriage return,
Zs, and U+2028/U+2029, which Python's `str.split()` also splits on), on the
same punctuation, and around the same CJK ranges; this was checked against
the original for every Unicode code point. What it does not do is the
rest, and its stock `lower_case_nfd_strip_accents` option lowercases with
NFKC case folding instead, which differs on final sigma, ß, ligatures,
superscripts, full-width letters and more. `normalize` therefore does
only the remaining steps, in the original's order:

1. delete NUL, U+FFFD, Cc (but tab, newline, carriage return) and Cf;
2. uncased only: ICU full lowercasing (`tf.strings.lower` with UTF-8), which
   applies the same context rule for final sigma as Python's `str.lower()`,
   then NFD, then delete Mn.

Deleting comes before lowercasing because a deleted control character
would otherwise stand between a sigma and the next letter and change
whether it is final. Whitespace is left as it is: rewriting every space to
a space cost as much time as the WordPiece step and changes nothing.

The deleted classes are built from the running Python's `unicodedata`, as
the original's checks are, rather than from the regex engine's `\\p{..}`
tables, which follow a newer Unicode version than Python 3.11 (14.0).
Left over are characters that Unicode 14 does not assign at all: ICU may
see some of them as punctuation or decompose them, and its lowercase table
lacks a few letters added in Unicode 14 (e.g. U+2C2F); none occur in the
golden corpus.

`split_words` gives the words of the original's BasicTokenizer (before
WordPiece), for tools that count words, such as vocabulary learning.
"""

from __future__ import annotations

import functools
import unicodedata

import tensorflow as tf
import tensorflow_text as tf_text

_KEPT_CONTROLS = frozenset("\t\n\r")
_ASCII_PUNCTUATION = ((33, 47), (58, 64), (91, 96), (123, 126))
# Code points the original treats as CJK ideographs (`_is_chinese_char`).
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


_ASCII_ONLY = "[\\x00-\\x7F]*"  # a character class: newlines too; not invalid UTF-8
_ASCII_REMOVED = "[\\x00-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F]"  # Cc but tab, newline, return

# Planes 4-13 are unassigned and planes 15-16 are private use (Co) in every
# Unicode version so far, so they hold no character of the classes below.
_SCANNED_PLANES = (range(0x0, 0x40000), range(0xE0000, 0xF0000))


@functools.cache
def _classes() -> dict[str, str]:
    """RE2 character classes for the original's categories, from `unicodedata`.

    One pass over the assigned planes (about 0.3 s), done once per process.
    """
    members: dict[str, list[int]] = {"removed": [0xFFFD], "marks": [], "punctuation": [],
                                     "whitespace": [ord(" "), *map(ord, _KEPT_CONTROLS)]}
    for plane in _SCANNED_PLANES:
        for code, category in zip(plane, map(unicodedata.category, map(chr, plane))):
            if category in ("Cc", "Cf"):
                if chr(code) not in _KEPT_CONTROLS:
                    members["removed"].append(code)
            elif category == "Mn":
                members["marks"].append(code)
            elif category[0] == "P":
                members["punctuation"].append(code)
            elif category in ("Zs", "Zl", "Zp"):  # Python's str.split() splits on Zl, Zp too
                members["whitespace"].append(code)
    for low, high in _ASCII_PUNCTUATION:
        members["punctuation"].extend(range(low, high + 1))
    for low, high in CJK_RANGES:
        members["punctuation"].extend(range(low, high + 1))  # split off like punctuation
    return {name: _character_class(codes) for name, codes in members.items()}


def _character_class(codes: list[int]) -> str:
    """`[\\x{..}-\\x{..}...]` for a set of code points, as runs of consecutive ones."""
    parts, codes = [], sorted(set(codes))
    start = previous = codes[0]
    for code in [*codes[1:], None]:
        if code is not None and code == previous + 1:
            previous = code
            continue
        parts.append(f"\\x{{{start:X}}}" if start == previous
                     else f"\\x{{{start:X}}}-\\x{{{previous:X}}}")
        if code is not None:
            start = previous = code
    return "[" + "".join(parts) + "]"


def normalize(texts: tf.Tensor, lower_case: bool) -> tf.Tensor:
    """The original's character cleanup (and, uncased, lowercasing and accent removal).

    `texts` is a string tensor of any shape holding UTF-8; whitespace, CJK
    and punctuation splitting are left to the WordPiece step (see module doc).
    Texts that are pure ASCII (nine lines in ten of English prose) take a
    shortcut that gives the same result at a third of the cost: their only
    Cc/Cf characters are the ASCII controls, their lowercase is ASCII's,
    and they have nothing to decompose and no marks.
    """
    flat = tf.reshape(texts, [-1])
    wide = tf.cast(tf.logical_not(tf.strings.regex_full_match(flat, _ASCII_ONLY)), tf.int32)
    ascii_texts, other_texts = tf.dynamic_partition(flat, wide, 2)
    ascii_texts = tf.strings.regex_replace(ascii_texts, _ASCII_REMOVED, "")
    if lower_case:
        ascii_texts = tf.strings.lower(ascii_texts)
    positions = tf.dynamic_partition(tf.range(tf.size(flat)), wide, 2)
    merged = tf.dynamic_stitch(positions, [ascii_texts, _normalize_unicode(other_texts,
                                                                           lower_case)])
    return tf.reshape(merged, tf.shape(texts))


def _normalize_unicode(texts: tf.Tensor, lower_case: bool) -> tf.Tensor:
    """`normalize` for any UTF-8 text: the steps listed in the module docstring."""
    classes = _classes()
    texts = tf.strings.regex_replace(texts, classes["removed"], "")
    if lower_case:
        texts = tf.strings.lower(texts, encoding="utf-8")
        texts = tf_text.normalize_utf8(texts, "NFD")
        texts = tf.strings.regex_replace(texts, classes["marks"], "")
    return texts


def split_words(texts: tf.Tensor, lower_case: bool) -> tf.RaggedTensor:
    """The original BasicTokenizer's words: [N] strings -> [N, (words)] strings.

    Splits the normalized text on whitespace and puts every punctuation
    character and CJK ideograph into a word of its own.
    """
    classes = _classes()
    return tf_text.regex_split(
        normalize(texts, lower_case),
        delim_regex_pattern=f"{classes['whitespace']}+|{classes['punctuation']}",
        keep_delim_regex_pattern=classes["punctuation"])
