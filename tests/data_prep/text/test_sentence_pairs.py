"""Packing texts into [CLS] A [SEP] B [SEP] with truncation and padding."""

import pytest

from data_prep.text.sentence_pairs import pack, truncate_pair

VOCAB = {"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "a": 3, "b": 4, "c": 5, "d": 6}


def test_single_text_layout_and_padding():
    packed = pack(["a", "b"], None, 6, VOCAB)
    assert packed.tokens == ["[CLS]", "a", "b", "[SEP]"]
    assert packed.input_ids == [1, 3, 4, 2, 0, 0]
    assert packed.input_mask == [1, 1, 1, 1, 0, 0]
    assert packed.segment_ids == [0, 0, 0, 0, 0, 0]


def test_pair_layout_has_second_segment():
    packed = pack(["a"], ["b", "c"], 8, VOCAB)
    assert packed.tokens == ["[CLS]", "a", "[SEP]", "b", "c", "[SEP]"]
    assert packed.segment_ids == [0, 0, 0, 1, 1, 1, 0, 0]
    assert packed.input_mask == [1] * 6 + [0] * 2


@pytest.mark.parametrize("tokens_b", [[], ()])
def test_second_text_without_tokens_packs_as_single_text(tokens_b):
    """The original tests `if tokens_b:`, so an empty or blank text_b adds no [SEP]."""
    assert pack(["a", "b"], tokens_b, 6, VOCAB) == pack(["a", "b"], None, 6, VOCAB)
    # and the single text keeps the room a second [SEP] would have taken
    assert pack(["a", "b", "c", "d"], tokens_b, 6, VOCAB).tokens == [
        "[CLS]", "a", "b", "c", "d", "[SEP]"]


def test_single_text_keeps_head():
    packed = pack(["a", "b", "c", "d"], None, 4, VOCAB)
    assert packed.tokens == ["[CLS]", "a", "b", "[SEP]"]


def test_pair_truncation_cuts_longer_first():
    tokens_a, tokens_b = ["a", "b", "c", "d", "a"], ["b", "c"]
    truncate_pair(tokens_a, tokens_b, 5)
    assert tokens_a == ["a", "b", "c"] and tokens_b == ["b", "c"]
    tokens_a, tokens_b = ["a", "b"], ["b", "c", "d"]
    truncate_pair(tokens_a, tokens_b, 2)
    assert tokens_a == ["a"] and tokens_b == ["b"]


def test_inputs_are_not_modified():
    tokens_a = ["a", "b", "c"]
    pack(tokens_a, ["d"], 4, VOCAB)
    assert tokens_a == ["a", "b", "c"]


def test_too_short_length_is_rejected():
    with pytest.raises(ValueError, match="max_seq_length"):
        pack(["a"], None, 2, VOCAB)
