"""Table 7's feature choices, the masked BiLSTM tagger, and the feature cache writer."""

import os

import keras
import numpy as np
import pytest

from modeling.config import BertConfig
from modeling.encoder import BertEncoder
from modeling.feature_tagger import (FEATURE_LAYERS, FeatureBatches, FeatureTagger,
                                     check_feature_layers, combine_hidden_states, feature_width,
                                     write_features)
from tests.fixtures import TINY_CONFIG

HIDDEN = TINY_CONFIG["hidden_size"]


@pytest.fixture(scope="module")
def encoder():
    config = BertConfig.from_dict({**TINY_CONFIG, "num_hidden_layers": 5})
    return BertEncoder(config, output_hidden_states=True)


@pytest.fixture(scope="module")
def arrays():
    generator = np.random.default_rng(0)
    input_ids = generator.integers(5, TINY_CONFIG["vocab_size"], (5, 12)).astype(np.int32)
    input_mask = np.ones_like(input_ids)
    input_mask[1, 7:] = 0
    return {"input_ids": input_ids * input_mask, "input_mask": input_mask,
            "segment_ids": np.zeros_like(input_ids)}


@pytest.fixture(scope="module")
def states(encoder, arrays):
    return [np.asarray(state) for state in encoder(arrays, training=False)["hidden_states"]]


@pytest.mark.parametrize("choice, width", [
    ("embeddings", HIDDEN), ("second_to_last", HIDDEN), ("last", HIDDEN),
    ("sum_last_four", HIDDEN), ("concat_last_four", 4 * HIDDEN), ("sum_all", HIDDEN)])
def test_each_table_7_row_has_its_width(states, choice, width):
    assert len(states) == 6  # embeddings + 5 blocks, so "all" and "last four" differ
    combined = np.asarray(combine_hidden_states(states, choice))
    assert feature_width(choice, HIDDEN) == width
    assert combined.shape == (5, 12, width)


def test_each_row_takes_the_layers_the_paper_names(states):
    def combined(choice):
        return np.asarray(combine_hidden_states(states, choice))

    np.testing.assert_array_equal(combined("embeddings"), states[0])
    np.testing.assert_array_equal(combined("second_to_last"), states[4])
    np.testing.assert_array_equal(combined("last"), states[5])
    np.testing.assert_allclose(combined("sum_last_four"), sum(states[2:6]), rtol=1e-6)
    np.testing.assert_allclose(combined("sum_all"), sum(states[1:6]), rtol=1e-6)
    np.testing.assert_array_equal(combined("concat_last_four"),
                                  np.concatenate(states[:1:-1], axis=-1))  # last block first


def test_bad_choices_and_shallow_encoders_are_refused():
    three = [np.full((1, 2, 4), float(k)) for k in range(3)]  # embeddings + 2 blocks
    with pytest.raises(ValueError, match="at least 4 block"):
        combine_hidden_states(three, "concat_last_four")
    assert combine_hidden_states(three, "second_to_last") is three[1]
    with pytest.raises(ValueError, match="at least 2 block"):
        check_feature_layers("second_to_last", 1)
    check_feature_layers("sum_all", 1)
    with pytest.raises(ValueError, match="must be one of"):
        feature_width("first", 8)
    assert set(FEATURE_LAYERS) == {"embeddings", "second_to_last", "last", "sum_last_four",
                                   "concat_last_four", "sum_all"}


def test_write_features_matches_the_encoder(encoder, arrays, states, tmp_path):
    path = str(tmp_path / "cache" / "train.npy")
    write_features(encoder, arrays, "sum_last_four", path, batch_size=2)
    assert os.listdir(tmp_path / "cache") == ["train.npy"]  # no partial file left
    written = np.load(path)
    assert written.dtype == np.float32
    np.testing.assert_allclose(written, sum(states[2:6]), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="output_hidden_states"):
        write_features(BertEncoder(encoder.config), arrays, "last", path, 2)


def test_padding_does_not_reach_real_positions():
    keras.utils.set_random_seed(1)
    tagger = FeatureTagger(num_labels=3, lstm_units=4, dropout=0.0)
    mask = np.array([[1, 1, 1, 0, 0]], np.int32)
    features = np.random.default_rng(0).normal(size=(1, 5, 6)).astype(np.float32)
    noisy = features.copy()
    noisy[:, 3:] = 100.0
    clean = np.asarray(tagger({"features": features, "input_mask": mask}))
    dirty = np.asarray(tagger({"features": noisy, "input_mask": mask}))
    assert clean.shape == (1, 5, 3)
    np.testing.assert_allclose(clean[:, :3], dirty[:, :3], rtol=1e-5, atol=1e-6)


def test_loss_ignores_unlabelled_positions():
    tagger = FeatureTagger(num_labels=2, lstm_units=2)
    logits = np.array([[[0.0, 3.0], [5.0, -5.0], [9.0, 0.0]]], np.float32)
    labels = np.array([[1, -1, 0]], np.int32)
    expected = np.mean([np.log1p(np.exp(-3.0)), np.log1p(np.exp(-9.0))])
    np.testing.assert_allclose(float(tagger.compute_loss(y=labels, y_pred=logits)), expected,
                               rtol=1e-5)


def test_batches_cover_every_row_reshuffled_each_epoch_or_in_order():
    features = np.arange(20 * 3 * 2, dtype=np.float32).reshape(20, 3, 2)
    mask = np.ones((20, 3), np.int32)
    labels = np.arange(20 * 3, dtype=np.int32).reshape(20, 3)
    training = FeatureBatches(features, mask, labels, batch_size=8, seed=0)
    assert len(training) == 3

    def epoch():
        batches = [training[index] for index in range(len(training))]
        for inputs, batch_labels in batches:  # rows stay aligned across the three arrays
            np.testing.assert_array_equal(inputs["features"][:, :, 0] // 2, batch_labels)
        return np.concatenate([batch_labels[:, 0] // 3 for _, batch_labels in batches])

    first = epoch()
    training.on_epoch_end()
    second = epoch()
    assert sorted(first) == sorted(second) == list(range(20))
    assert not np.array_equal(first, second)
    ordered = FeatureBatches(features, mask, batch_size=8)
    assert len(ordered[2]) == 1  # inputs only, for predict
    np.testing.assert_array_equal(
        np.concatenate([ordered[index][0]["features"] for index in range(3)]), features)
