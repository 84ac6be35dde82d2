"""extract_features.py: input parsing, layer selection, and output equal to the reference."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import extract_features

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_pair_lines_split_on_the_original_separator():
    assert extract_features.parse_line("a b ||| c d") == ("a b", "c d")
    assert extract_features.parse_line("no pair here") == ("no pair here", None)
    assert extract_features.parse_line("a|||b") == ("a|||b", None)


def test_layer_indices_are_checked_against_the_model():
    assert extract_features.parse_layer_indices("-1,-2", 6) == [-1, -2]
    assert extract_features.parse_layer_indices("0,5", 6) == [0, 5]
    with pytest.raises(ValueError, match="out of range"):
        extract_features.parse_layer_indices("-7", 6)
    with pytest.raises(ValueError, match="integers"):
        extract_features.parse_layer_indices("-1,last", 6)
