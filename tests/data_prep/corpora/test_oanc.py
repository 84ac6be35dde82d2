"""The untagged OANC sample: tags stripped, sentences grouped, bad lines named."""

import pytest

from data_prep.corpora import oanc
from data_prep.corpora.builtin_corpus import corpus_statistics, write_corpus

pytestmark = pytest.mark.assets


def test_untagged_documents_strip_tags_and_group_sentences(tmp_path):
    lines = ["It/PRP rained/VBD ./.", "", "Rates/NNS rose/VBD 1/2/CD ./.", "So/RB ?/."]
    documents = list(oanc.untagged_documents(lines, "handmade", size=2))
    assert documents == [["It rained .", "Rates rose 1/2 ."], ["So ?"]]
    write_corpus(documents, tmp_path / "corpus.txt")
    assert (tmp_path / "corpus.txt").read_text() == "It rained .\nRates rose 1/2 .\n\nSo ?\n"


def test_bad_line_is_named():
    with pytest.raises(ValueError, match=r"oanc.txt line 2: 'rained' is not of the form word/TAG"):
        list(oanc.untagged_documents(["It/PRP ./.", "It/PRP rained"], "oanc.txt"))


def test_real_sample():
    statistics = corpus_statistics(oanc.oanc_sample_path())
    assert (statistics.documents, statistics.sentences) == (400, 20000)
    assert statistics.words > 300_000
