"""The WSJ part-of-speech data: parsing, the fixed split, atomic writes, the real file."""

import pytest

from data_prep.corpora import wsj_pos
from data_prep.corpora.wsj_pos import parse_tagged_line, read_sentences, tag_set, write_conll_dir

pytestmark = pytest.mark.assets

SENTENCES = max(end for _, end in wsj_pos.SPLITS.values())


def test_parse_tagged_line_splits_at_the_last_slash():
    assert parse_tagged_line("Rates/NNS rose/VBD 1/2/CD ./.", "x") == [
        ("Rates", "NNS"), ("rose", "VBD"), ("1/2", "CD"), (".", ".")]


@pytest.mark.parametrize("token", ["rose", "/VBD", "rose/"])
def test_parse_tagged_line_names_the_line_and_token(token):
    with pytest.raises(ValueError, match=rf"corpus.txt line 7: '{token}' is not of the form"):
        parse_tagged_line(f"Rates/NNS {token}", "corpus.txt line 7")


def test_split_is_fixed_disjoint_and_complete(tmp_path):
    lines = [f"word{i}/NN ,/, end/VB" for i in range(SENTENCES)]
    folder = write_conll_dir(lines, tmp_path / "wsj", "handmade")
    splits = {name: read_sentences(folder / f"{name}.txt") for name in wsj_pos.SPLITS}
    assert {name: len(rows) for name, rows in splits.items()} == {
        "train": 801, "valid": 100, "test": 100}
    firsts = [sentence[0][0] for name in ("train", "valid", "test") for sentence in splits[name]]
    assert firsts == [f"word{i}" for i in range(SENTENCES)]  # file order, each line once
    assert splits["valid"][0] == [("word801", "B-NN"), (",", "B-,"), ("end", "B-VB")]
    assert tag_set(folder) == ["B-,", "B-NN", "B-VB"]
    again = write_conll_dir(lines, tmp_path / "wsj", "handmade")
    assert (again / "test.txt").read_text() == (folder / "test.txt").read_text()


@pytest.mark.parametrize("lines, message", [
    (["a/DT"] * 5, "handmade: 5 sentences, expected 1001"),
    (["a/DT"] * 500 + ["a DT"] + ["a/DT"] * 500, r"handmade line 501: 'a' is not"),
])
def test_bad_input_writes_nothing(tmp_path, lines, message):
    with pytest.raises(ValueError, match=message):
        write_conll_dir(lines, tmp_path / "wsj", "handmade")
    assert list(tmp_path.iterdir()) == []


def test_real_wsj_sentences():
    folder = wsj_pos.wsj_conll_dir()
    splits = {name: read_sentences(folder / f"{name}.txt") for name in wsj_pos.SPLITS}
    assert [len(splits[name]) for name in ("train", "valid", "test")] == [801, 100, 100]
    texts = {name: {" ".join(word for word, _ in s) for s in rows} for name, rows in splits.items()}
    assert not texts["valid"] & texts["test"]
    tags = tag_set(folder)
    assert {"B-NN", "B-VBD", "B-LS", "B-SYM"} <= set(tags) and len(tags) == 44
