"""BertTextEmbedder's `predict` and `similarity` on hostile strings and lists (Hypothesis).

The property (`property_strategies`): one finite vector per text, cosines
in [-1, 1] of shape [len(a), len(b)], or a refusal naming the argument.
"""

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from modeling import BertTextEmbedder
from tests.modeling.property_strategies import (COUNTS, HOSTILE, ODD_TEXT, ContractTestCase,
                                                names_of)
from tests.modeling.tiny_folder import tiny_folder

WIDTH = 32  # the tiny model's hidden size, one pooling
TEXTS = st.one_of(st.lists(ODD_TEXT, max_size=5), st.tuples(ODD_TEXT, ODD_TEXT), HOSTILE)
VECTORS = st.builds(lambda rows, width, value: np.full((rows, width), value, np.float32),
                    st.integers(0, 3), st.sampled_from([WIDTH, 3]),
                    st.sampled_from([0.0, 1.0, -2.5, np.nan, np.inf]))


class TextEmbedderPropertiesTest(ContractTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.embedder = BertTextEmbedder.from_pretrained(tiny_folder(cls.class_folder()),
                                                        sequence_length=8)

    @example(texts=["a fine film", "", "\u3000"], batch_size=2)
    @example(texts={}, batch_size=None)
    @given(texts=TEXTS, batch_size=st.one_of(st.none(), COUNTS))
    def test_predict_gives_one_finite_vector_per_text_or_names_the_argument(self, texts,
                                                                            batch_size):
        try:
            vectors = self.embedder.predict(texts, batch_size=batch_size)
        except Exception as error:  # noqa: BLE001 - the property is about which errors
            self.assert_refused(error, names_of({"x": texts, "batch_size": batch_size}))
            return
        self.assert_finite(vectors, (len(texts), WIDTH))

    @example(a=["a fine film"], b=np.zeros((2, WIDTH), np.float32), batch_size=None)
    @example(a=np.full((1, WIDTH), np.nan, np.float32), b=["the cat"], batch_size=None)
    @given(a=st.one_of(TEXTS, VECTORS), b=st.one_of(TEXTS, VECTORS),
           batch_size=st.one_of(st.none(), COUNTS))
    def test_similarity_gives_a_cosine_per_pair_or_names_the_argument(self, a, b, batch_size):
        try:
            cosines = self.embedder.similarity(a, b, batch_size=batch_size)
        except Exception as error:  # noqa: BLE001
            self.assert_refused(error, names_of({"a": a, "b": b, "batch_size": batch_size}))
            return
        self.assert_finite(cosines, (len(a), len(b)))
        self.assertTrue((np.abs(cosines) <= 1 + 1e-5).all(), cosines)
