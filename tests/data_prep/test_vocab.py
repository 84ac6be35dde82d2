"""WordPiece vocabulary learning: Google's layout, size limits, errors, real use."""

import os

import pytest

from data_prep import vocab


def test_reserved_layout_matches_google_uncased():
    reserved = vocab.reserved_tokens(994)
    assert len(reserved) == 999
    assert reserved[0] == "[PAD]"
    assert reserved[1] == "[unused0]" and reserved[99] == "[unused98]"
    assert reserved[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert reserved[104] == "[unused99]" and reserved[998] == "[unused993]"


def test_few_unused_slots_all_come_before_specials():
    assert vocab.reserved_tokens(2) == ["[PAD]", "[unused0]", "[unused1]",
                                        "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert vocab.reserved_tokens(0) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    with pytest.raises(ValueError, match="--num_unused"):
        vocab.reserved_tokens(-1)


STEMS = ["play", "walk", "talk", "jump", "look", "cook", "work", "help", "kick", "pick"]
COUNTS = {stem + suffix: 3 for stem in STEMS for suffix in ("", "ing", "ed", "s")}
COUNTS.update({"the": 500, "zebra": 1})
CHARS = sorted(set("".join(COUNTS)))


def test_learned_vocabulary_layout_and_size():
    tokens = vocab.learn_vocabulary(COUNTS, vocab_size=8 + 2 * len(CHARS) + 14, num_unused=3)
    assert len(tokens) == len(set(tokens)) == 8 + 2 * len(CHARS) + 14
    assert tokens[:8] == vocab.reserved_tokens(3)
    assert tokens[8:8 + len(CHARS)] == CHARS
    assert tokens[-len(CHARS):] == ["##" + char for char in CHARS]
    learned = tokens[8 + len(CHARS):-len(CHARS)]
    assert learned[0] == "the"  # by falling count
    assert "##ing" in learned and "##ed" in learned
    assert "zebra" not in learned and "playing" not in learned  # rare whole words lose


def test_vocabulary_is_smaller_when_the_corpus_cannot_fill_it():
    tokens = vocab.learn_vocabulary(COUNTS, vocab_size=5000, num_unused=3, min_count=2)
    assert len(tokens) == 8 + 2 * len(CHARS) + 41  # "the" and the 40 words seen 3 times
    assert "playing" in tokens and "zebra" not in tokens


def test_vocab_size_errors_name_the_flag():
    with pytest.raises(ValueError, match="--vocab_size=999 leaves no room"):
        vocab.learn_vocabulary(COUNTS, vocab_size=999)
    with pytest.raises(ValueError, match=rf"--vocab_size=20 is too small.*{len(CHARS)} characters"):
        vocab.learn_vocabulary(COUNTS, vocab_size=20, num_unused=0)
    with pytest.raises(ValueError, match="no words"):
        vocab.learn_vocabulary({}, vocab_size=2000)


def test_write_vocab_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "vocab.txt"
    vocab.write_vocab(["[PAD]", "a", "##b"], str(path))
    assert path.read_text() == "[PAD]\na\n##b\n"
    monkeypatch.setattr(vocab.os, "replace", lambda *args: (_ for _ in ()).throw(OSError("disk")))
    with pytest.raises(OSError, match="disk"):
        vocab.write_vocab(["x"], str(path))
    assert path.read_text() == "[PAD]\na\n##b\n"
    assert os.listdir(tmp_path) == ["vocab.txt"]


def test_unwritable_output_is_named(tmp_path):
    with pytest.raises(OSError, match="--output_file .*missing"):
        vocab.write_vocab(["x"], str(tmp_path / "missing" / "vocab.txt"))


def test_input_globs_must_each_match(tmp_path):
    (tmp_path / "a.txt").write_text("x\n")
    (tmp_path / "b.txt").write_text("y\n")
    files = vocab.expand_input_patterns(f"{tmp_path}/*.txt, {tmp_path}/a.txt")
    assert files == [str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), str(tmp_path / "a.txt")]
    with pytest.raises(FileNotFoundError, match=r"'.*/nothing\*\.txt' matches no file"):
        vocab.expand_input_patterns(f"{tmp_path}/a.txt,{tmp_path}/nothing*.txt")
    with pytest.raises(ValueError, match="--input_file is empty"):
        vocab.expand_input_patterns(" , ")
