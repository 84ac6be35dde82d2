"""BERT layers against plain numpy re-computations of the paper's formulas."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.config import BertConfig
from modeling.layers import attention as attention_module
from modeling.layers.activations import get_activation
from modeling.layers.attention import MASK_BIAS, SelfAttention, attend, attention_bias
from modeling.layers.dropout import Dropout
from modeling.layers.embeddings import BertEmbeddings
from modeling.layers.transformer import TransformerBlock
from modeling.layers.xla_context import compiled_by_xla
from modeling.optimization import create_optimizer
from modeling.pretrainer import BertPretrainer, pretraining_losses

B, S, H, HEADS, FFN = 2, 7, 16, 2, 24
RNG = np.random.default_rng(1)


def erf(x):
    return np.vectorize(math.erf)(x)


def layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * gamma + beta


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def reference_attention(layer, x, mask):
    """Three separate projections, as the paper writes them."""
    w = {name: keras.ops.convert_to_numpy(getattr(layer, name)) for name in (
        "query_kernel", "query_bias", "key_kernel", "key_bias", "value_kernel", "value_bias",
        "output_kernel", "output_bias")}
    size = H // HEADS

    def heads(t):
        return t.reshape(B, S, HEADS, size).transpose(0, 2, 1, 3)
    q = heads(x @ w["query_kernel"] + w["query_bias"])
    k = heads(x @ w["key_kernel"] + w["key_bias"])
    v = heads(x @ w["value_kernel"] + w["value_bias"])
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size)
    scores = scores + (1.0 - mask[:, None, None, :]) * MASK_BIAS
    probs = softmax(scores)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(B, S, H)
    return context @ w["output_kernel"] + w["output_bias"], probs


def random_weights(layer):
    """Replace initial zeros/ones so biases and LayerNorm parameters are exercised."""
    for variable in layer.weights:
        variable.assign(RNG.normal(0, 0.3, variable.shape).astype("float32"))


def padded_mask():
    mask = np.ones((B, S), "float32")
    mask[1, 4:] = 0
    return mask


@pytest.mark.parametrize("name, reference", [
    ("gelu", lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2)))),
    ("gelu_approximate",
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    ("relu", lambda x: np.maximum(x, 0))])
def test_activations(name, reference):
    x = np.linspace(-4, 4, 41).astype("float32")
    result = keras.ops.convert_to_numpy(get_activation(name)(x))
    np.testing.assert_allclose(result, reference(x), rtol=1e-5, atol=1e-6)


def test_exact_and_approximate_gelu_differ():
    x = np.array([-2.5, 1.7], "float32")
    difference = get_activation("gelu")(x) - get_activation("gelu_approximate")(x)
    assert np.abs(keras.ops.convert_to_numpy(difference)).max() > 1e-5


def test_unknown_activation():
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        get_activation("swish")


def test_attention_bias_padding_and_causal():
    mask = np.array([[1, 1, 0]])
    bias = keras.ops.convert_to_numpy(attention_bias(mask))
    np.testing.assert_array_equal(bias, [[[[0, 0, MASK_BIAS]]]])
    causal = keras.ops.convert_to_numpy(attention_bias(mask, causal=True))[0, 0]
    expected = np.array([[0, 1, 1], [0, 0, 1], [0, 0, 1]]) * MASK_BIAS
    np.testing.assert_array_equal(causal, expected)
    assert causal.dtype == np.float32


def test_attention_stores_google_shapes_and_initializers():
    layer = SelfAttention(H, HEADS, initializer_range=0.05)
    layer.build()
    for name in ("query", "key", "value", "output"):
        kernel = keras.ops.convert_to_numpy(getattr(layer, f"{name}_kernel"))
        assert kernel.shape == (H, H)
        assert np.abs(kernel).max() <= 2 * 0.05 and kernel.std() > 0.02
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(getattr(layer, f"{name}_bias")),
                                      np.zeros(H))


def test_attention_matches_separate_projections():
    layer = SelfAttention(H, HEADS, dropout_rate=0.0)
    layer.build()
    random_weights(layer)
    x = RNG.normal(size=(B, S, H)).astype("float32")
    mask = padded_mask()
    output, probs = layer(x, attention_bias(mask), return_probabilities=True)
    expected_output, expected_probs = reference_attention(layer, x, mask)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(probs), expected_probs, atol=1e-5)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(output), expected_output,
                               rtol=1e-4, atol=1e-4)
    assert np.all(keras.ops.convert_to_numpy(probs)[1, :, :, 4:] == 0.0)


def test_padded_keys_do_not_influence_real_positions():
    layer = SelfAttention(H, HEADS, dropout_rate=0.0)
    mask = padded_mask()
    x = RNG.normal(size=(B, S, H)).astype("float32")
    changed = x.copy()
    changed[1, 4:] = RNG.normal(size=(S - 4, H))
    bias = attention_bias(mask)
    before = keras.ops.convert_to_numpy(layer(x, bias))
    after = keras.ops.convert_to_numpy(layer(changed, bias))
    np.testing.assert_array_equal(before[1, :4], after[1, :4])
    np.testing.assert_array_equal(before[0], after[0])


def test_transformer_block_is_post_layer_norm():
    block = TransformerBlock(H, HEADS, FFN, hidden_act="gelu", layer_norm_eps=1e-12,
                             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    block.build()
    random_weights(block)
    x = RNG.normal(size=(B, S, H)).astype("float32")
    mask = padded_mask()
    output = keras.ops.convert_to_numpy(block(x, attention_bias(mask)))

    def weights(layer):
        return [keras.ops.convert_to_numpy(w) for w in layer.weights]
    attended, _ = reference_attention(block.attention, x, mask)
    hidden = layer_norm(x + attended, *weights(block.attention_layer_norm))
    w1, b1 = weights(block.intermediate)
    w2, b2 = weights(block.output_dense)
    inner = hidden @ w1 + b1
    inner = 0.5 * inner * (1 + erf(inner / math.sqrt(2)))
    expected = layer_norm(hidden + inner @ w2 + b2, *weights(block.output_layer_norm))
    np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-4)


def test_transformer_block_initializers():
    block = TransformerBlock(H, HEADS, FFN, initializer_range=0.02)
    block.build()
    for variable in block.weights:
        value = keras.ops.convert_to_numpy(variable)
        if variable.name.endswith("kernel"):
            assert np.abs(value).max() <= 0.04 and value.std() > 0.01, variable.path
        elif variable.name.endswith("bias") or variable.name == "beta":
            np.testing.assert_array_equal(value, 0.0, err_msg=variable.path)
        else:
            assert variable.name == "gamma"
            np.testing.assert_array_equal(value, 1.0, err_msg=variable.path)


def test_embeddings_sum_then_layer_norm():
    layer = BertEmbeddings(vocab_size=11, hidden_size=H, max_position_embeddings=S + 3,
                           type_vocab_size=2, layer_norm_eps=1e-12, dropout_rate=0.0)
    layer.build()
    random_weights(layer)
    ids = RNG.integers(0, 11, (B, S))
    segments = RNG.integers(0, 2, (B, S))
    output = keras.ops.convert_to_numpy(layer(ids, segments))
    word, token_type, position, gamma, beta = (
        keras.ops.convert_to_numpy(v) for v in (
            layer.word_embeddings, layer.token_type_embeddings, layer.position_embeddings,
            layer.layer_norm.gamma, layer.layer_norm.beta))
    expected = layer_norm(word[ids] + token_type[segments] + position[None, :S], gamma, beta)
    np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-5)
    assert (word.shape, token_type.shape, position.shape) == ((11, H), (2, H), (S + 3, H))


def test_embeddings_reject_sequences_longer_than_positions():
    layer = BertEmbeddings(11, H, max_position_embeddings=4, type_vocab_size=2)
    with pytest.raises(ValueError, match="input_ids has 7 positions but the model has only "
                                         "max_position_embeddings=4"):
        layer(np.zeros((1, 7), "int32"), np.zeros((1, 7), "int32"))


@pytest.mark.parametrize("layer", [
    SelfAttention(H, HEADS, initializer_range=0.03, dropout_rate=0.2, name="attention"),
    TransformerBlock(H, HEADS, FFN, hidden_act="relu", layer_norm_eps=1e-6, name="layer_3"),
    BertEmbeddings(11, H, 9, 3, initializer_range=0.01, layer_norm_eps=1e-5, name="emb")])
def test_get_config_round_trip(layer):
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config
    serialized = keras.saving.serialize_keras_object(layer)
    assert serialized["registered_name"].startswith("bert>")
    assert keras.saving.deserialize_keras_object(serialized).get_config() == config


def concatenated_attention(self, hidden_states, bias, training=None, return_probabilities=False,
                           query_rows=None):
    """The layer's earlier implementation, kept to pin that the faster one computes the same.

    One concatenated [hidden, 3 * hidden] projection, strided slices of a
    [batch, seq, 3, heads, size] tensor, and einsums over that layout; every
    position is a query, and `query_rows` are gathered from the full output.
    """
    ops = keras.ops
    batch, length = ops.shape(hidden_states)[0], ops.shape(hidden_states)[1]
    kernel = ops.concatenate([self.query_kernel, self.key_kernel, self.value_kernel], axis=1)
    qkv_bias = ops.concatenate([self.query_bias, self.key_bias, self.value_bias], axis=0)
    qkv = ops.matmul(hidden_states, kernel) + qkv_bias
    qkv = ops.reshape(qkv, (batch, length, 3, self.num_heads, self.head_size))
    query, key, value = (qkv[:, :, i] for i in range(3))
    query = query * ops.cast(1.0 / math.sqrt(self.head_size), query.dtype)
    scores = ops.einsum("bqhd,bkhd->bhqk", query, key)
    scores = ops.cast(scores, "float32") + ops.cast(bias, "float32")
    probabilities = ops.softmax(scores, axis=-1)
    dropped = self.dropout(ops.cast(probabilities, self.compute_dtype), training=training)
    context = ops.einsum("bhqk,bkhd->bqhd", dropped, value)
    context = ops.reshape(context, (batch, length, self.hidden_size))
    output = ops.matmul(context, self.output_kernel) + self.output_bias
    if query_rows is not None:
        output = tf.gather(output, query_rows, axis=1, batch_dims=1)
    if return_probabilities:
        return output, probabilities
    return output


def test_attention_outputs_and_gradients_match_the_concatenated_implementation():
    layer = SelfAttention(H, HEADS, dropout_rate=0.0)
    layer.build()
    random_weights(layer)
    x = tf.constant(RNG.normal(size=(B, S, H)).astype("float32"))
    bias = attention_bias(padded_mask())
    results = {}
    for name, call in (("new", SelfAttention.call), ("old", concatenated_attention)):
        with tf.GradientTape() as tape:
            tape.watch(x)
            output = call(layer, x, bias)
            loss = tf.reduce_sum(output * tf.sin(output))
        results[name] = [output, *tape.gradient(loss, [x, *layer.trainable_variables])]
    for new, old in zip(results["new"], results["old"]):
        np.testing.assert_allclose(new.numpy(), old.numpy(), rtol=1e-5, atol=1e-5)


def seeded_pretraining_losses(steps: int) -> list[float]:
    """Losses of a few seeded pre-training steps of a tiny BERT, dropout on."""
    keras.utils.set_random_seed(3)
    config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=32,
                        max_position_embeddings=16)
    model = BertPretrainer(config)
    optimizer = create_optimizer(1e-3, 100, 0)
    rng = np.random.default_rng(0)
    features = {"input_ids": rng.integers(0, 64, (4, 12)), "input_mask": np.ones((4, 12)),
                "segment_ids": np.zeros((4, 12)), "masked_lm_positions": [[1, 5, 7]] * 4,
                "masked_lm_ids": rng.integers(0, 64, (4, 3)),
                "masked_lm_weights": np.ones((4, 3)), "next_sentence_labels": [[0], [1]] * 2}
    features = {key: tf.constant(value, "float32" if "weights" in key else "int32")
                for key, value in features.items()}

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = pretraining_losses(features, model(features, training=True), "mlm_nsp")["loss"]
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    return [float(step()) for _ in range(steps)]


def test_seeded_training_losses_match_the_concatenated_implementation(monkeypatch):
    """Same dropout masks, same updates: the loss curve is unchanged but for float noise.

    The earlier implementation also computed the last block at every position.
    """
    new = seeded_pretraining_losses(4)
    monkeypatch.setattr(SelfAttention, "call", concatenated_attention)
    old = seeded_pretraining_losses(4)
    assert new[-1] < new[0]
    np.testing.assert_allclose(new, old, rtol=1e-5)


def test_attention_backward_has_no_concatenation_or_slice_padding():
    """The projections' gradients go straight to each kernel: no concat, no padded slices."""
    layer = SelfAttention(H, HEADS)
    layer.build()
    x = tf.constant(RNG.normal(size=(B, S, H)).astype("float32"))
    bias = attention_bias(padded_mask())

    @tf.function
    def gradients():
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x, bias, training=True))
        return tape.gradient(loss, [x, *layer.trainable_variables])

    op_types = {op.type for op in gradients.get_concrete_function().graph.get_operations()}
    assert not op_types & {"ConcatV2", "StridedSlice", "StridedSliceGrad", "Einsum"}
    assert "BatchMatMulV2" in op_types


def test_attend_gradient_equals_the_softmax_dropout_product_chain():
    """The softmax's row sums taken from the context give the same gradients."""
    scores = tf.constant(RNG.normal(size=(B, HEADS, S, S)).astype("float32") * 3)
    value = tf.constant(RNG.normal(size=(B, HEADS, S, H // HEADS)).astype("float32"))
    upstream = tf.constant(RNG.normal(size=(B, HEADS, S, H // HEADS)).astype("float32"))
    keep = tf.constant(RNG.random(size=(B, HEADS, S, S)) > 0.3)
    for mask, scale in ((None, None), (keep, tf.constant(1 / 0.7))):
        def chained(scores, value):
            probabilities = tf.nn.softmax(scores, axis=-1)
            if mask is not None:
                probabilities = tf.where(mask, probabilities * scale, 0.0)
            return tf.matmul(probabilities, value)

        results = []
        for function in (chained, lambda s, v: attend(s, v, mask, scale)):
            with tf.GradientTape() as tape:
                tape.watch([scores, value])
                context = function(scores, value)
            results.append([context, *tape.gradient(context, [scores, value],
                                                     output_gradients=upstream)])
        for ours, chain in zip(*results):
            np.testing.assert_allclose(ours.numpy(), chain.numpy(), rtol=1e-5, atol=1e-6)


def test_attention_under_xla_with_dropout_matches_the_unfused_path(monkeypatch):
    """Same masks from the same seed state: outputs and every gradient agree."""
    layer = SelfAttention(H, HEADS, dropout_rate=0.3)
    layer.build()
    random_weights(layer)
    x = tf.constant(RNG.normal(size=(B, S, H)).astype("float32"))
    weights = tf.constant(RNG.normal(size=(B, S, H)).astype("float32"))
    bias = attention_bias(padded_mask())
    state = layer.dropout.seed_generator.state.numpy()

    def compiled_step():
        layer.dropout.seed_generator.state.assign(state)

        @tf.function(jit_compile=True)
        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(layer(x, bias, training=True) * weights)
            return tape.gradient(loss, [x, *layer.trainable_variables]), loss

        return step(x)

    calls = []
    monkeypatch.setattr(attention_module, "attend",
                        lambda *args: calls.append(args) or attend(*args))
    ours = compiled_step()
    assert len(calls) == 1 and calls[0][2] is not None  # the written gradient, with a mask
    monkeypatch.setattr(attention_module, "compiled_by_xla", lambda: False)
    chained = compiled_step()
    assert len(calls) == 1
    np.testing.assert_allclose(ours[1].numpy(), chained[1].numpy(), rtol=1e-6)
    names = ["inputs", *(variable.name for variable in layer.trainable_variables)]
    for name, gradient, reference in zip(names, ours[0], chained[0]):
        if name == "key_bias":
            # A shift of a query's scores leaves its softmax unchanged, so this
            # gradient is zero: both are rounding noise.
            assert np.abs(gradient.numpy()).max() < 1e-5 > np.abs(reference.numpy()).max()
            continue
        np.testing.assert_allclose(gradient.numpy(), reference.numpy(), rtol=1e-5, atol=1e-6)


def test_dropout_under_xla_keeps_the_rate_scales_and_replays_from_its_seed_state():
    layer = Dropout(0.1, seed=3)
    inputs = tf.ones([400, 500])

    @tf.function(jit_compile=True)
    def compiled(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=True)
            total = tf.reduce_sum(y)
        return y, tape.gradient(total, x), compiled_by_xla()

    state = layer.seed_generator.state.numpy()
    first, gradient, under_xla = (t.numpy() for t in compiled(inputs))
    assert under_xla and not compiled_by_xla()
    kept = first != 0
    # 200,000 draws: the kept share's standard deviation is 0.0007.
    assert abs(kept.mean() - 0.9) < 0.004
    # 16-bit draws drop round(0.1 * 65536) of 65536 levels; kept units undo exactly that.
    np.testing.assert_allclose(first[kept], 65536 / (65536 - 6554), rtol=1e-6)
    np.testing.assert_array_equal(gradient, first)  # gradient flows through kept units only
    second = compiled(inputs)[0].numpy()
    assert (second != first).mean() > 0.1  # a new mask each call
    layer.seed_generator.state.assign(state)  # as a resumed run restores it
    np.testing.assert_array_equal(compiled(inputs)[0].numpy(), first)
    # An odd number of units: the last 32-bit draw serves one unit only.
    odd = tf.function(lambda x: layer(x, training=True), jit_compile=True)(tf.ones([7, 13]))
    assert odd.shape == (7, 13) and set(np.unique(odd.numpy())) <= {0.0, np.float32(first[kept][0])}
    # Under a float16 policy the mask keeps the input's dtype.
    half = Dropout(0.1, seed=3, dtype="mixed_float16")
    output = tf.function(lambda x: half(x, training=True), jit_compile=True)(
        tf.ones([8, 8], "float16"))
    assert output.dtype == tf.float16
    np.testing.assert_array_equal(layer(inputs, training=False).numpy(), inputs.numpy())


def test_dropout_outside_xla_is_keras_in_float32_and_draws_float32_under_bfloat16():
    inputs = tf.random.normal([64, 300], seed=1)
    ours, keras_layer = Dropout(0.1, seed=7), keras.layers.Dropout(0.1, seed=7)
    for _ in range(2):  # the same masks call after call, eager and in a graph
        np.testing.assert_array_equal(ours(inputs, training=True).numpy(),
                                      keras_layer(inputs, training=True).numpy())
    np.testing.assert_array_equal(tf.function(lambda x: ours(x, training=True))(inputs).numpy(),
                                  tf.function(lambda x: keras_layer(x, training=True))(inputs))
    half = Dropout(0.1, seed=3, dtype="mixed_bfloat16")
    step = tf.function(lambda x: half(x, training=True))
    output = step(tf.ones([400, 500], "bfloat16"))
    assert output.dtype == tf.bfloat16 and abs((output.numpy() != 0).mean() - 0.9) < 0.004
    draws = [op for op in step.get_concrete_function(tf.TensorSpec([400, 500], "bfloat16"))
             .graph.get_operations() if op.type == "StatelessRandomUniformV2"]
    assert [op.get_attr("dtype") for op in draws] == [tf.float32]


@pytest.mark.parametrize("jit_compile", [False, True])
def test_dropout_of_some_rows_drops_the_units_a_full_call_drops(jit_compile):
    layer = Dropout(0.3, seed=5)
    inputs = tf.constant(RNG.normal(size=(3, 4, 10, 6)).astype("float32"))
    rows = tf.constant([[9, 0, 9], [2, 3, 4], [0, 0, 0]])
    state = layer.seed_generator.state.numpy()

    @tf.function(jit_compile=jit_compile)
    def full_then_rows(x):
        return tf.gather(layer(x, training=True), rows, axis=2, batch_dims=1)

    @tf.function(jit_compile=jit_compile)
    def rows_only(x):
        picked = tf.gather(x, rows, axis=2, batch_dims=1)
        return layer.drop_rows(picked, rows, tf.shape(x), axis=2, training=True)

    expected = full_then_rows(inputs).numpy()
    layer.seed_generator.state.assign(state)
    dropped = rows_only(inputs).numpy()
    assert 0.1 < (dropped == 0).mean() < 0.5
    np.testing.assert_array_equal(dropped, expected)
    picked = tf.gather(inputs, rows, axis=2, batch_dims=1)
    np.testing.assert_array_equal(layer.drop_rows(picked, rows, tf.shape(inputs), axis=2,
                                                  training=False).numpy(), picked.numpy())


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_block_output_rows_are_those_rows_of_the_full_output(causal, jit_compile, policy):
    """Output and every gradient, under dropout, as computing all rows then gathering."""
    block = TransformerBlock(H, HEADS, FFN, hidden_dropout_prob=0.2,
                             attention_probs_dropout_prob=0.2, dtype=policy)
    block.build()
    random_weights(block)
    x = tf.constant(RNG.normal(size=(B, S, H)).astype("float32"))
    weights = tf.constant(RNG.normal(size=(B, 3, H)).astype("float32"))
    rows = tf.constant([[0, 3, 3], [0, 6, 1]])
    bias = attention_bias(padded_mask(), causal=causal)
    states = [layer.seed_generator.state.numpy()
              for layer in (block.attention.dropout, block.attention_dropout, block.output_dropout)]

    def gradients(forward):
        for layer, state in zip((block.attention.dropout, block.attention_dropout,
                                 block.output_dropout), states):
            layer.seed_generator.state.assign(state)

        @tf.function(jit_compile=jit_compile)
        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                output = tf.cast(forward(tf.cast(x, block.compute_dtype)), "float32")
                loss = tf.reduce_sum(output * weights)
            return output, tape.gradient(loss, [x, *block.trainable_variables])

        return step(x)

    rows_output, rows_gradients = gradients(
        lambda x: block(x, bias, training=True, output_rows=rows))
    full_output, full_gradients = gradients(
        lambda x: tf.gather(block(x, bias, training=True), rows, axis=1, batch_dims=1))
    tolerance = 1e-5 if policy == "float32" else 2e-2
    np.testing.assert_allclose(rows_output.numpy(), full_output.numpy(), rtol=tolerance,
                               atol=tolerance)
    names = ["inputs", *(variable.name for variable in block.trainable_variables)]
    for name, ours, reference in zip(names, rows_gradients, full_gradients):
        if name == "key_bias":  # zero but for rounding (softmax is shift-invariant)
            continue
        scale = max(np.abs(reference.numpy()).max(), 1e-6)
        np.testing.assert_allclose(ours.numpy() / scale, reference.numpy() / scale,
                                   atol=tolerance, err_msg=name)
