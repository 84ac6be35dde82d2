"""`predict` on raw text batch by batch: the dataset path's numbers, one trace per model."""

import numpy as np

from modeling import BertClassifier, BertTokenTagger
from tests.fixtures import TestCase
from tests.modeling.tiny_folder import tiny_folder

TEXTS = ["a fine film", "a dull film and a long one, with words enough for three windows",
         "great", "bad"] * 3
SENTENCES = [["john", "lives", "in", "paris", "with", "a", "very", "long", "name"],
             ["the", "cat"]] * 3


class TextPredictionTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.folder = tiny_folder(cls.class_folder())

    def test_windows_and_a_short_last_batch_give_the_dataset_paths_outputs(self):
        model = BertClassifier.from_pretrained(self.folder, num_labels=2, sequence_length=8,
                                               long_texts="windows")
        batched = model.predict(TEXTS, batch_size=5, verbose=0)
        # Callbacks take Keras' own loop over a tf.data pipeline of the same batches.
        self.assertAllEqual(batched, model.predict(TEXTS, batch_size=5, verbose=0,
                                                   callbacks=[]))
        self.assertEqual(batched.shape, (len(TEXTS), 2))

    def test_tags_per_word_match_and_the_preprocessor_is_traced_once(self):
        model = BertTokenTagger.from_pretrained(self.folder, num_labels=3, sequence_length=8)
        first = model.predict(SENTENCES, batch_size=4, verbose=0)
        traced = model._traced_preprocessor()
        again = model.predict(SENTENCES[:3], batch_size=4, verbose=0)
        self.assertIs(model._traced_preprocessor(), traced)
        self.assertAllEqual(again, first[:3, :again.shape[1]])
        self.assertAllEqual(first, model.predict(SENTENCES, batch_size=4, verbose=0,
                                                 callbacks=[]))
        self.assertTrue(np.isfinite(first).all())
