"""Words as the original SQuAD reader splits a text: on five whitespace characters only.

Google's run_squad.py splits a context into words on space, tab, carriage
return, line feed and U+202F NARROW NO-BREAK SPACE; every other character
belongs to a word, U+00A0 NO-BREAK SPACE and U+3000 IDEOGRAPHIC SPACE
included. The answer offsets of a SQuAD file are mapped onto these words,
and each word is tokenized on its own, so the rule decides which spans an
answer can take. The BasicTokenizer then treats U+00A0 and U+3000 as
spaces inside the word (they are Zs): "5\u00a0km" is one word of two
tokens, and a word made of such characters alone ("\u3000") has no token,
so it takes no position in the model's input (as in the original).

One rule, three uses: the reader (`data_prep.datasets.squad`), the span
model's raw-text answers (`modeling.span_preprocessor`) and the SavedModels that
split raw text in the graph (`export.serving_span`, `export.serving_tagging`).
tensorflow-text's `WhitespaceTokenizer` would split on every Unicode space
instead, and it leaves the first bytes of a multi-byte one (U+2028, U+0085)
at the end of the word before it.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_text as tf_text

WHITESPACE = " \t\r\n\u202f"
_WHITESPACE_RUN = f"[{WHITESPACE}]+"  # as RE2 reads it, in the graph


def whitespace_words(text: str) -> tuple[list[str], list[int]]:
    """(words, word index of each character); whitespace belongs to the word before it.

    Leading whitespace maps to -1, as no word precedes it.
    """
    words: list[str] = []
    char_to_word: list[int] = []
    after_space = True
    for char in text:
        if char in WHITESPACE:
            after_space = True
        elif after_space:
            words.append(char)
            after_space = False
        else:
            words[-1] += char
        char_to_word.append(len(words) - 1)
    return words, char_to_word


def split_words(texts: tf.Tensor) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor]:
    """In the graph: [batch] strings -> words [batch, (words)] and their start and end bytes."""
    return tf_text.regex_split_with_offsets(texts, _WHITESPACE_RUN)
