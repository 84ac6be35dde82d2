"""FullTokenizer: the original's exact tokens (golden files), word indices, batching, errors.

The golden files were written by tools/record_tokenizer_reference.py, which
ran Google's own tokenization.py (bert-tensorflow 1.0.4) with the real
bert-base-uncased vocabulary on tricky strings and on real news and
Wikipedia lines (the cased file with that same vocabulary, so capitalized
words are mostly [UNK] there). The vocabulary is the one shipped with
MiniLM, fetched into the asset cache on first use.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import tensorflow as tf
from absl.testing import parameterized

from data_prep.corpora.assets import minilm_dir
from tests.fixtures import GOLDEN, TestCase
from text.normalization import split_words
from text.tokenization import PRETRAINING_TOKENS, FullTokenizer

pytestmark = pytest.mark.assets

CASES = {"uncased": True, "cased": False}
# The original's unit-test vocabulary: its examples' pieces, and no [MASK].
SMALL_VOCAB = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing",
               ","]


def _golden(name: str) -> list[dict]:
    return json.loads((GOLDEN / f"tokenizer_{name}.json").read_text(encoding="ascii"))


def _mismatch_report(entries: list[dict], got: list[list[str]], shown: int = 5) -> str:
    bad = [(entry["text"], entry["tokens"], tokens)
           for entry, tokens in zip(entries, got) if tokens != entry["tokens"]]
    lines = [f"{len(bad)} of {len(entries)} texts differ from the original; first ones:"]
    for text, expected, actual in bad[:shown]:
        lines += [f"  text {text[:120]!r}", f"    original {expected[:40]}",
                  f"    ours     {actual[:40]}"]
    return "\n".join(lines) if bad else ""


def _batch_tokens(tokenizer: FullTokenizer,
                  texts: list[str]) -> tuple[list[list[str]], list[list[int]]]:
    """Tokens and word ids of each text, from one call of the graph-mode batch API."""
    token_ids, word_ids = tokenizer.tokenize_batch(
        tf.constant([text.encode("utf-8") for text in texts]))
    return ([tokenizer.convert_ids_to_tokens(row) for row in token_ids.to_list()],
            word_ids.to_list())


def _write_vocab(path: Path, tokens: list[str]) -> str:
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return str(path)


class TokenizationTest(TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        """The real vocabulary loads once per class: 30522 entries, fetched on first use."""
        super().setUpClass()
        vocab_file = str(minilm_dir() / "vocab.txt")
        cls.tokenizers = {name: FullTokenizer(vocab_file, do_lower_case=lower)
                          for name, lower in CASES.items()}

    def setUp(self):
        super().setUp()
        path = self.tmp_path() / "vocab.txt"
        self.small_tokenizer = FullTokenizer(_write_vocab(path, SMALL_VOCAB), do_lower_case=True)

    @parameterized.parameters([{'name': v} for v in CASES])
    def test_tokens_match_the_original_on_golden_texts(self, name):
        entries = _golden(name)
        self.assertGreater(len(entries), 1500)
        self.assertTrue(any(not entry["text"].isascii() for entry in entries))
        got = [self.tokenizers[name].tokenize(entry["text"]) for entry in entries]
        report = _mismatch_report(entries, got)
        self.assertFalse(report, msg=report)

    def test_original_readme_example(self):
        self.assertEqual(self.small_tokenizer.tokenize("UNwant\u00E9d,running"),
                         ["un", "##want", "##ed", ",", "runn", "##ing"])
        self.assertEqual(self.small_tokenizer.convert_tokens_to_ids(["un", "##want", "runn"]),
                         [7, 4, 8])

    def test_word_ids_group_sub_tokens_and_restart_per_text(self):
        tokens, word_ids = _batch_tokens(self.small_tokenizer,
                                         ["UNwant\u00E9d,running", "", "want, wa unwanted x"])
        self.assertEqual(tokens, [["un", "##want", "##ed", ",", "runn", "##ing"], [],
                                  ["want", ",", "wa", "un", "##want", "##ed", "[UNK]"]])
        self.assertEqual(word_ids, [[0, 0, 0, 1, 2, 2], [], [0, 1, 2, 3, 3, 3, 4]])

    @parameterized.parameters([{'name': v} for v in CASES])
    def test_word_ids_follow_the_original_words(self, name):
        """Each word of split_words gets one index, and its pieces spell it unless it is [UNK].

        split_words finds words with a regex, not with the WordPiece op that
        tokenize_batch relies on, so the two agreeing checks both.
        """
        tokenizer, texts = self.tokenizers[name], [entry["text"] for entry in _golden(name)]
        tokens, word_ids = _batch_tokens(tokenizer, texts)
        words = split_words(tf.constant(texts), lower_case=CASES[name]).to_list()
        for text, row_tokens, row_ids, row_words in zip(texts, tokens, word_ids, words):
            message = f"{text[:120]!r}: word ids {row_ids[:40]} for {len(row_words)} words"
            self.assertEqual(row_ids, sorted(row_ids), msg=message)
            self.assertEqual(set(row_ids), set(range(len(row_words))), msg=message)
            pieces: list[list[str]] = [[] for _ in row_words]
            for token, word in zip(row_tokens, row_ids):
                pieces[word].append(token.removeprefix("##"))
            for word_pieces, word in zip(pieces, row_words):
                spelled = word_pieces == ["[UNK]"] or "".join(word_pieces) == word.decode("utf-8")
                self.assertTrue(spelled, msg=f"{text[:120]!r}: word {word!r} got pieces {word_pieces}")

    @parameterized.parameters([{'name': v} for v in CASES])
    def test_batch_matches_single_texts(self, name):
        """Rows of one batch must not influence each other (long words are folded across rows)."""
        entries = _golden(name)[:300]
        tokens, _ = _batch_tokens(self.tokenizers[name], [entry["text"] for entry in entries])
        report = _mismatch_report(entries, tokens)
        self.assertFalse(report, msg=report)

    def test_tokenize_many_spans_batches(self):
        entries = _golden("uncased")[:50]
        texts = [entry["text"] for entry in entries]
        self.assertEqual(self.tokenizers["uncased"].tokenize_many(texts, batch_size=7),
                         [entry["tokens"] for entry in entries])
        self.assertEqual(self.tokenizers["uncased"].tokenize_many([]), [])

    def test_empty_batch(self):
        token_ids, word_ids = self.tokenizers["uncased"].tokenize_batch(tf.constant([], tf.string))
        self.assertEqual(token_ids.to_list(), [])
        self.assertEqual(word_ids.to_list(), [])

    def test_vocabulary_api(self):
        tokenizer = self.tokenizers["uncased"]
        self.assertEqual(tokenizer.vocab_size, 30522)
        self.assertTrue(tokenizer.vocab["[MASK]"] == tokenizer.mask_id == 103)
        self.assertEqual(tokenizer.inv_vocab[101], "[CLS]")
        self.assertEqual(tokenizer.pad_id, 0)
        tokens = tokenizer.tokenize("Unaffable running!")
        self.assertEqual(tokenizer.convert_ids_to_tokens(tokenizer.convert_tokens_to_ids(tokens)),
                         tokens)
        with self.assertRaisesRegex(KeyError, "'##zzzq' is not in the vocabulary"):
            tokenizer.convert_tokens_to_ids(["the", "##zzzq"])
        with self.assertRaisesRegex(KeyError, "id 30522 is outside the vocabulary of 30522"):
            tokenizer.convert_ids_to_tokens([0, 30522])

    def test_missing_vocab_file_is_named(self):
        tmp_path = self.tmp_path()
        missing = tmp_path / "no_such_vocab.txt"
        with self.assertRaisesRegex(FileNotFoundError, f"{re.escape(str(missing))}: no such file"):
            FullTokenizer(str(missing))

    def test_mask_is_required_only_for_pre_training_data(self):
        """Fine-tuning and feature extraction never insert [MASK]; the original needs none there."""
        path = self.small_tokenizer.vocab_file
        self.assertEqual((self.small_tokenizer.cls_id, self.small_tokenizer.sep_id), (1, 2))
        message = rf"{re.escape(path)} lacks \[MASK\], which masking pre-training data needs"
        with self.assertRaisesRegex(ValueError, message):
            self.small_tokenizer.mask_id
        with self.assertRaisesRegex(ValueError, message):
            FullTokenizer(path, required_tokens=PRETRAINING_TOKENS)

    def test_packing_tokens_are_required_by_default(self):
        tmp_path = self.tmp_path()
        path = _write_vocab(tmp_path / "vocab.txt", [t for t in SMALL_VOCAB if t != "[SEP]"])
        with self.assertRaisesRegex(ValueError, rf"{re.escape(path)} lacks \[SEP\], which packing "
                                                "texts into model inputs needs"):
            FullTokenizer(path)
        tokenizer = FullTokenizer(path, required_tokens=())  # tokenizing alone needs only [UNK]
        self.assertEqual(tokenizer.tokenize("unwanted"), ["un", "##want", "##ed"])
        with self.assertRaisesRegex(ValueError, r"lacks \[SEP\]"):
            tokenizer.sep_id
        path = _write_vocab(tmp_path / "no_unk.txt", SMALL_VOCAB[1:])
        with self.assertRaisesRegex(ValueError,
                                    rf"{re.escape(path)} lacks \[UNK\], which WordPiece"):
            FullTokenizer(path, required_tokens=())

    def test_vocab_with_repeated_or_blank_lines_is_refused(self):
        """The original would number the tokens after such lines differently from their lines."""
        tmp_path = self.tmp_path()
        path = _write_vocab(tmp_path / "repeated.txt", SMALL_VOCAB + ["want"])
        with self.assertRaisesRegex(ValueError,
                                    rf"{re.escape(path)} repeats entries: 'want' on lines 4 and 12"):
            FullTokenizer(path)
        path = _write_vocab(tmp_path / "blank.txt", SMALL_VOCAB[:4] + [""] + SMALL_VOCAB[4:])
        with self.assertRaisesRegex(ValueError, rf"{re.escape(path)} has blank lines: 5"):
            FullTokenizer(path)

    def test_trailing_blank_lines_are_ignored(self):
        tmp_path = self.tmp_path()
        path = _write_vocab(tmp_path / "vocab.txt", SMALL_VOCAB + ["", ""])
        self.assertEqual(FullTokenizer(path).vocab_size, len(SMALL_VOCAB))

    @parameterized.parameters(b"bytes", None, (["a list"],))
    def test_tokenize_takes_only_str(self, text):
        with self.assertRaisesRegex(TypeError,
                                    f"tokenize\\(\\) takes a str, got {type(text).__name__}"):
            self.small_tokenizer.tokenize(text)


class SharedTraceTest(TestCase):
    """Tokenizers of one vocabulary and casing share the compiled WordPiece and its trace."""

    def _vocab_file(self, tokens: list[str]) -> Path:
        path = self.tmp_path() / "vocab.txt"
        path.write_text("\n".join(tokens) + "\n")
        return path

    def test_one_trace_per_vocabulary_and_casing_each_naming_its_own_file(self):
        tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "##s", "Cat"]
        first, second = self._vocab_file(tokens), self._vocab_file(tokens)
        uncased, same = FullTokenizer(str(first)), FullTokenizer(str(second))
        cased = FullTokenizer(str(first), do_lower_case=False)
        other = FullTokenizer(str(self._vocab_file(tokens + ["dog"])))
        self.assertIs(uncased._graph, same._graph)
        self.assertIsNot(uncased._graph, cased._graph)
        self.assertIsNot(uncased._graph, other._graph)
        self.assertEqual(uncased.tokenize("The Cats"), ["the", "cat", "##s"])
        self.assertEqual(cased.tokenize("The Cats"), ["[UNK]", "Cat", "##s"])
        self.assertEqual(other.tokenize("dog"), ["dog"])
        with self.assertRaisesRegex(ValueError, re.escape(str(second))):
            same.special_id("[MASK]")

    def test_one_made_while_tracing_keeps_its_own(self):
        path = str(self._vocab_file(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the"]))
        eager = FullTokenizer(path)

        @tf.function
        def ids_of(texts):
            traced = FullTokenizer(path)
            self.assertIsNot(traced._graph, eager._graph)
            return traced.tokenize_batch(texts)[0].flat_values

        self.assertAllEqual(ids_of(tf.constant(["the the"])), [4, 4])
        self.assertIs(FullTokenizer(path)._graph, eager._graph)


if __name__ == "__main__":
    tf.test.main()
