"""The synthetic corpus as a pytest fixture, for the tests that are still plain pytest functions."""

import pytest

from tests.data_prep.synthetic_corpus import CLS, SEP, VOCAB, make_corpus, settings_for

__all__ = ["CLS", "SEP", "VOCAB", "corpus", "settings_for"]


@pytest.fixture()
def corpus(tmp_path):
    return make_corpus(tmp_path)
