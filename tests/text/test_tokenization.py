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

from data_prep.corpora.assets import minilm_dir
from tests.fixtures import GOLDEN
from text.normalization import split_words
from text.tokenization import PRETRAINING_TOKENS, FullTokenizer

pytestmark = pytest.mark.assets

CASES = {"uncased": True, "cased": False}
# The original's unit-test vocabulary: its examples' pieces, and no [MASK].
SMALL_VOCAB = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing",
               ","]


@pytest.fixture(scope="module")
def vocab_file() -> str:
    return str(minilm_dir() / "vocab.txt")


@pytest.fixture(scope="module")
def tokenizers(vocab_file) -> dict[str, FullTokenizer]:
    return {name: FullTokenizer(vocab_file, do_lower_case=lower) for name, lower in CASES.items()}


@pytest.fixture(scope="module")
def small_tokenizer(tmp_path_factory) -> FullTokenizer:
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(SMALL_VOCAB) + "\n", encoding="utf-8")
    return FullTokenizer(str(path), do_lower_case=True)


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


@pytest.mark.parametrize("name", CASES)
def test_tokens_match_the_original_on_golden_texts(tokenizers, name):
    entries = _golden(name)
    assert len(entries) > 1500 and any(not entry["text"].isascii() for entry in entries)
    got = [tokenizers[name].tokenize(entry["text"]) for entry in entries]
    report = _mismatch_report(entries, got)
    assert not report, report


def test_original_readme_example(small_tokenizer):
    assert small_tokenizer.tokenize("UNwant\u00E9d,running") == ["un", "##want", "##ed", ",",
                                                                 "runn", "##ing"]
    assert small_tokenizer.convert_tokens_to_ids(["un", "##want", "runn"]) == [7, 4, 8]


def test_word_ids_group_sub_tokens_and_restart_per_text(small_tokenizer):
    tokens, word_ids = _batch_tokens(small_tokenizer,
                                     ["UNwant\u00E9d,running", "", "want, wa unwanted x"])
    assert tokens == [["un", "##want", "##ed", ",", "runn", "##ing"], [],
                      ["want", ",", "wa", "un", "##want", "##ed", "[UNK]"]]
    assert word_ids == [[0, 0, 0, 1, 2, 2], [], [0, 1, 2, 3, 3, 3, 4]]


@pytest.mark.parametrize("name", CASES)
def test_word_ids_follow_the_original_words(tokenizers, name):
    """Each word of split_words gets one index, and its pieces spell it unless it is [UNK].

    split_words finds words with a regex, not with the WordPiece op that
    tokenize_batch relies on, so the two agreeing checks both.
    """
    tokenizer, texts = tokenizers[name], [entry["text"] for entry in _golden(name)]
    tokens, word_ids = _batch_tokens(tokenizer, texts)
    words = split_words(tf.constant(texts), lower_case=CASES[name]).to_list()
    for text, row_tokens, row_ids, row_words in zip(texts, tokens, word_ids, words):
        assert row_ids == sorted(row_ids) and set(row_ids) == set(range(len(row_words))), (
            f"{text[:120]!r}: word ids {row_ids[:40]} for {len(row_words)} words")
        pieces: list[list[str]] = [[] for _ in row_words]
        for token, word in zip(row_tokens, row_ids):
            pieces[word].append(token.removeprefix("##"))
        for word_pieces, word in zip(pieces, row_words):
            assert word_pieces == ["[UNK]"] or "".join(word_pieces) == word.decode("utf-8"), (
                f"{text[:120]!r}: word {word!r} got pieces {word_pieces}")


@pytest.mark.parametrize("name", CASES)
def test_batch_matches_single_texts(tokenizers, name):
    """Rows of one batch must not influence each other (long words are folded across rows)."""
    entries = _golden(name)[:300]
    tokens, _ = _batch_tokens(tokenizers[name], [entry["text"] for entry in entries])
    report = _mismatch_report(entries, tokens)
    assert not report, report


def test_tokenize_many_spans_batches(tokenizers):
    entries = _golden("uncased")[:50]
    texts = [entry["text"] for entry in entries]
    assert tokenizers["uncased"].tokenize_many(texts, batch_size=7) == \
        [entry["tokens"] for entry in entries]
    assert tokenizers["uncased"].tokenize_many([]) == []


def test_empty_batch(tokenizers):
    token_ids, word_ids = tokenizers["uncased"].tokenize_batch(tf.constant([], tf.string))
    assert token_ids.to_list() == [] and word_ids.to_list() == []


def test_vocabulary_api(tokenizers):
    tokenizer = tokenizers["uncased"]
    assert tokenizer.vocab_size == 30522
    assert tokenizer.vocab["[MASK]"] == tokenizer.mask_id == 103
    assert tokenizer.inv_vocab[101] == "[CLS]" and tokenizer.pad_id == 0
    tokens = tokenizer.tokenize("Unaffable running!")
    assert tokenizer.convert_ids_to_tokens(tokenizer.convert_tokens_to_ids(tokens)) == tokens
    with pytest.raises(KeyError, match="'##zzzq' is not in the vocabulary"):
        tokenizer.convert_tokens_to_ids(["the", "##zzzq"])
    with pytest.raises(KeyError, match="id 30522 is outside the vocabulary of 30522"):
        tokenizer.convert_ids_to_tokens([0, 30522])


def _write_vocab(path: Path, tokens: list[str]) -> str:
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return str(path)


def test_missing_vocab_file_is_named(tmp_path):
    missing = tmp_path / "no_such_vocab.txt"
    with pytest.raises(FileNotFoundError, match=f"{re.escape(str(missing))}: no such file"):
        FullTokenizer(str(missing))


def test_mask_is_required_only_for_pre_training_data(small_tokenizer):
    """Fine-tuning and feature extraction never insert [MASK]; the original needs none there."""
    path = small_tokenizer.vocab_file
    assert (small_tokenizer.cls_id, small_tokenizer.sep_id) == (1, 2)
    message = rf"{re.escape(path)} lacks \[MASK\], which masking pre-training data needs"
    with pytest.raises(ValueError, match=message):
        small_tokenizer.mask_id
    with pytest.raises(ValueError, match=message):
        FullTokenizer(path, required_tokens=PRETRAINING_TOKENS)


def test_packing_tokens_are_required_by_default(tmp_path):
    path = _write_vocab(tmp_path / "vocab.txt", [t for t in SMALL_VOCAB if t != "[SEP]"])
    with pytest.raises(ValueError, match=rf"{re.escape(path)} lacks \[SEP\], which packing "
                                         "texts into model inputs needs"):
        FullTokenizer(path)
    tokenizer = FullTokenizer(path, required_tokens=())  # tokenizing alone needs only [UNK]
    assert tokenizer.tokenize("unwanted") == ["un", "##want", "##ed"]
    with pytest.raises(ValueError, match=r"lacks \[SEP\]"):
        tokenizer.sep_id
    path = _write_vocab(tmp_path / "no_unk.txt", SMALL_VOCAB[1:])
    with pytest.raises(ValueError, match=rf"{re.escape(path)} lacks \[UNK\], which WordPiece"):
        FullTokenizer(path, required_tokens=())


def test_vocab_with_repeated_or_blank_lines_is_refused(tmp_path):
    """The original would number the tokens after such lines differently from their lines."""
    path = _write_vocab(tmp_path / "repeated.txt", SMALL_VOCAB + ["want"])
    with pytest.raises(ValueError,
                       match=rf"{re.escape(path)} repeats entries: 'want' on lines 4 and 12"):
        FullTokenizer(path)
    path = _write_vocab(tmp_path / "blank.txt", SMALL_VOCAB[:4] + [""] + SMALL_VOCAB[4:])
    with pytest.raises(ValueError, match=rf"{re.escape(path)} has blank lines: 5"):
        FullTokenizer(path)


def test_trailing_blank_lines_are_ignored(tmp_path):
    path = _write_vocab(tmp_path / "vocab.txt", SMALL_VOCAB + ["", ""])
    assert FullTokenizer(path).vocab_size == len(SMALL_VOCAB)


@pytest.mark.parametrize("text", [b"bytes", None, ["a list"]])
def test_tokenize_takes_only_str(small_tokenizer, text):
    with pytest.raises(TypeError, match=f"tokenize\\(\\) takes a str, got {type(text).__name__}"):
        small_tokenizer.tokenize(text)
