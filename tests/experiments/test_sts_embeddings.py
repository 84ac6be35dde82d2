"""The embedder's STS-B cosines against sentence-transformers' own, on real dev pairs.

`tests/golden/minilm_stsb_dev_cosines.npz` holds numbers only: the cosines
sentence-transformers gives the first dev pairs (recorded by
`python -m experiments.sts_embeddings --golden_pairs=300`) and their Spearman
with the gold scores. The pairs themselves are read from the GLUE folder
(`BERT_SHARED_DATA`, default `../shared/data` beside the checkout), and the
test is skipped where it is absent.
"""

import os
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from experiments import sts_embeddings
from modeling.text_embedder import BertTextEmbedder
from tests.fixtures import REPO, TestCase
from tests.reference_python import minilm_or_skip

SHARED = Path(os.environ.get("BERT_SHARED_DATA", REPO.parent / "shared" / "data"))


class StsEmbeddingsTest(TestCase):

    def test_cosines_are_row_wise(self):
        first = np.array([[1.0, 0.0], [3.0, 4.0], [1.0, 1.0]])
        second = np.array([[2.0, 0.0], [-3.0, -4.0], [1.0, -1.0]])
        self.assertAllClose(sts_embeddings.cosines(first, second), [1.0, -1.0, 0.0])

    def _check_against_golden(self, count: int | None = None) -> None:
        """Our cosines of the first `count` golden dev pairs (all: None) are theirs, and so is
        their Spearman with the gold scores."""
        if not (SHARED / "glue" / "STS-B" / "dev.tsv").is_file():
            self.skipTest(f"{SHARED / 'glue' / 'STS-B'} is absent: set BERT_SHARED_DATA to the "
                          "folder holding glue/STS-B")
        folder = minilm_or_skip(self)
        golden = np.load(sts_embeddings.GOLDEN)
        theirs = golden["cosines"][:count]
        count = len(theirs)
        first, second, gold, _ = sts_embeddings.read_pairs(str(SHARED / "glue"))["dev"]
        embedder = BertTextEmbedder.from_pretrained(folder, sequence_length=128)  # fits all
        ours = sts_embeddings.cosines(embedder.predict(first[:count], batch_size=64),
                                      embedder.predict(second[:count], batch_size=64))
        self.assertAllClose(ours, theirs, atol=2e-5, rtol=0)
        spearman = (float(golden["spearman"]) if count == len(golden["cosines"])
                    else spearmanr(theirs, gold[:count]).statistic)
        self.assertAlmostEqual(spearmanr(ours, gold[:count]).statistic, spearman, places=4)

    def test_first_dev_cosines_match_sentence_transformers(self):
        self._check_against_golden(count=32)

    @pytest.mark.long
    def test_dev_cosines_match_sentence_transformers(self):
        self._check_against_golden()
