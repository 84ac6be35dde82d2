"""tasks.features: the input-line and layer-index parsing of extract_features.py."""

import pytest

from tasks import features


def test_pair_lines_split_on_the_original_separator():
    assert features.parse_line("a b ||| c d") == ("a b", "c d")
    assert features.parse_line("no pair here") == ("no pair here", None)
    assert features.parse_line("a|||b") == ("a|||b", None)


def test_layer_indices_are_checked_against_the_model():
    assert features.parse_layer_indices("-1,-2", 6) == [-1, -2]
    assert features.parse_layer_indices("0,5", 6) == [0, 5]
    with pytest.raises(ValueError, match="out of range"):
        features.parse_layer_indices("-7", 6)
    with pytest.raises(ValueError, match="integers"):
        features.parse_layer_indices("-1,last", 6)

