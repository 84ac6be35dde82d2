"""The real Rotten Tomatoes snippets in the SST-2 layout, read back by the GLUE processor."""

from unittest import mock

import pytest
import tensorflow as tf

from data_prep.corpora import rotten_tomatoes
from data_prep.datasets import glue

pytestmark = pytest.mark.assets


class RottenTomatoesTest(tf.test.TestCase):

    def test_fixed_split_in_sst2_layout(self):
        folder = rotten_tomatoes.sst2_layout_dir()
        processor = glue.get_processor("SST-2")
        train = processor.train_examples(str(folder))
        dev = processor.dev_sets(str(folder))["dev"]
        test = processor.test_sets(str(folder))["SST-2"]
        self.assertEqual((len(train), len(dev)), (8000, 2000))
        self.assertTrue(len(test) == len(rotten_tomatoes.snippets()) - 10000 > 2000)
        self.assertEqual({example.label for example in train}, {"0", "1"})
        self.assertFalse({example.text_a for example in dev} & {example.text_a for example in test})
        # Same split on a rebuild: the first training sentence is fixed by the seed.
        self.assertEqual(train[0].text_a, rotten_tomatoes.sst2_layout_dir().joinpath(
            "train.tsv").read_text(encoding="utf-8").splitlines()[1].split("\t")[0])

    def test_pretraining_documents_hold_training_text_only(self):
        self.enter_context(mock.patch.object(rotten_tomatoes, "TRAIN_SIZE", 4))
        self.enter_context(mock.patch.object(rotten_tomatoes, "DEV_SIZE", 1))
        rows = [{"category": category, "text": text, "movie_name": film}
                for category, text, film in [
                    ("fresh", "A  joy.", "up"), ("rotten", "Dull.",
                                                 "up"), ("fresh", "Moving.", "up"),
                    ("rotten", "Too long.", "cars"), ("fresh", "Sharp.", "cars"),
                    ("fresh", "Witty.", "cars"), ("fresh", "A  joy.", "cars"),
                    ("plot", "A house flies. Its owner waves.", "up")]]
        split = rotten_tomatoes.split(rotten_tomatoes.snippets(rows))
        train = {text for text, _ in split["train"]}
        held_out = {text for text, _ in split["dev"] + split["test"]}
        documents = rotten_tomatoes.pretraining_documents(rows)
        self.assertEqual(documents[-1], ["A house flies.", "Its owner waves."])
        snippet_lines = [line for document in documents[:-1] for line in document]
        self.assertEqual(sorted(set(snippet_lines)), sorted(train))
        self.assertFalse(held_out & set(snippet_lines))
        films = {"up": {"A joy.", "Dull.", "Moving."}, "cars": {"Too long.", "Sharp.", "Witty.",
                                                               "A joy."}}
        for document in documents[:-1]:  # one film per document
            self.assertTrue(any(set(document) <= texts for texts in films.values()))

    def test_real_pretraining_corpus_leaves_out_dev_and_test(self):
        corpus = rotten_tomatoes.pretraining_corpus_path().read_text(encoding="utf-8")
        lines = set(corpus.splitlines())
        split = rotten_tomatoes.split(rotten_tomatoes.snippets())
        self.assertLessEqual({text for text, _ in split["train"][:100]}, lines)
        self.assertFalse({text for text, _ in split["dev"] + split["test"]} & lines)


if __name__ == "__main__":
    tf.test.main()
