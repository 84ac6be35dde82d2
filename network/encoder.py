"""The BERT encoder network: embeddings, a stack of Transformer blocks, a pooler."""

from __future__ import annotations

import os
from typing import Any

import keras
from keras import ops

from network.config import BertConfig
from network.layers import fast_paths
from network.layers.attention import attention_bias
from network.layers.dense import Dense
from network.layers.embeddings import BertEmbeddings
from network.layers.input_checks import checked_mask, checked_shape
from network.layers.settings import ConfigurableModel
from network.layers.transformer import TransformerBlock
from network.pretrained import Pretrained
from network.quantization import QuantizableModel
from network.serving_spec import ServingSpec


@keras.saving.register_keras_serializable(package="bert")
class BertEncoder(Pretrained, QuantizableModel, ConfigurableModel):
    """Maps `input_ids`, `input_mask`, `segment_ids` to contextual vectors.

    Returns a dict with `sequence_output` [batch, seq, hidden] and
    `pooled_output` [batch, hidden] (tanh dense on the [CLS] vector, which
    the next-sentence task trains, so that it summarizes the pair). On request
    it also returns `hidden_states` (the embedding output, then every block's
    output) and `attentions` (each block's probabilities, float32).

    `causal=True` gives the left-to-right model the paper compares against:
    the same network where each position attends only to itself and earlier
    positions.

    `dtype` (a policy name such as "mixed_bfloat16" or a `keras.DTypePolicy`)
    is handed to every sublayer, since Keras gives nested layers the global
    policy otherwise; so one model can compute in 16 bits while the rest of
    the program stays float32. LayerNorm and the attention softmax compute in
    float32 under every policy.

    Args:
      config: the encoder's hyperparameters.
      causal: each position attends only to itself and earlier ones.
      output_hidden_states: also return every layer's output.
      output_attentions: also return every block's attention probabilities.
      **kwargs: Keras model arguments (`name`, `dtype`).

    Examples:

    >>> encoder = BertEncoder.from_pretrained("uncased_L-12_H-768_A-12")
    >>> preprocessor = BertPreprocessor.from_pretrained("uncased_L-12_H-768_A-12")
    >>> encoder(preprocessor(["a fine film"]))["pooled_output"].shape
    TensorShape([1, 768])
    """

    def __init__(self, config: BertConfig, causal: bool = False,
                 output_hidden_states: bool = False, output_attentions: bool = False,
                 **kwargs):
        kwargs.setdefault("name", "bert")
        super().__init__(**kwargs)
        self.keep_settings(config=config, causal=causal,
                           output_hidden_states=output_hidden_states,
                           output_attentions=output_attentions)
        self.embeddings = BertEmbeddings(
            vocab_size=config.vocab_size, hidden_size=config.hidden_size,
            max_position_embeddings=config.max_position_embeddings,
            type_vocab_size=config.type_vocab_size, initializer_range=config.initializer_range,
            layer_norm_eps=config.layer_norm_eps, dropout_rate=config.hidden_dropout_prob,
            name="embeddings", dtype=self.dtype_policy)
        self.blocks = [
            TransformerBlock(
                hidden_size=config.hidden_size, num_heads=config.num_attention_heads,
                intermediate_size=config.intermediate_size, hidden_act=config.hidden_act,
                initializer_range=config.initializer_range,
                layer_norm_eps=config.layer_norm_eps,
                hidden_dropout_prob=config.hidden_dropout_prob,
                attention_probs_dropout_prob=config.attention_probs_dropout_prob,
                name=f"layer_{index}", dtype=self.dtype_policy)
            for index in range(config.num_hidden_layers)]
        self.pooler = Dense(
            config.hidden_size, activation="tanh", name="pooler", dtype=self.dtype_policy,
            kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=config.initializer_range))
        self.build()

    def build(self, input_shape=None):
        self.embeddings.build()
        for block in self.blocks:
            block.build()
        self.pooler.build((None, self.config.hidden_size))
        self.built = True

    @property
    def embedding_table(self):
        """The word-embedding matrix [vocab, hidden], shared with the LM output layer."""
        return self.embeddings.word_embeddings

    def call(self, inputs, training=None, output_positions=None):
        """`output_positions` [batch, n] asks for the sequence output at those positions only.

        Pre-training reads the last block at the masked positions and [CLS],
        classification at [CLS] alone; the other positions' last-block
        outputs are computed only to be thrown away (the peers compute them:
        about 13% of the small model's pre-training FLOPs, 14% of a
        six-layer classifier's). With `output_positions` the last block
        computes [CLS] and those positions only, and `sequence_output` is
        [batch, n, hidden] at them: the same values as gathering them from
        the full output, with the same dropout masks (with fast paths off,
        the last block computes every position, and those are gathered).
        """
        input_ids, input_mask, segment_ids = self._packed_inputs(inputs)
        read_positions = None  # [CLS] (for the pooler) and the output positions
        if output_positions is not None:
            if self.output_hidden_states or self.output_attentions:
                raise ValueError("output_positions leaves the last block's other positions "
                                 "uncomputed; it cannot be combined with "
                                 "output_hidden_states or output_attentions")
            positions = ops.cast(output_positions, "int32")
            first = ops.zeros_like(ops.cast(input_ids[:, :1], "int32"))
            read_positions = ops.concatenate([first, positions], axis=1)
        # A fast path: the last block computes only the positions read.
        last_block_positions = read_positions if fast_paths.enabled() else None

        hidden = self.embeddings(input_ids, segment_ids, training=training)
        bias = attention_bias(input_mask, causal=self.causal)
        hidden_states, attentions = [hidden], []
        for index, block in enumerate(self.blocks):
            if self.output_attentions:
                hidden, probabilities = block(hidden, bias, training=training,
                                              return_probabilities=True)
                attentions.append(probabilities)
            elif index == len(self.blocks) - 1:
                hidden = block(hidden, bias, training=training,
                               output_positions=last_block_positions)
            else:
                hidden = block(hidden, bias, training=training)
            hidden_states.append(hidden)

        if read_positions is not None and last_block_positions is None:
            hidden = ops.take_along_axis(hidden, read_positions[:, :, None], axis=1)
        outputs = {"sequence_output": hidden, "pooled_output": self.pooler(hidden[:, 0])}
        if read_positions is not None:
            outputs["sequence_output"] = hidden[:, 1:]
        if self.output_hidden_states:
            outputs["hidden_states"] = hidden_states
        if self.output_attentions:
            outputs["attentions"] = attentions
        return outputs

    @staticmethod
    def _packed_inputs(inputs):
        """`input_ids`, and `input_mask` / `segment_ids` checked against them
        (`network.layers.input_checks`), all ones / zeros where not given."""
        input_ids = inputs["input_ids"]
        input_mask = inputs.get("input_mask")
        if input_mask is None:
            input_mask = ops.ones_like(input_ids)
        else:  # a padding mask of 0s and 1s only
            input_mask = checked_mask(checked_shape(input_mask, input_ids, "input_mask"))
        segment_ids = inputs.get("segment_ids")
        if segment_ids is None:
            segment_ids = ops.zeros_like(input_ids)
        else:
            segment_ids = checked_shape(segment_ids, input_ids, "segment_ids")
        return input_ids, input_mask, segment_ids

    def checkpoint_variables(self) -> dict:
        """Every weight under its Google TF1 checkpoint name, in Google's shape."""
        names = {
            "bert/embeddings/word_embeddings": self.embeddings.word_embeddings,
            "bert/embeddings/token_type_embeddings": self.embeddings.token_type_embeddings,
            "bert/embeddings/position_embeddings": self.embeddings.position_embeddings,
            **_layer_norm_names("bert/embeddings/LayerNorm", self.embeddings.layer_norm),
            **_dense_names("bert/pooler/dense", self.pooler),
        }
        for index, block in enumerate(self.blocks):
            prefix = f"bert/encoder/layer_{index}"
            attention = block.attention
            for part in ("query", "key", "value"):
                names[f"{prefix}/attention/self/{part}/kernel"] = getattr(
                    attention, f"{part}_kernel")
                names[f"{prefix}/attention/self/{part}/bias"] = getattr(attention, f"{part}_bias")
            names[f"{prefix}/attention/output/dense/kernel"] = attention.output_kernel
            names[f"{prefix}/attention/output/dense/bias"] = attention.output_bias
            names.update(_layer_norm_names(f"{prefix}/attention/output/LayerNorm",
                                           block.attention_layer_norm))
            names.update(_dense_names(f"{prefix}/intermediate/dense", block.intermediate))
            names.update(_dense_names(f"{prefix}/output/dense", block.output_dense))
            names.update(_layer_norm_names(f"{prefix}/output/LayerNorm",
                                           block.output_layer_norm))
        return names

    def serving_spec(self) -> ServingSpec:
        """What the encoder serves (`network.serving_spec`): ids in, vectors out, no text."""
        return ServingSpec("encoder", ("sequence_output", "pooled_output"), returns_dict=True,
                           causal=self.causal)


def load_encoder(path: str | os.PathLike, **kwargs: Any) -> BertEncoder:
    """The pre-trained encoder in `path`: `BertEncoder.from_pretrained(path, **kwargs)`.

    Args:
      path: a model name, folder or checkpoint.
      **kwargs: as for `network.pretrained.load_task_model`.

    Examples:

    >>> load_encoder("bert-base-uncased", dtype="mixed_bfloat16").config.hidden_size
    768
    """
    return BertEncoder.from_pretrained(path, **kwargs)


def _dense_names(prefix: str, dense: keras.layers.Dense) -> dict:
    return {f"{prefix}/kernel": dense.kernel, f"{prefix}/bias": dense.bias}


def _layer_norm_names(prefix: str, layer_norm: keras.layers.LayerNormalization) -> dict:
    return {f"{prefix}/gamma": layer_norm.gamma, f"{prefix}/beta": layer_norm.beta}
