"""Built-in corpora: format, atomic cached writes, and the real Wikipedia sample."""

import bz2
import os
import zipfile
from unittest import mock

import pytest
import tensorflow as tf

from data_prep.corpora import builtin_corpus
from data_prep.corpora.builtin_corpus import (
    corpus_statistics,
    news_documents,
    wikipedia_documents,
    write_corpus,
)
from tests.fixtures import TestCase

pytestmark = pytest.mark.assets


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


class BuiltinCorpusTest(TestCase):

    def setUp(self):
        super().setUp()
        self.cache = self.tmp_path() / "cache"
        self.enter_context(mock.patch.dict(os.environ, {"BERT_CACHE_DIR": str(self.cache)}))

    def test_wikipedia_documents_skip_articles_without_prose(self):
        documents = list(wikipedia_documents(bz2.compress(DUMP.encode())))
        self.assertEqual(documents,
                         [["A is a letter.", "It comes first.", "It is old."], ["C follows B."]])

    def test_news_documents_are_one_per_line(self):
        raw = "First story. It ends.\n\nSecond story here.\n".encode()
        self.assertEqual(list(news_documents(raw)),
                         [["First story.", "It ends."], ["Second story here."]])

    def test_write_corpus_format_and_statistics(self):
        tmp_path = self.tmp_path()
        path = tmp_path / "out" / "corpus.txt"
        write_corpus([["One two.", "Three\nfour  five."], [], ["  "], ["Six."]], path)
        self.assertEqual(path.read_text(), "One two.\nThree four five.\n\nSix.\n")
        stats = corpus_statistics(path)
        self.assertEqual((stats.documents, stats.sentences, stats.words), (2, 3, 6))
        self.assertEqual(stats.bytes, path.stat().st_size)
        self.assertEqual([p.name for p in path.parent.iterdir()], ["corpus.txt"])

    def test_failed_write_leaves_no_file(self):
        tmp_path = self.tmp_path()
        def documents():
            yield ["Written."]
            raise ValueError("source broke")

        with self.assertRaisesRegex(ValueError, "source broke"):
            write_corpus(documents(), tmp_path / "corpus.txt")
        self.assertEqual(list(tmp_path.iterdir()), [])

    def test_sample_is_built_once_then_served_from_cache(self):
        _fake_gensim_wheel(self.cache, DUMP, "Story one. Done.\nStory two.\n")
        path = builtin_corpus.wikipedia_sample_path()
        self.assertEqual(path, self.cache / "corpora" / "wikipedia_sample.txt")
        self.assertEqual(path.read_text(),
                         "A is a letter.\nIt comes first.\nIt is old.\n\nC follows B.\n")
        self.assertEqual(builtin_corpus.news_sample_path().read_text(),
                         "Story one.\nDone.\n\nStory two.\n")
        self.enter_context(mock.patch.object(builtin_corpus, "_wheel_member",
                                             lambda member: self.fail("rebuilt")))
        self.assertEqual(builtin_corpus.wikipedia_sample_path(), path)

    def test_missing_member_is_named(self):
        _fake_gensim_wheel(self.cache, DUMP, "x")
        self.enter_context(mock.patch.object(builtin_corpus, "NEWS_MEMBER",
                                             "gensim/test/test_data/missing.cor"))
        with self.assertRaisesRegex(RuntimeError, "missing.cor"):
            builtin_corpus.news_sample_path()

    def test_real_wikipedia_sample_is_clean_prose(self):
        """Downloads the gensim wheel (28 MB) into the shared self.cache on first run."""
        path = builtin_corpus.wikipedia_sample_path()
        text = path.read_text(encoding="utf-8")
        stats = corpus_statistics(path)
        self.assertGreater(stats.documents, 90)
        self.assertGreater(stats.sentences, 15_000)
        self.assertGreater(stats.words, 350_000)
        for leftover in ("{{", "}}", "[[", "]]", "<ref", "</", "'''", "{|", "&nbsp;", "http"):
            self.assertNotIn(leftover, text, msg=leftover)
        lines = text.split("\n")
        self.assertIn("Anarchism is a political philosophy that advocates self-governed societies based " \
               "on voluntary institutions.", lines)
        self.assertFalse(any(line.startswith(("*", "=", "|", "#")) for line in lines))

    def test_real_news_sample(self):
        stats = corpus_statistics(builtin_corpus.news_sample_path())
        self.assertEqual(stats.documents, 300)
        self.assertGreater(stats.sentences, 2_000)


if __name__ == "__main__":
    tf.test.main()
