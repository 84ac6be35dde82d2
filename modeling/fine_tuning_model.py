"""What every fine-tuning model shares: the encoder under a head, checkpoint names, a config.

Each model takes the packed inputs (`input_ids`, `input_mask`,
`segment_ids`) and returns float32 logits; each lists its weights under
Google-style names (`checkpoint_variables()`) so that a pre-trained
checkpoint fills the encoder and a fine-tuned one reloads whole. Head
weights are stored [outputs, hidden], the orientation the original
`run_classifier.py` / `run_squad.py` used (`output_weights`,
`cls/squad/output_weights`), so their checkpoints load too. The task models
themselves are one a file: `modeling.classifier`, `modeling.multiple_choice`,
`modeling.span_model`, `modeling.token_tagger`.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import keras
from keras import ops

from core.arguments import check_flag, check_width
from core.record_schema import ENCODER_INPUTS
from modeling.preprocessor import BertPreprocessor, load_preprocessor
from modeling.task_preprocessor import TaskPreprocessor
from modeling.text_tasks import TextTask
from network.config import BertConfig
from network.encoder import BertEncoder
from network.layers import int8
from network.layers.dropout import Dropout
from network.layers.settings import ConfigurableLayer, ConfigurableModel
from network.model_folder import check_source
from network.pretrained import Pretrained, model_files
from network.quantization import QuantizableModel
from network.serving_spec import ServingSpec, text_inputs

@keras.saving.register_keras_serializable(package="bert")
class OutputProjection(int8.Quantizable, ConfigurableLayer):
    """logits = x . W^T + b with W stored [units, hidden], under a Google-style name.

    `quantize("int8")` makes W int8 per unit (`network.layers.int8`).
    """

    def __init__(self, units: int, hidden_size: int, initializer_range: float,
                 checkpoint_prefix: str, **kwargs):
        super().__init__(**kwargs)
        self.keep_settings(units=units, hidden_size=hidden_size,
                           initializer_range=initializer_range,
                           checkpoint_prefix=checkpoint_prefix)
        self.supports_masking = True  # a BiLSTM below hands its padding mask on
        self.output_weights = self.add_weight(
            shape=(units, hidden_size), name="output_weights",
            initializer=keras.initializers.TruncatedNormal(stddev=initializer_range))
        self.output_bias = self.add_weight(shape=(units,), initializer="zeros",
                                           name="output_bias")
        if self.quantization_mode == int8.MODE:  # rebuilt from a quantized layer's config
            int8.quantize_weights(self, ("output_weights",), input_axis=1)
        self.built = True

    def call(self, hidden):
        weights = ops.cast(self.output_weights, hidden.dtype)
        logits = ops.matmul(hidden, ops.transpose(weights))
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def quantize(self, mode=None, type_check=True, config=None):
        int8.quantize_layer(self, mode, config, ("output_weights",), input_axis=1)

    def quantized_call(self, hidden):
        weights = int8.quantized_weight(self, "output_weights", transposed=True)
        return int8.product(int8.quantize_rows(hidden), weights, self.output_bias)

    def checkpoint_variables(self) -> dict:
        prefix = f"{self.checkpoint_prefix}/" if self.checkpoint_prefix else ""
        return {f"{prefix}output_weights": self.output_weights,
                f"{prefix}output_bias": self.output_bias}


class FineTuningModel(TextTask, Pretrained, QuantizableModel, ConfigurableModel):
    """Shared wiring: an encoder named "bert", dropout, checkpoint names, and a config.

    The config holds the BERT hyperparameters as a plain dict plus the
    settings each subclass keeps (`ConfigurableModel`). An optional
    `preprocessor`, the task's `preprocessor_class` built by the subclass with
    its own settings (`TaskPreprocessor.for_task`), lets `fit`/`predict` take
    raw text (`TextTask`); it travels in the config, so a `.keras` file keeps it.
    """

    preprocessor_class: ClassVar[type[TaskPreprocessor] | None] = None

    def __init__(self, config: BertConfig, causal: bool = False,
                 preprocessor: BertPreprocessor | dict | None = None, **kwargs):
        super().__init__(**kwargs)
        causal = check_flag("causal", causal)
        self.keep_settings(config=config, causal=causal)
        if isinstance(preprocessor, dict):
            preprocessor = keras.saving.deserialize_keras_object(preprocessor)
        if preprocessor is not None:
            config.check_sequence_length(preprocessor.sequence_length)
        self.preprocessor = preprocessor
        self.encoder = BertEncoder(config, causal=causal, name="bert", dtype=self.dtype_policy)
        self.dropout = Dropout(config.hidden_dropout_prob, dtype=self.dtype_policy)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, sequence_length: int | None = None,
                        do_lower_case: bool | None = None, **kwargs: Any) -> "FineTuningModel":
        """This model on the encoder (or whole fine-tuned model) saved in `path`, taking text.

        The folder's preprocessor comes attached, so `fit`, `evaluate` and
        `predict` take raw text, as keras-hub's task models do. A source
        without a vocabulary (a bare checkpoint), and a model without raw-text
        support (`BertMultipleChoice`), give a model of packed inputs only,
        unless `sequence_length` or `do_lower_case` ask for a preprocessor.

        Args:
          path: a model name, folder or checkpoint, as `--init_checkpoint` takes it.
          sequence_length: tokens per packed row; None: 128, or the model's
            `max_position_embeddings` when that is smaller. A longer one than
            the position embeddings is refused.
          do_lower_case: True or False to override the folder's casing.
          **kwargs: the model's arguments (`num_labels=2`) and BertConfig fields
            to override; `preprocessor=None` for packed inputs only. See
            `network.pretrained.load_task_model`.

        Examples:

        >>> model = BertClassifier.from_pretrained("uncased_L-12_H-768_A-12", num_labels=2)
        >>> model.compile()
        >>> model.fit(["a fine film", "a dull film"], [1, 0], epochs=1)
        """
        check_source(path)
        if "preprocessor" in kwargs:
            if sequence_length is not None or do_lower_case is not None:
                raise ValueError("give either preprocessor=... or sequence_length / "
                                 "do_lower_case (which build the folder's preprocessor), "
                                 "not both")
        elif sequence_length is not None or do_lower_case is not None or (
                cls.reads_text() and model_files(path)[1] is not None):
            kwargs["preprocessor"] = load_preprocessor(path, sequence_length, do_lower_case)
        return super().from_pretrained(path, **kwargs)

    @classmethod
    def reads_text(cls) -> bool:
        """Whether the model takes raw text (it has a task preprocessor), so gets one by default."""
        return cls.preprocessor_class is not None

    def build(self, input_shape=None):
        # Every weight exists once __init__ returns; a `.keras` reload calls this.
        self.built = True

    def _finish_build(self, input_shape: tuple) -> None:
        """Marks the model built, at the end of each subclass's __init__.

        Every weight already exists, so `count_params()` works on a model
        fresh from `from_pretrained` or `from_config`. `summary()` runs `call`
        once on symbolic inputs of `input_shape` first, which records each
        layer's output shape; a second or so for BERT-Base, so not paid by
        every construction.
        """
        if self.preprocessor is not None:
            input_shape = (*input_shape[:-1], self.preprocessor.sequence_length)
        self._summary_input_shape = input_shape
        self.built = True

    def summary(self, *args, **kwargs):
        if self._summary_input_shape is not None:
            self.call({key: keras.KerasTensor(self._summary_input_shape, "int32")
                       for key in ENCODER_INPUTS})
            self._summary_input_shape = None
        return super().summary(*args, **kwargs)

    def get_config(self):
        config = super().get_config()
        if self.preprocessor is not None:
            config["preprocessor"] = keras.saving.serialize_keras_object(self.preprocessor)
        return config

    def encode(self, features, training=None, pooled_only: bool = False) -> dict:
        """The encoder's outputs; with `pooled_only`, only `pooled_output` is meaningful.

        A head that reads [CLS]'s pooled vector alone lets the last block
        compute just [CLS] (the encoder's `output_positions`, here none).
        """
        inputs = {key: features[key] for key in ENCODER_INPUTS if key in features}
        no_positions = ops.zeros_like(inputs["input_ids"][:, :0]) if pooled_only else None
        return self.encoder(inputs, training=training, output_positions=no_positions)

    def head_variables(self) -> dict:
        raise NotImplementedError

    def serving_spec(self) -> ServingSpec:
        """What the model serves (`network.serving_spec`), which every export reads."""
        raise NotImplementedError

    def _spec(self, kind: str, outputs: tuple[str, ...], **fields: Any) -> ServingSpec:
        """The spec of this `kind`, with what every task model shares: its reading
        direction and its preprocessor's raw text."""
        return ServingSpec(kind, outputs, causal=self.causal, **text_inputs(self.preprocessor),
                           **fields)

    def checkpoint_variables(self) -> dict:
        return {**self.encoder.checkpoint_variables(), **self.head_variables()}



class SequenceModel(FineTuningModel):
    """A head on every position's vector: the sequence output, through an optional BiLSTM.

    `bilstm_units > 0` puts a randomly initialized bidirectional LSTM between
    the encoder and the head (Table 5's "+ BiLSTM"), fine-tuned with it. No
    head here reads [CLS]'s pooled vector, so the pooler stays frozen.
    """

    def __init__(self, config: BertConfig, bilstm_units: int = 0, **kwargs):
        super().__init__(config, **kwargs)
        self.keep_settings(bilstm_units=bilstm_units)
        self.bilstm = bilstm_layer(bilstm_units, config.hidden_size, True, self.dtype_policy)
        self.sequence_width = 2 * bilstm_units if bilstm_units else config.hidden_size
        self.encoder.pooler.trainable = False

    def read_sequence(self, features, training=None):
        """[batch, seq, `sequence_width`]: what the head reads at each position."""
        sequence = self.encode(features, training)["sequence_output"]
        if self.bilstm is None:
            return sequence
        return self.bilstm(sequence, mask=ops.cast(features["input_mask"], "bool"),
                           training=training)



def bilstm_layer(units: int, input_size: int, return_sequences: bool, dtype) -> keras.layers.Layer | None:
    """A bidirectional LSTM of `units` per direction, built; None for 0 units."""
    units = check_width("bilstm_units", units, minimum=0)
    if not units:
        return None
    # Named, so the weights' paths (their checkpoint names) are the same however many
    # LSTMs the process built before: Keras numbers unnamed layers ("forward_lstm_1").
    layer = keras.layers.Bidirectional(
        keras.layers.LSTM(units, return_sequences=return_sequences, dtype=dtype, name="lstm"),
        name="bilstm", dtype=dtype)
    layer.build((None, None, input_size))
    return layer


def bilstm_variables(bilstm: keras.layers.Layer | None) -> dict:
    return {} if bilstm is None else {f"bilstm/{variable.path}": variable
                                      for variable in bilstm.weights}


def flatten_choices(features: dict) -> tuple[dict, int]:
    """[batch, n, seq] encoder inputs as [batch * n, seq] rows, and n."""
    shape = ops.shape(features["input_ids"])
    flat = {key: ops.reshape(features[key], (-1, shape[-1]))
            for key in ENCODER_INPUTS if key in features}
    return flat, shape[1]


def last_real_token(sequence_output, input_mask):
    """The hidden vector at each row's last unpadded position: [batch, hidden]."""
    last = ops.sum(ops.cast(input_mask, "int32"), axis=1) - 1
    last = ops.maximum(last, 0)
    return ops.take_along_axis(sequence_output, last[:, None, None], axis=1)[:, 0]

