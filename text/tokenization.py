"""BERT's FullTokenizer (BasicTokenizer + WordPiece), computed in the TensorFlow graph.

Token ids are those of the original google-research/bert `FullTokenizer`
(checked on real news text and on tricky strings, uncased and cased; see
tests/text/test_tokenization.py), while the work runs as TensorFlow ops, so the
same object tokenizes inside `tf.data` and inside an exported SavedModel
that takes raw strings.

The pipeline: `normalization.normalize` (the original's character cleanup,
lowercasing and accent removal), then tensorflow-text's
`FastWordpieceTokenizer` run end to end, which splits words on whitespace,
punctuation and CJK ideographs as the original does and applies greedy
longest-match-first WordPiece with "##" continuations (a word that cannot
be covered becomes one [UNK]). Two gaps to the original are closed after it:

- tensorflow-text gives up on words over `max_bytes_per_word` bytes (100 by
  default), the original on words over 200 characters. The byte limit is
  raised to 200 characters of 4 bytes, and words of 201 characters or more
  are then folded to a single [UNK] here.
- Its output has no word index, which whole-word masking and labelling the
  first sub-token of each word need. A sub-token starts a word unless its
  vocabulary entry starts with "##" (a word never starts with "#", which is
  punctuation), so `word_ids` is a running count of word starts.

Text must be UTF-8. Bytes that are not make their word [UNK] (the original,
given bytes, dropped them); read files with `text_files.read_utf8_lines`,
which reports such bytes by file and line.
"""

from __future__ import annotations

import functools
from typing import Iterable, Sequence

import tensorflow as tf
import tensorflow_text as tf_text

from text import normalization
from text.text_files import read_utf8_lines

SUFFIX_INDICATOR = "##"
UNK_TOKEN = "[UNK]"
CLS_TOKEN, SEP_TOKEN, MASK_TOKEN = "[CLS]", "[SEP]", "[MASK]"
# Special tokens are required only by the uses that insert them, as in the original,
# whose own test vocabulary has no [MASK]; WordPiece itself always needs [UNK].
PACKING_TOKENS = (CLS_TOKEN, SEP_TOKEN)
PRETRAINING_TOKENS = (CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)
_USED_FOR = {UNK_TOKEN: "WordPiece (for words it cannot split)",
             CLS_TOKEN: "packing texts into model inputs",
             SEP_TOKEN: "packing texts into model inputs",
             MASK_TOKEN: "masking pre-training data"}
PAD_TOKEN = "[PAD]"
MAX_CHARS_PER_WORD = 200  # the original's max_input_chars_per_word
MAX_BYTES_PER_CHAR = 4
# A text that may hold a word over MAX_CHARS_PER_WORD: RE2's \S excludes only ASCII
# whitespace, so a run of \S is at least as long as any word of the original inside it.
_LONG_RUN = f"(?s).*\\S{{{MAX_CHARS_PER_WORD + 1}}}.*"


def load_vocab(vocab_file: str, required_tokens: Sequence[str] = ()) -> list[str]:
    """The vocabulary's tokens in id order: one per line, surrounding whitespace stripped.

    Blank lines at the end are ignored; elsewhere, blank lines and repeated
    entries are errors, since the original would give the following tokens
    ids that no longer match their line numbers (and the model's rows).
    [UNK] and `required_tokens` must be present.
    """
    tokens = [line.strip() for line in read_utf8_lines(vocab_file)]
    while tokens and not tokens[-1]:
        tokens.pop()
    check_vocab(tokens, vocab_file, required_tokens)
    return tokens


def check_vocab(tokens: Sequence[str], vocab_file: str,
                required_tokens: Sequence[str] = ()) -> None:
    """The checks of `load_vocab` on tokens already in memory; `vocab_file` names their source."""
    if not tokens:
        raise ValueError(f"vocab file {vocab_file} holds no tokens")
    blank = [index + 1 for index, token in enumerate(tokens) if not token]
    if blank:
        raise ValueError(f"vocab file {vocab_file} has blank lines: {_first(blank)}")
    first_line: dict[str, int] = {}
    repeats = []
    for line, token in enumerate(tokens, start=1):
        if token in first_line:
            repeats.append(f"{token!r} on lines {first_line[token]} and {line}")
        else:
            first_line[token] = line
    if repeats:
        raise ValueError(f"vocab file {vocab_file} repeats entries: {_first(repeats)}")
    for token in (UNK_TOKEN, *required_tokens):
        if token not in first_line:
            raise _missing_token(vocab_file, token)


def _missing_token(vocab_file: str, token: str) -> ValueError:
    return ValueError(f"vocab file {vocab_file} lacks {token}, which "
                      f"{_USED_FOR.get(token, 'this run')} needs")


def _first(items: Sequence[object], shown: int = 5) -> str:
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(map(str, items[:shown])) + more


def _tokenizer_graph(tokens: tuple[str, ...], do_lower_case: bool) -> _TokenizerGraph:
    """The traced tokenizer of `tokens` and casing, shared by every FullTokenizer of them.

    Compiling the vocabulary into tensorflow-text's matching automaton and
    tracing `tokenize_batch` take about 0.4 s even for a tiny vocabulary, and
    each preprocessor, task model and export makes a tokenizer; what they
    build holds no state, so one made eagerly serves them all. One made
    while a graph is being traced holds that graph's tensors and is not kept.
    """
    if tf.executing_eagerly():
        return _shared_tokenizer_graph(tokens, do_lower_case)
    return _TokenizerGraph(tokens, do_lower_case)


class FullTokenizer(tf.Module):
    """The original FullTokenizer's ids, as a trackable module with a graph-mode batch API.

    `tokenize_batch` runs a `tf.function` with a fixed signature, so the
    module can be attached to a SavedModel and called from
    `tf.data.Dataset.map`; tokenizers of one vocabulary and casing share it.
    `tokenize` and the conversions are the original's Python-side API.

    `required_tokens` are checked when the vocabulary is read, so a run
    fails before its work starts; the default suits every use that packs
    texts into model inputs. Pre-training data creation adds [MASK]
    (`PRETRAINING_TOKENS`).
    """

    def __init__(self, vocab_file: str, do_lower_case: bool = True, name: str | None = None,
                 required_tokens: Sequence[str] = PACKING_TOKENS,
                 tokens: Sequence[str] | None = None):
        super().__init__(name=name)
        if tokens is None:
            tokens = load_vocab(vocab_file, required_tokens)
        else:  # a vocabulary kept elsewhere (a Keras layer's config); `vocab_file` names it
            tokens = list(tokens)
            check_vocab(tokens, vocab_file, required_tokens)
        self.vocab_file = str(vocab_file)
        self.do_lower_case = bool(do_lower_case)
        self._index = _Vocabulary(tokens)
        self.unk_id = self._index.ids[UNK_TOKEN]
        # The original pads with id 0 whatever the vocabulary holds there.
        self.pad_id = self._index.ids.get(PAD_TOKEN, 0)
        self._graph = _tokenizer_graph(tuple(tokens), self.do_lower_case)

    def special_id(self, token: str) -> int:
        """The id of a special token; a clear error naming the vocabulary if it has none."""
        if token not in self._index.ids:
            raise _missing_token(self.vocab_file, token)
        return self._index.ids[token]

    @property
    def cls_id(self) -> int:
        return self.special_id(CLS_TOKEN)

    @property
    def sep_id(self) -> int:
        return self.special_id(SEP_TOKEN)

    @property
    def mask_id(self) -> int:
        return self.special_id(MASK_TOKEN)

    @property
    def vocab(self) -> dict[str, int]:
        """Token -> id, as the original's `vocab`."""
        return self._index.ids

    @property
    def inv_vocab(self) -> dict[int, str]:
        """Id -> token, as the original's `inv_vocab`."""
        return self._index.tokens_by_id

    @property
    def vocab_size(self) -> int:
        return len(self._index.ids)

    def __call__(self, texts: str | Sequence[str] | tf.Tensor) -> tf.Tensor | tf.RaggedTensor:
        """Token ids: [N, (tokens)] ragged for a batch of texts, [tokens] for one str.

        Calling the tokenizer is how Keras tokenizers are used; `tokenize_batch`
        also gives word indices, `tokenize` token strings.
        """
        if isinstance(texts, str):
            return self.tokenize_batch(tf.constant([texts]))[0][0]
        return self.tokenize_batch(tf.convert_to_tensor(texts, tf.string))[0]

    def tokenize(self, text: str) -> list[str]:
        """WordPiece tokens of one text, as the original `FullTokenizer.tokenize`."""
        if not isinstance(text, str):
            raise TypeError(f"tokenize() takes a str, got {type(text).__name__}")
        token_ids, _ = self.tokenize_batch(tf.constant([text.encode("utf-8")]))
        return self.convert_ids_to_tokens(token_ids.flat_values.numpy().tolist())

    def tokenize_many(self, texts: Sequence[str], batch_size: int = 4096) -> list[list[str]]:
        """WordPiece tokens of each text, `batch_size` texts per graph call.

        One call per text costs more in Python and TensorFlow dispatch than
        the tokenization itself; every loader that tokenizes a file goes
        through here.
        """
        pieces = self._index.tokens_by_id
        tokens: list[list[str]] = []
        for start in range(0, len(texts), batch_size):
            batch = [text.encode("utf-8") for text in texts[start:start + batch_size]]
            ids, _ = self.tokenize_batch(tf.constant(batch, dtype=tf.string))
            flat, splits = ids.flat_values.numpy().tolist(), ids.row_splits.numpy().tolist()
            tokens.extend([pieces[i] for i in flat[splits[row]:splits[row + 1]]]
                          for row in range(len(batch)))
        return tokens

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        ids = self._index.ids
        try:
            return [ids[token] for token in tokens]
        except KeyError as error:
            raise KeyError(f"token {error.args[0]!r} is not in the vocabulary") from None

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        tokens = self._index.tokens_by_id
        try:
            return [tokens[int(token_id)] for token_id in ids]
        except KeyError as error:
            raise KeyError(f"id {error.args[0]} is outside the vocabulary of {len(tokens)} "
                           "tokens") from None

    def tokenize_batch(self, texts: tf.Tensor) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
        """[N] UTF-8 strings -> (token ids [N, (tokens)], word index of each token) int32.

        Word indices count from 0 within each text, over the words of the
        original's BasicTokenizer (punctuation marks and CJK ideographs are
        words of their own); all sub-tokens of a word share its index.
        A `tf.function` with a fixed signature, traced once per vocabulary
        and casing in a process (`_TokenizerGraph`).
        """
        return self._graph.tokenize_batch(texts)


class _TokenizerGraph(tf.Module):
    """WordPiece and the tables `tokenize_batch` reads, with its trace: FullTokenizer's graph half."""

    def __init__(self, tokens: tuple[str, ...], do_lower_case: bool):
        super().__init__(name="tokenizer_graph")
        self.do_lower_case = do_lower_case
        self.unk_id = tokens.index(UNK_TOKEN)  # a vocabulary with repeats is refused when read
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=list(tokens), suffix_indicator=SUFFIX_INDICATOR,
            max_bytes_per_word=MAX_CHARS_PER_WORD * MAX_BYTES_PER_CHAR,
            token_out_type=tf.int32, unknown_token=UNK_TOKEN)
        self._continues_word = tf.constant(
            [token.startswith(SUFFIX_INDICATOR) for token in tokens], dtype=tf.bool)
        # Characters each piece covers in its word; [UNK] stands for a whole word
        # that tensorflow-text could not split, which stays [UNK] whatever its length.
        self._piece_chars = tf.constant(
            [0 if token == UNK_TOKEN else len(token.removeprefix(SUFFIX_INDICATOR))
             for token in tokens], dtype=tf.int32)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize_batch(self, texts: tf.Tensor) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
        normalized = normalization.normalize(texts, self.do_lower_case)
        token_ids = self._wordpiece.tokenize(normalized)
        flat_ids, row_splits = token_ids.flat_values, token_ids.row_splits
        starts_word = tf.logical_not(tf.gather(self._continues_word, flat_ids))
        # Counting each word's characters costs half as much as WordPiece itself; a
        # word over the limit needs a longer run of non-space characters, which is rare.
        may_hold_long_words = tf.reduce_any(tf.strings.regex_full_match(normalized, _LONG_RUN))
        flat_ids, row_splits, starts_word = tf.cond(
            may_hold_long_words,
            lambda: self._fold_long_words(flat_ids, row_splits, starts_word),
            lambda: (flat_ids, row_splits, starts_word))
        words_before = tf.concat([[0], tf.cumsum(tf.cast(starts_word, tf.int32))], axis=0)
        first_word_of_row = tf.gather(words_before, row_splits[:-1])
        word_ids = words_before[1:] - 1 - tf.repeat(first_word_of_row, row_splits[1:] - row_splits[:-1])
        return (tf.RaggedTensor.from_row_splits(flat_ids, row_splits, validate=False),
                tf.RaggedTensor.from_row_splits(word_ids, row_splits, validate=False))

    def _fold_long_words(self, flat_ids: tf.Tensor, row_splits: tf.Tensor,
                         starts_word: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Replaces each word over MAX_CHARS_PER_WORD characters by one [UNK], as the original."""
        word_of_token = tf.cumsum(tf.cast(starts_word, tf.int32)) - 1
        word_chars = tf.math.segment_sum(tf.gather(self._piece_chars, flat_ids), word_of_token)
        in_long_word = tf.gather(word_chars > MAX_CHARS_PER_WORD, word_of_token)
        keep = tf.logical_or(starts_word, tf.logical_not(in_long_word))
        ids = tf.where(in_long_word, tf.constant(self.unk_id, tf.int32), flat_ids)
        kept = tf.RaggedTensor.from_row_splits(tf.cast(keep, tf.int64), row_splits, validate=False)
        row_lengths = tf.reduce_sum(kept, axis=1)
        new_splits = tf.concat([[0], tf.cumsum(row_lengths)], axis=0)
        return (tf.boolean_mask(ids, keep), tf.cast(new_splits, row_splits.dtype),
                tf.boolean_mask(starts_word, keep))


_shared_tokenizer_graph = functools.lru_cache(maxsize=8)(_TokenizerGraph)


class _Vocabulary:
    """Both directions of the vocabulary, kept out of tf.Module's attribute tracking."""

    def __init__(self, tokens: list[str]):
        self.ids = {token: index for index, token in enumerate(tokens)}
        self.tokens_by_id = dict(enumerate(tokens))
