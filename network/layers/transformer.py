"""One post-LayerNorm Transformer encoder block, as in BERT."""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from network.layers.activations import get_activation
from network.layers.attention import SelfAttention
from network.layers.dense import Dense
from network.layers.dropout import Dropout
from network.layers.settings import ConfigurableLayer


@keras.saving.register_keras_serializable(package="bert")
class TransformerBlock(ConfigurableLayer):
    """Attention and feed-forward sublayers, each `LayerNorm(x + Dropout(f(x)))`.

    BERT normalizes *after* each residual sum (post-LN, as the original
    Transformer). Pre-LN trains more stably, but every released BERT
    checkpoint was trained post-LN and only gives its numbers that way.

    Past the three sizes, the settings are keyword-only: two dropout rates,
    a range and an epsilon in a row are easy to pass in the wrong order, and
    a block built with them swapped still runs, only as a different model.
    """

    def __init__(self, hidden_size: int, num_heads: int, intermediate_size: int, *,
                 hidden_act: str = "gelu", initializer_range: float = 0.02,
                 layer_norm_eps: float = 1e-12, hidden_dropout_prob: float = 0.1,
                 attention_probs_dropout_prob: float = 0.1, **kwargs):
        super().__init__(**kwargs)
        self.keep_settings(hidden_size=hidden_size, num_heads=num_heads,
                           intermediate_size=intermediate_size, hidden_act=hidden_act,
                           initializer_range=initializer_range, layer_norm_eps=layer_norm_eps,
                           hidden_dropout_prob=hidden_dropout_prob,
                           attention_probs_dropout_prob=attention_probs_dropout_prob)

        initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
        self.attention = SelfAttention(hidden_size, num_heads,
                                       initializer_range=initializer_range,
                                       dropout_rate=attention_probs_dropout_prob,
                                       name="attention", dtype=self.dtype_policy)
        self.attention_dropout = Dropout(hidden_dropout_prob, dtype=self.dtype_policy)
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype="float32", name="attention_LayerNorm")
        self.intermediate = Dense(
            intermediate_size, activation=get_activation(hidden_act),
            kernel_initializer=initializer, name="intermediate", dtype=self.dtype_policy)
        self.output_dense = Dense(
            hidden_size, kernel_initializer=initializer, name="output_dense",
            dtype=self.dtype_policy)
        self.output_dropout = Dropout(hidden_dropout_prob, dtype=self.dtype_policy)
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype="float32", name="output_LayerNorm")

    def build(self, input_shape=None):
        shape = (None, None, self.hidden_size)
        self.attention.build(shape)
        self.attention_layer_norm.build(shape)
        self.intermediate.build(shape)
        self.output_dense.build((None, None, self.intermediate_size))
        self.output_layer_norm.build(shape)
        self.built = True

    def call(self, hidden_states, bias, training=None, return_probabilities=False,
             output_positions=None):
        """The block's output [batch, seq, hidden], or only its rows at `output_positions`.

        A position's output needs every position's keys and values but
        nothing else of the others, so `output_positions` [batch, n] gives
        exactly those rows of the full output ([batch, n, hidden]) for a
        fraction of the work; their dropout masks are the ones a full call
        draws.
        """
        attended = self.attention(hidden_states, bias, training=training,
                                  return_probabilities=return_probabilities,
                                  output_positions=output_positions)
        if return_probabilities:
            attended, probabilities = attended
        every_position = tf.shape(hidden_states)
        if output_positions is not None:
            hidden_states = tf.gather(hidden_states, output_positions, axis=1, batch_dims=1)
        attended = self.attention_dropout(attended, training=training,
                                          output_positions=output_positions,
                                          full_shape=every_position)
        hidden_states = ops.cast(self.attention_layer_norm(hidden_states + attended),
                                 self.compute_dtype)
        # 2-D products, into which TensorFlow's oneDNN rewrite fuses the bias adds.
        rows = ops.reshape(hidden_states, (-1, self.hidden_size))
        expanded = ops.reshape(self.output_dense(self.intermediate(rows)),
                               tf.shape(hidden_states))
        expanded = self.output_dropout(expanded, training=training,
                                       output_positions=output_positions,
                                       full_shape=every_position)
        output = ops.cast(self.output_layer_norm(hidden_states + expanded), self.compute_dtype)
        if return_probabilities:
            return output, probabilities
        return output
