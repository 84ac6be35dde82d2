"""Built-in corpora: format, atomic cached writes, and the real Wikipedia sample."""

import bz2
import zipfile

import pytest

from data_prep.corpora import builtin_corpus
from data_prep.corpora.builtin_corpus import (corpus_statistics, news_documents, wikipedia_documents,
                                      write_corpus)

pytestmark = pytest.mark.assets


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _fake_gensim_wheel(cache, dump_xml: str, news: str):
    name, version = builtin_corpus.GENSIM_PACKAGE
    folder = cache / "packages" / f"{name}-{version}"
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as wheel:
        wheel.writestr(builtin_corpus.WIKIPEDIA_MEMBER, bz2.compress(dump_xml.encode()))
        wheel.writestr(builtin_corpus.NEWS_MEMBER, news)


DUMP = ("<mediawiki><page><title>A</title><ns>0</ns><revision><text>"
        "'''A''' is a [[letter|letter]]. It comes first.\n\n== History ==\nIt is old."
        "</text></revision></page><page><title>B</title><ns>0</ns><revision><text>"
        "{{Infobox}}\n* only a list</text></revision></page>"
        "<page><title>C</title><ns>0</ns><revision><text>C follows B."
        "</text></revision></page></mediawiki>")


def test_wikipedia_documents_skip_articles_without_prose():
    documents = list(wikipedia_documents(bz2.compress(DUMP.encode())))
    assert documents == [["A is a letter.", "It comes first.", "It is old."], ["C follows B."]]


def test_news_documents_are_one_per_line():
    raw = "First story. It ends.\n\nSecond story here.\n".encode()
    assert list(news_documents(raw)) == [["First story.", "It ends."], ["Second story here."]]


def test_write_corpus_format_and_statistics(tmp_path):
    path = tmp_path / "out" / "corpus.txt"
    write_corpus([["One two.", "Three\nfour  five."], [], ["  "], ["Six."]], path)
    assert path.read_text() == "One two.\nThree four five.\n\nSix.\n"
    stats = corpus_statistics(path)
    assert (stats.documents, stats.sentences, stats.words) == (2, 3, 6)
    assert stats.bytes == path.stat().st_size
    assert [p.name for p in path.parent.iterdir()] == ["corpus.txt"]


def test_failed_write_leaves_no_file(tmp_path):
    def documents():
        yield ["Written."]
        raise ValueError("source broke")

    with pytest.raises(ValueError, match="source broke"):
        write_corpus(documents(), tmp_path / "corpus.txt")
    assert list(tmp_path.iterdir()) == []


def test_sample_is_built_once_then_served_from_cache(cache, monkeypatch):
    _fake_gensim_wheel(cache, DUMP, "Story one. Done.\nStory two.\n")
    path = builtin_corpus.wikipedia_sample_path()
    assert path == cache / "corpora" / "wikipedia_sample.txt"
    assert path.read_text() == "A is a letter.\nIt comes first.\nIt is old.\n\nC follows B.\n"
    assert builtin_corpus.news_sample_path().read_text() == "Story one.\nDone.\n\nStory two.\n"
    monkeypatch.setattr(builtin_corpus, "_wheel_member", lambda member: pytest.fail("rebuilt"))
    assert builtin_corpus.wikipedia_sample_path() == path


def test_missing_member_is_named(cache, monkeypatch):
    _fake_gensim_wheel(cache, DUMP, "x")
    monkeypatch.setattr(builtin_corpus, "NEWS_MEMBER", "gensim/test/test_data/missing.cor")
    with pytest.raises(RuntimeError, match="missing.cor"):
        builtin_corpus.news_sample_path()


def test_real_wikipedia_sample_is_clean_prose():
    """Downloads the gensim wheel (28 MB) into the shared cache on first run."""
    path = builtin_corpus.wikipedia_sample_path()
    text = path.read_text(encoding="utf-8")
    stats = corpus_statistics(path)
    assert stats.documents > 90
    assert stats.sentences > 15_000
    assert stats.words > 350_000
    for leftover in ("{{", "}}", "[[", "]]", "<ref", "</", "'''", "{|", "&nbsp;", "http"):
        assert leftover not in text, leftover
    lines = text.split("\n")
    assert "Anarchism is a political philosophy that advocates self-governed societies based " \
           "on voluntary institutions." in lines
    assert not any(line.startswith(("*", "=", "|", "#")) for line in lines)


def test_real_news_sample():
    stats = corpus_statistics(builtin_corpus.news_sample_path())
    assert stats.documents == 300
    assert stats.sentences > 2_000
