"""Pre-training output heads: masked LM, next sentence, and left-to-right LM.

The language-model heads share the word-embedding table with the encoder's
input layer (weight tying, as in the original): the output projection is the
table transposed, so only a [vocab] bias is new. They hold the table by
reference, not as their own weight, so it is saved and loaded once, with the
encoder, and `checkpoint_variables()` lists it only under the encoder's name.
For the same reason they serialize only as part of the model that owns both
(`BertPretrainer`), which rebuilds the tie from its own config.
"""

from __future__ import annotations

import keras
from keras import ops

from network.config import BertConfig
from network.layers.activations import get_activation
from network.layers.dense import Dense

_PREDICTIONS = "cls/predictions"


def _initializer(config: BertConfig) -> keras.initializers.Initializer:
    return keras.initializers.TruncatedNormal(stddev=config.initializer_range)


class _TiedLanguageModelHead(keras.layers.Layer):
    """Transform (dense + activation + LayerNorm) then the tied output projection.

    The transform is a small extra layer between the encoder and the tied
    output; the original trained it, so released checkpoints need it to give
    their predictions. Logits come out in float32 whatever the policy, since
    the softmax over the vocabulary is where float16 loses most.
    """

    def __init__(self, config: BertConfig, embedding_table: keras.Variable, **kwargs):
        kwargs.setdefault("name", "cls_predictions")
        super().__init__(**kwargs)
        table_shape = tuple(embedding_table.shape)
        if table_shape != (config.vocab_size, config.hidden_size):
            raise ValueError(f"{self.name}: embedding_table has shape {table_shape}, expected "
                             f"[vocab_size, hidden_size] = "
                             f"{(config.vocab_size, config.hidden_size)}")
        self.config = config
        # Bypass Keras' attribute tracking: the table belongs to the encoder.
        object.__setattr__(self, "_embedding_table", embedding_table)
        self.transform = Dense(
            config.hidden_size, activation=get_activation(config.hidden_act),
            kernel_initializer=_initializer(config), name="transform_dense",
            dtype=self.dtype_policy)
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=config.layer_norm_eps, dtype="float32", name="transform_LayerNorm")
        self.build()

    def build(self, input_shape=None):
        self.transform.build((None, self.config.hidden_size))
        self.layer_norm.build((None, self.config.hidden_size))
        self.output_bias = self.add_weight(
            shape=(self.config.vocab_size,), initializer="zeros", name="output_bias")
        self.built = True

    @property
    def embedding_table(self) -> keras.Variable:
        return self._embedding_table

    def _logits(self, hidden):
        """[..., hidden] -> float32 [..., vocab]."""
        hidden = self.layer_norm(self.transform(hidden))
        hidden = ops.cast(hidden, self.compute_dtype)
        table = ops.cast(self._embedding_table, self.compute_dtype)
        logits = ops.matmul(hidden, ops.transpose(table))
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def checkpoint_variables(self) -> dict[str, keras.Variable]:
        """Google's names; the tied table is the encoder's `bert/embeddings/word_embeddings`."""
        return {
            f"{_PREDICTIONS}/transform/dense/kernel": self.transform.kernel,
            f"{_PREDICTIONS}/transform/dense/bias": self.transform.bias,
            f"{_PREDICTIONS}/transform/LayerNorm/gamma": self.layer_norm.gamma,
            f"{_PREDICTIONS}/transform/LayerNorm/beta": self.layer_norm.beta,
            f"{_PREDICTIONS}/output_bias": self.output_bias,
        }


class MaskedLMHead(_TiedLanguageModelHead):
    """Predicts the original tokens at the masked positions only.

    `call(sequence_output [B, S, H], masked_lm_positions [B, P])` returns
    logits [B, P, vocab]. Gathering the P (about 15% of S) positions before the
    transform and the vocabulary projection skips the largest matmul of the
    model for the positions that carry no loss, as the original did. Without
    positions, `sequence_output` [B, P, H] already holds just the masked
    positions (an encoder called with `output_positions`).
    """

    def call(self, sequence_output, masked_lm_positions=None):
        if masked_lm_positions is None:
            return self._logits(sequence_output)
        positions = ops.cast(masked_lm_positions, "int32")
        gathered = ops.take_along_axis(sequence_output, positions[:, :, None], axis=1)
        return self._logits(gathered)


class LeftToRightLMHead(_TiedLanguageModelHead):
    """Next-token logits [B, S, vocab] at every position, for the left-to-right model.

    It has no counterpart in Google's checkpoints; it is the same computation
    as the masked-LM head applied everywhere, so it uses the masked-LM head's
    names and a masked-LM checkpoint can initialize it.
    """

    def call(self, sequence_output):
        return self._logits(sequence_output)


@keras.saving.register_keras_serializable(package="bert")
class NextSentenceHead(keras.layers.Layer):
    """Two-way IsNext (0) / NotNext (1) classifier on the pooled [CLS] vector.

    The weight is stored [2, hidden] and multiplied transposed, because that is
    the shape Google's checkpoints hold it in.
    """

    def __init__(self, config: BertConfig, **kwargs):
        kwargs.setdefault("name", "cls_seq_relationship")
        super().__init__(**kwargs)
        self.config = config
        self.build()

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            shape=(2, self.config.hidden_size), initializer=_initializer(self.config),
            name="output_weights")
        self.output_bias = self.add_weight(shape=(2,), initializer="zeros", name="output_bias")
        self.built = True

    def call(self, pooled_output):
        logits = ops.matmul(pooled_output, ops.transpose(self.output_weights)) + self.output_bias
        return ops.cast(logits, "float32")

    def checkpoint_variables(self) -> dict[str, keras.Variable]:
        return {"cls/seq_relationship/output_weights": self.output_weights,
                "cls/seq_relationship/output_bias": self.output_bias}

    def get_config(self):
        config = super().get_config()
        config.update(config=self.config.to_dict())
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        return cls(BertConfig.from_dict(config.pop("config")), **config)
