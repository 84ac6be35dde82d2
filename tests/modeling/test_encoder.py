"""BertEncoder: outputs, masking, causal mode, checkpoint names, serialization, precision."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.config import BertConfig
from modeling.encoder import BertEncoder
from modeling.layers.activations import get_activation

CONFIG = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=20,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
B, S = 2, 16


def features(seed=0, pad_from=11):
    rng = np.random.default_rng(seed)
    mask = np.ones((B, S), "int32")
    mask[1, pad_from:] = 0
    segments = np.zeros((B, S), "int32")
    segments[:, 6:] = 1
    return {"input_ids": rng.integers(0, 100, (B, S)).astype("int32"), "input_mask": mask,
            "segment_ids": segments * mask}


def numpy_outputs(model, inputs):
    return {key: keras.ops.convert_to_numpy(value)
            for key, value in model(inputs).items() if not isinstance(value, list)}


def expected_checkpoint_shapes(config):
    """Google's TF1 names and shapes, written out by hand."""
    h, i = config.hidden_size, config.intermediate_size
    shapes = {
        "bert/embeddings/word_embeddings": (config.vocab_size, h),
        "bert/embeddings/token_type_embeddings": (config.type_vocab_size, h),
        "bert/embeddings/position_embeddings": (config.max_position_embeddings, h),
        "bert/embeddings/LayerNorm/gamma": (h,), "bert/embeddings/LayerNorm/beta": (h,),
        "bert/pooler/dense/kernel": (h, h), "bert/pooler/dense/bias": (h,),
    }
    for n in range(config.num_hidden_layers):
        p = f"bert/encoder/layer_{n}"
        shapes.update({
            f"{p}/attention/self/query/kernel": (h, h), f"{p}/attention/self/query/bias": (h,),
            f"{p}/attention/self/key/kernel": (h, h), f"{p}/attention/self/key/bias": (h,),
            f"{p}/attention/self/value/kernel": (h, h), f"{p}/attention/self/value/bias": (h,),
            f"{p}/attention/output/dense/kernel": (h, h),
            f"{p}/attention/output/dense/bias": (h,),
            f"{p}/attention/output/LayerNorm/gamma": (h,),
            f"{p}/attention/output/LayerNorm/beta": (h,),
            f"{p}/intermediate/dense/kernel": (h, i), f"{p}/intermediate/dense/bias": (i,),
            f"{p}/output/dense/kernel": (i, h), f"{p}/output/dense/bias": (h,),
            f"{p}/output/LayerNorm/gamma": (h,), f"{p}/output/LayerNorm/beta": (h,),
        })
    return shapes


@pytest.fixture(scope="module")
def encoder():
    return BertEncoder(CONFIG)


def test_output_shapes(encoder):
    outputs = encoder(features())
    assert set(outputs) == {"sequence_output", "pooled_output"}
    assert outputs["sequence_output"].shape == (B, S, 32)
    assert outputs["pooled_output"].shape == (B, 32)


def test_pooler_is_tanh_dense_on_cls(encoder):
    outputs = numpy_outputs(encoder, features())
    kernel, bias = (keras.ops.convert_to_numpy(w) for w in encoder.pooler.weights)
    expected = np.tanh(outputs["sequence_output"][:, 0] @ kernel + bias)
    np.testing.assert_allclose(outputs["pooled_output"], expected, rtol=1e-5, atol=1e-6)


def test_hidden_states_and_attentions_on_request(encoder):
    full = BertEncoder(CONFIG, output_hidden_states=True, output_attentions=True)
    full.set_weights(encoder.get_weights())
    inputs = features()
    outputs = full(inputs)
    assert len(outputs["hidden_states"]) == 3 and len(outputs["attentions"]) == 2
    np.testing.assert_array_equal(outputs["hidden_states"][-1], outputs["sequence_output"])
    np.testing.assert_array_equal(outputs["hidden_states"][0],
                                  full.embeddings(inputs["input_ids"], inputs["segment_ids"]))
    np.testing.assert_allclose(outputs["sequence_output"],
                               encoder(inputs)["sequence_output"], rtol=1e-6, atol=1e-6)
    probs = keras.ops.convert_to_numpy(outputs["attentions"][1])
    assert probs.shape == (B, 2, S, S) and probs.dtype == np.float32
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
    assert np.all(probs[1, :, :, 11:] == 0.0)


@pytest.mark.parametrize("causal", [False, True])
def test_output_positions_are_those_positions_of_the_full_output(encoder, causal):
    model = BertEncoder(CONFIG, causal=causal)
    model.set_weights(encoder.get_weights())
    inputs = features()
    full = numpy_outputs(model, inputs)
    positions = np.array([[5, 0, 15], [10, 10, 2]], "int32")
    some = model(inputs, output_positions=positions)
    assert some["sequence_output"].shape == (B, 3, 32)
    np.testing.assert_allclose(some["sequence_output"],
                               np.take_along_axis(full["sequence_output"],
                                                  positions[:, :, None], axis=1),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(some["pooled_output"], full["pooled_output"], rtol=1e-5,
                               atol=1e-6)
    none = model(inputs, output_positions=np.zeros((B, 0), "int32"))
    assert none["sequence_output"].shape == (B, 0, 32)
    np.testing.assert_allclose(none["pooled_output"], full["pooled_output"], rtol=1e-5,
                               atol=1e-6)


def test_output_positions_refuse_hidden_states_and_attentions(encoder):
    for flag in ("output_hidden_states", "output_attentions"):
        model = BertEncoder(CONFIG, **{flag: True})
        with pytest.raises(ValueError, match="output_positions .* " + flag):
            model(features(), output_positions=np.zeros((B, 1), "int32"))


def test_padding_does_not_change_real_positions(encoder):
    inputs = features()
    changed = {key: value.copy() for key, value in inputs.items()}
    changed["input_ids"][1, 11:] = (changed["input_ids"][1, 11:] + 7) % 100
    before, after = numpy_outputs(encoder, inputs), numpy_outputs(encoder, changed)
    np.testing.assert_allclose(before["sequence_output"][:, :11],
                               after["sequence_output"][:, :11], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(before["pooled_output"], after["pooled_output"], atol=1e-6)


@pytest.mark.parametrize("causal", [True, False])
def test_causal_attention_ignores_later_tokens(encoder, causal):
    model = BertEncoder(CONFIG, causal=causal)
    model.set_weights(encoder.get_weights())
    inputs = features()
    changed = {key: value.copy() for key, value in inputs.items()}
    changed["input_ids"][:, 8:] = (changed["input_ids"][:, 8:] + 13) % 100
    before = numpy_outputs(model, inputs)["sequence_output"]
    after = numpy_outputs(model, changed)["sequence_output"]
    unchanged = np.allclose(before[:, :8], after[:, :8], rtol=1e-6, atol=1e-6)
    assert unchanged == causal
    assert not np.allclose(before[:, 8:], after[:, 8:])


def test_checkpoint_names_and_shapes(encoder):
    variables = encoder.checkpoint_variables()
    shapes = {name: tuple(variable.shape) for name, variable in variables.items()}
    assert shapes == expected_checkpoint_shapes(CONFIG)
    trainable = encoder.trainable_variables
    assert len(trainable) == len(variables)
    assert {id(v) for v in variables.values()} == {id(v) for v in trainable}
    assert variables["bert/embeddings/word_embeddings"] is encoder.embedding_table


def test_initializers(encoder):
    for name, variable in encoder.checkpoint_variables().items():
        value = keras.ops.convert_to_numpy(variable)
        if name.endswith(("bias", "beta")):
            np.testing.assert_array_equal(value, 0.0, err_msg=name)
        elif name.endswith("gamma"):
            np.testing.assert_array_equal(value, 1.0, err_msg=name)
        else:
            assert np.abs(value).max() <= 0.04 and 0.01 < value.std() < 0.03, name


@pytest.mark.parametrize("activation", ["gelu", "gelu_approximate", "relu"])
def test_configured_activation_is_used(activation):
    model = BertEncoder(CONFIG.replace(hidden_act=activation))
    dense = model.blocks[1].intermediate
    x = np.random.default_rng(3).normal(0, 30, (4, 32)).astype("float32")
    kernel, bias = (keras.ops.convert_to_numpy(w) for w in dense.weights)
    np.testing.assert_allclose(dense(x), get_activation(activation)(x @ kernel + bias),
                               rtol=1e-6, atol=1e-6)


def test_from_config_round_trip(encoder):
    clone = BertEncoder.from_config(encoder.get_config())
    assert clone.config == encoder.config
    assert [(v.path, v.shape) for v in clone.weights] == \
           [(v.path, v.shape) for v in encoder.weights]
    clone.set_weights(encoder.get_weights())
    inputs = features()
    for key, value in numpy_outputs(encoder, inputs).items():
        np.testing.assert_array_equal(numpy_outputs(clone, inputs)[key], value)


def test_keras_file_round_trip(encoder, tmp_path):
    model = BertEncoder(CONFIG, causal=True, output_hidden_states=True)
    model.set_weights([w + 0.01 for w in encoder.get_weights()])
    path = str(tmp_path / "encoder.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, BertEncoder) and loaded.causal and loaded.output_hidden_states
    inputs = features()
    expected, got = model(inputs), loaded(inputs)
    np.testing.assert_array_equal(got["sequence_output"], expected["sequence_output"])
    np.testing.assert_array_equal(got["hidden_states"][1], expected["hidden_states"][1])


def test_jit_compiled_forward_matches_eager(encoder):
    inputs = {key: tf.constant(value) for key, value in features().items()}
    compiled = tf.function(lambda x: encoder(x), jit_compile=True)(inputs)
    eager = encoder(inputs)
    np.testing.assert_allclose(compiled["sequence_output"], eager["sequence_output"],
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("policy, tolerance", [("mixed_float16", 2e-2),
                                               ("mixed_bfloat16", 1e-1)])
def test_mixed_precision(encoder, policy, tolerance):
    keras.mixed_precision.set_global_policy(policy)
    try:
        mixed = BertEncoder(CONFIG, output_attentions=True)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    mixed.set_weights(encoder.get_weights())
    assert all(v.dtype == "float32" for v in mixed.weights)
    assert mixed.blocks[0].attention_layer_norm.compute_dtype == "float32"
    assert mixed.embeddings.layer_norm.compute_dtype == "float32"
    inputs = features()
    outputs = mixed(inputs)
    assert outputs["sequence_output"].dtype == policy.split("_")[1]
    assert outputs["attentions"][0].dtype == "float32"
    expected = numpy_outputs(encoder, inputs)["sequence_output"]
    got = keras.ops.convert_to_numpy(keras.ops.cast(outputs["sequence_output"], "float32"))
    np.testing.assert_allclose(got, expected, atol=tolerance)


def test_sequence_longer_than_positions_is_rejected(encoder):
    inputs = {key: np.zeros((1, 21), "int32") for key in ("input_ids", "input_mask",
                                                          "segment_ids")}
    with pytest.raises(ValueError, match="21 positions .* max_position_embeddings=20"):
        encoder(inputs)
