"""The untagged OANC sample: tags stripped, sentences grouped, bad lines named."""

import pytest
import tensorflow as tf

from data_prep.corpora import oanc
from data_prep.corpora.builtin_corpus import corpus_statistics, write_corpus
from tests.fixtures import TestCase

pytestmark = pytest.mark.assets


class OancTest(TestCase):

    def test_untagged_documents_strip_tags_and_group_sentences(self):
        tmp_path = self.tmp_path()
        lines = ["It/PRP rained/VBD ./.", "", "Rates/NNS rose/VBD 1/2/CD ./.", "So/RB ?/."]
        documents = list(oanc.untagged_documents(lines, "handmade", size=2))
        self.assertEqual(documents, [["It rained .", "Rates rose 1/2 ."], ["So ?"]])
        write_corpus(documents, tmp_path / "corpus.txt")
        self.assertEqual((tmp_path / "corpus.txt").read_text(),
                         "It rained .\nRates rose 1/2 .\n\nSo ?\n")

    def test_bad_line_is_named(self):
        with self.assertRaisesRegex(ValueError,
                                    r"oanc.txt line 2: 'rained' is not of the form word/TAG"):
            list(oanc.untagged_documents(["It/PRP ./.", "It/PRP rained"], "oanc.txt"))

    def test_real_sample(self):
        statistics = corpus_statistics(oanc.oanc_sample_path())
        self.assertEqual((statistics.documents, statistics.sentences), (400, 20000))
        self.assertGreater(statistics.words, 300_000)


if __name__ == "__main__":
    tf.test.main()
