"""Pre-training heads: tied masked-LM / left-to-right LM outputs and next-sentence head."""

import math

import keras
import numpy as np
import pytest

from modeling.config import BertConfig
from modeling.encoder import BertEncoder
from modeling.heads import LeftToRightLMHead, MaskedLMHead, NextSentenceHead

CONFIG = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=16)
B, S, P = 2, 16, 5
RNG = np.random.default_rng(7)


@pytest.fixture(scope="module")
def encoder():
    return BertEncoder(CONFIG)


def randomize(layer):
    for variable in layer.weights:
        variable.assign(RNG.normal(0, 0.5, variable.shape).astype("float32"))


def reference_lm_logits(head, hidden):
    kernel, bias = (keras.ops.convert_to_numpy(w) for w in head.transform.weights)
    gamma, beta = (keras.ops.convert_to_numpy(w) for w in head.layer_norm.weights)
    table = keras.ops.convert_to_numpy(head.embedding_table)
    x = hidden @ kernel + bias
    x = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    mean, variance = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    x = (x - mean) / np.sqrt(variance + 1e-12) * gamma + beta
    return x @ table.T + keras.ops.convert_to_numpy(head.output_bias)


def test_masked_lm_logits_only_at_masked_positions(encoder):
    head = MaskedLMHead(CONFIG, encoder.embedding_table)
    randomize(head)
    hidden = RNG.normal(size=(B, S, 32)).astype("float32")
    positions = np.array([[1, 4, 9, 0, 0], [2, 3, 15, 7, 0]], "int32")
    logits = keras.ops.convert_to_numpy(head(hidden, positions))
    assert logits.shape == (B, P, CONFIG.vocab_size) and logits.dtype == np.float32
    gathered = np.take_along_axis(hidden, positions[:, :, None], axis=1)
    np.testing.assert_allclose(logits, reference_lm_logits(head, gathered),
                               rtol=1e-4, atol=1e-4)

    unmasked = hidden.copy()
    unmasked[0, [5, 6, 15]] += 3.0
    unmasked[1, [1, 9]] -= 2.0
    np.testing.assert_array_equal(head(unmasked, positions), logits)
    masked = hidden.copy()
    masked[1, 15] += 1.0
    changed = keras.ops.convert_to_numpy(head(masked, positions))
    assert not np.allclose(changed[1, 2], logits[1, 2])
    np.testing.assert_array_equal(changed[0], logits[0])


def test_output_is_tied_to_the_embedding_table():
    encoder = BertEncoder(CONFIG)
    head = MaskedLMHead(CONFIG, encoder.embedding_table)
    assert all(w is not encoder.embedding_table for w in head.weights)
    assert len(head.weights) == 5
    hidden = RNG.normal(size=(1, S, 32)).astype("float32")
    positions = np.array([[3]])
    before = keras.ops.convert_to_numpy(head(hidden, positions))
    table = keras.ops.convert_to_numpy(encoder.embedding_table)
    table[42] += RNG.normal(size=32)
    encoder.embedding_table.assign(table)
    after = keras.ops.convert_to_numpy(head(hidden, positions))
    assert not np.isclose(after[0, 0, 42], before[0, 0, 42])
    np.testing.assert_array_equal(np.delete(after, 42, -1), np.delete(before, 42, -1))


def test_left_to_right_head_is_the_lm_transform_at_every_position(encoder):
    head = LeftToRightLMHead(CONFIG, encoder.embedding_table)
    randomize(head)
    hidden = RNG.normal(size=(B, S, 32)).astype("float32")
    logits = keras.ops.convert_to_numpy(head(hidden))
    assert logits.shape == (B, S, CONFIG.vocab_size)
    np.testing.assert_allclose(logits, reference_lm_logits(head, hidden), rtol=1e-4, atol=1e-4)
    masked = MaskedLMHead(CONFIG, encoder.embedding_table)
    masked.set_weights(head.get_weights())
    all_positions = np.tile(np.arange(S), (B, 1))
    np.testing.assert_allclose(masked(hidden, all_positions), logits, rtol=1e-6, atol=1e-5)


def test_next_sentence_head_uses_google_layout():
    head = NextSentenceHead(CONFIG)
    randomize(head)
    pooled = RNG.normal(size=(B, 32)).astype("float32")
    weights, bias = (keras.ops.convert_to_numpy(w) for w in (head.output_weights,
                                                             head.output_bias))
    assert weights.shape == (2, 32) and bias.shape == (2,)
    np.testing.assert_allclose(head(pooled), pooled @ weights.T + bias, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("head_class", [MaskedLMHead, LeftToRightLMHead])
def test_lm_head_checkpoint_names(encoder, head_class):
    head = head_class(CONFIG, encoder.embedding_table)
    shapes = {name: tuple(v.shape) for name, v in head.checkpoint_variables().items()}
    assert shapes == {
        "cls/predictions/transform/dense/kernel": (32, 32),
        "cls/predictions/transform/dense/bias": (32,),
        "cls/predictions/transform/LayerNorm/gamma": (32,),
        "cls/predictions/transform/LayerNorm/beta": (32,),
        "cls/predictions/output_bias": (100,),
    }
    assert {id(v) for v in head.checkpoint_variables().values()} == \
           {id(v) for v in head.trainable_variables}


def test_next_sentence_checkpoint_names_and_config():
    head = NextSentenceHead(CONFIG, name="nsp")
    shapes = {name: tuple(v.shape) for name, v in head.checkpoint_variables().items()}
    assert shapes == {"cls/seq_relationship/output_weights": (2, 32),
                      "cls/seq_relationship/output_bias": (2,)}
    clone = NextSentenceHead.from_config(head.get_config())
    assert clone.name == "nsp" and clone.config == CONFIG


def test_initializers(encoder):
    head = MaskedLMHead(BertConfig(**{**CONFIG.to_dict(), "initializer_range": 0.05}),
                        encoder.embedding_table)
    kernel = keras.ops.convert_to_numpy(head.transform.kernel)
    assert np.abs(kernel).max() <= 0.1 and kernel.std() > 0.03
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(head.output_bias), 0.0)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(head.layer_norm.gamma), 1.0)


def test_mismatched_embedding_table_is_rejected():
    other = BertEncoder(CONFIG.replace(vocab_size=50))
    with pytest.raises(ValueError, match=r"embedding_table has shape \(50, 32\), expected "
                                         r"\[vocab_size, hidden_size\] = \(100, 32\)"):
        MaskedLMHead(CONFIG, other.embedding_table)


def test_mixed_float16_logits_are_float32(encoder):
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        head = MaskedLMHead(CONFIG, encoder.embedding_table)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    hidden = keras.ops.cast(RNG.normal(size=(B, S, 32)), "float16")
    logits = head(hidden, np.zeros((B, P), "int32"))
    assert logits.dtype == "float32" and head.layer_norm.compute_dtype == "float32"
    assert np.isfinite(keras.ops.convert_to_numpy(logits)).all()
