"""Input embeddings: token + learned absolute position + segment, then LayerNorm."""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from network.layers.dropout import Dropout
from network.layers.input_checks import checked_ids, checked_length
from network.layers.settings import ConfigurableLayer


@keras.saving.register_keras_serializable(package="bert")
class BertEmbeddings(ConfigurableLayer):
    """Sums word, position and token-type embeddings, normalizes, applies dropout.

    The three tables are plain weights rather than `keras.layers.Embedding`
    layers so that the word table can be shared with the masked-LM output
    layer (weight tying) and keep Google's checkpoint shapes.
    """

    def __init__(self, vocab_size: int, hidden_size: int, max_position_embeddings: int,
                 type_vocab_size: int, initializer_range: float = 0.02,
                 layer_norm_eps: float = 1e-12, dropout_rate: float = 0.1, **kwargs):
        super().__init__(**kwargs)
        self.keep_settings(vocab_size=vocab_size, hidden_size=hidden_size,
                           max_position_embeddings=max_position_embeddings,
                           type_vocab_size=type_vocab_size, initializer_range=initializer_range,
                           layer_norm_eps=layer_norm_eps, dropout_rate=dropout_rate)
        # LayerNorm statistics in float32 even under a mixed-precision policy.
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype="float32", name="LayerNorm")
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        initializer = keras.initializers.TruncatedNormal(stddev=self.initializer_range)
        self.word_embeddings = self.add_weight(
            shape=(self.vocab_size, self.hidden_size), initializer=initializer,
            name="word_embeddings")
        self.token_type_embeddings = self.add_weight(
            shape=(self.type_vocab_size, self.hidden_size), initializer=initializer,
            name="token_type_embeddings")
        self.position_embeddings = self.add_weight(
            shape=(self.max_position_embeddings, self.hidden_size), initializer=initializer,
            name="position_embeddings")
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, input_ids, segment_ids, training=None):
        seq_length = ops.shape(input_ids)[1]
        if isinstance(seq_length, int) and seq_length > self.max_position_embeddings:
            raise ValueError(f"input_ids has {seq_length} positions but the model has only "
                             f"max_position_embeddings={self.max_position_embeddings}")
        # `tf.gather`, not `ops.take`, which reads a negative id from the end of the table.
        input_ids = checked_ids(checked_length(input_ids, self.max_position_embeddings),
                                self.vocab_size, "input_ids", "vocab_size")
        segment_ids = checked_ids(segment_ids, self.type_vocab_size, "segment_ids",
                                  "type_vocab_size")
        embeddings = (tf.gather(self.word_embeddings, input_ids)
                      + tf.gather(self.token_type_embeddings, segment_ids)
                      + ops.expand_dims(self.position_embeddings[:seq_length], 0))
        embeddings = self.layer_norm(embeddings)
        return self.dropout(ops.cast(embeddings, self.compute_dtype), training=training)
