"""tasks.features: the input-line and layer-index parsing of extract_features.py."""

import pytest

from tasks import features
from training.configs import ModelFiles


def test_pair_lines_split_on_the_original_separator():
    assert features.parse_line("a b ||| c d") == ("a b", "c d")
    assert features.parse_line("no pair here") == ("no pair here", None)
    assert features.parse_line("a|||b") == ("a|||b", None)


@pytest.mark.parametrize("line", ["hello world |||", "hello world ||| ", "hello world |||   "])
def test_an_empty_second_text_is_a_single_text(line):
    assert features.parse_line(line.strip()) == ("hello world", None)
    assert features.parse_line(line) == ("hello world", None)


def test_an_output_file_that_is_a_folder_is_refused_before_any_work(tmp_path):
    extraction = features.FeatureExtraction(str(tmp_path / "in.txt"), str(tmp_path))
    files = ModelFiles(str(tmp_path / "no_config.json"), str(tmp_path / "no_vocab.txt"),
                       init_checkpoint=str(tmp_path / "no_checkpoint"))
    with pytest.raises(IsADirectoryError, match=f"^--output_file={tmp_path} is a folder"):
        features.run(files, extraction)


def test_layer_indices_are_checked_against_the_model():
    assert features.parse_layer_indices("-1,-2", 6) == [-1, -2]
    assert features.parse_layer_indices("0,5", 6) == [0, 5]
    with pytest.raises(ValueError, match="out of range"):
        features.parse_layer_indices("-7", 6)
    with pytest.raises(ValueError, match="integers"):
        features.parse_layer_indices("-1,last", 6)

