"""Fine-tuning models: the paper's task heads on top of the encoder (Figure 4).

Each model takes the packed inputs (`input_ids`, `input_mask`,
`segment_ids`) and returns float32 logits; each lists its weights under
Google-style names (`checkpoint_variables()`) so that a pre-trained
checkpoint fills the encoder and a fine-tuned one reloads whole. Head
weights are stored [outputs, hidden], the orientation the original
`run_classifier.py` / `run_squad.py` used (`output_weights`,
`cls/squad/output_weights`), so their checkpoints load too.

The left-to-right (GPT-style) variant of the classifier cannot read the
[CLS] vector: under causal attention the first position sees only itself.
It classifies from the last real token instead, as GPT does with its final
"extract" token, and can add the language-model loss on the same inputs
(GPT's L3 = L2 + lambda * L1). GPT's other input transformations follow from
the same reading: a left-to-right model sees a pair in one order only, so for
similarity, which has no order, GPT encodes both orders and adds the two
last-token vectors (`both_orders`); multiple choice is one
[context; delimiter; answer] sequence per choice, each scored from its last
token.
"""

from __future__ import annotations

import os
from typing import Any

import keras
import numpy as np
from keras import ops

from core.arguments import check_flag, check_integer, check_number
from modeling.config import BertConfig
from modeling.encoder import BertEncoder
from modeling.labelled_text import SentenceTextMixin, WordTaggerMixin
from modeling.heads import LeftToRightLMHead
from core.record_schema import ENCODER_INPUTS
from modeling.labels import check_label_names
from modeling.multi_label import check_threshold
from modeling.layers import int8
from modeling.layers.dropout import Dropout
from modeling.layers.settings import ConfigurableLayer, ConfigurableModel
from modeling.preprocessor import BertPreprocessor, load_preprocessor
from modeling.pretrained import Pretrained, check_source, model_files
from modeling.pretrainer import cross_entropy, left_to_right_lm_loss
from modeling.quantization import QuantizableModel
from modeling.span_text import SpanTextMixin
from modeling.text_tasks import TextTaskMixin


@keras.saving.register_keras_serializable(package="bert")
class OutputProjection(int8.Quantizable, ConfigurableLayer):
    """logits = x . W^T + b with W stored [units, hidden], under a Google-style name.

    `quantize("int8")` makes W int8 per unit (`modeling.layers.int8`).
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


class _FineTuningModel(TextTaskMixin, Pretrained, QuantizableModel, ConfigurableModel):
    """Shared wiring: an encoder named "bert", dropout, checkpoint names, and a config.

    The config holds the BERT hyperparameters as a plain dict plus the
    settings each subclass keeps (`ConfigurableModel`). An optional `preprocessor`
    (`BertPreprocessor`) lets `fit`/`predict` take raw text (`TextTaskMixin`);
    it travels in the config, so a `.keras` file keeps it.
    """

    def __init__(self, config: BertConfig, causal: bool = False,
                 preprocessor: BertPreprocessor | dict | None = None, **kwargs):
        super().__init__(**kwargs)
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
                        do_lower_case: bool | None = None, **kwargs: Any) -> "_FineTuningModel":
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
            `modeling.pretrained.load_task_model`.

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
        """Whether the model takes raw text (it has the hooks), so gets a preprocessor by default."""
        return cls._text_columns is not TextTaskMixin._text_columns

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

    def checkpoint_variables(self) -> dict:
        return {**self.encoder.checkpoint_variables(), **self.head_variables()}


@keras.saving.register_keras_serializable(package="bert")
class BertClassifier(SentenceTextMixin, _FineTuningModel):
    """Sentence (pair) classification: K logits, or one score for regression (STS-B).

    `bilstm_units > 0` reads the sequence with a randomly initialized
    bidirectional LSTM and classifies from its two final states, Table 5's
    "+ BiLSTM" row: it gives the left-to-right model a right-to-left reading.

    Args:
      config: the encoder's hyperparameters.
      num_labels: classes; 1 for regression (one score, mean squared error).
      causal: the left-to-right model, classifying from the last real token.
      lm_aux_weight: with `causal`, GPT's auxiliary language-model loss weight.
      both_orders: with `causal`, encode a pair in both orders and add them
        (GPT's similarity input); inputs are then [batch, 2, seq].
      bilstm_units: units per direction of a BiLSTM under the head; 0 for none.
      label_names: a name per class, in order: labels in and out by name.
      multi_label: each label a yes/no of its own (a sigmoid each, binary
        cross-entropy); labels are label sets.
      threshold: with `multi_label`, the probability above which a label is
        predicted, in (0, 1).
      **kwargs: Keras model arguments (`name`, `dtype`) and `preprocessor`.

    Examples:

    >>> model = BertClassifier.from_pretrained("uncased_L-12_H-768_A-12", num_labels=2,
    ...                                        label_names=["negative", "positive"])
    >>> model.compile()
    >>> model.fit(["a fine film", "a dull film"], ["positive", "negative"], epochs=2)
    >>> model.predict_labels(["a fine plot"])
    ['positive']
    """

    def __init__(self, config: BertConfig, num_labels: int, causal: bool = False,
                 lm_aux_weight: float = 0.0, both_orders: bool = False, bilstm_units: int = 0,
                 label_names: list[str] | None = None, multi_label: bool = False,
                 threshold: float = 0.5, **kwargs):
        kwargs.setdefault("name", "bert_classifier")
        num_labels = check_integer("num_labels", num_labels)
        lm_aux_weight = check_number("lm_aux_weight", lm_aux_weight, 0.0)
        multi_label = check_flag("multi_label", multi_label)
        threshold = check_threshold(threshold)
        if multi_label and num_labels < 2:
            raise ValueError(f"multi_label=True needs num_labels >= 2, got {num_labels}: one "
                             "yes/no label is a two-class single-label model")
        if threshold != 0.5 and not multi_label:
            raise ValueError(f"threshold={threshold} applies to multi_label=True; a "
                             "single-label model predicts its most probable class")
        super().__init__(config, causal=causal, **kwargs)
        if lm_aux_weight and not causal:
            raise ValueError("lm_aux_weight needs the left-to-right model (causal=True)")
        if both_orders and not causal:
            raise ValueError("both_orders is GPT's similarity input for the left-to-right "
                             "model (causal=True); a bidirectional model sees both texts")
        self.keep_settings(num_labels=num_labels, lm_aux_weight=lm_aux_weight,
                           both_orders=both_orders, bilstm_units=bilstm_units,
                           label_names=check_label_names(label_names, num_labels),
                           multi_label=multi_label, threshold=threshold)
        self.bilstm = _bilstm(bilstm_units, config.hidden_size, False, self.dtype_policy)
        self.summary_size = 2 * bilstm_units if bilstm_units else config.hidden_size
        self.classifier = OutputProjection(num_labels, self.summary_size,
                                           config.initializer_range, "", name="classifier",
                                           dtype=self.dtype_policy)
        self.lm_head = (LeftToRightLMHead(config, self.encoder.embedding_table,
                                          dtype=self.dtype_policy)
                        if self.lm_aux_weight else None)
        if causal or bilstm_units:
            self.encoder.pooler.trainable = False  # the summary is not [CLS]'s pooled vector
        self._finish_build((None, 2, None) if both_orders else (None, None))

    def call(self, features, training=None):
        if self.both_orders:  # [batch, 2, seq]: (a, b) and (b, a), one sequence each
            features, orders = _flatten_choices(features)
        encoded = self.encode(features, training,
                              pooled_only=self.bilstm is None and not self.causal)
        if self.bilstm is not None:
            summary = self.bilstm(encoded["sequence_output"],
                                  mask=ops.cast(features["input_mask"], "bool"), training=training)
        elif self.causal:
            summary = _last_real_token(encoded["sequence_output"], features["input_mask"])
        else:
            summary = encoded["pooled_output"]
        if self.both_orders:
            summary = ops.sum(ops.reshape(summary, (-1, orders, self.summary_size)), 1)
        logits = self.classifier(self.dropout(summary, training=training))
        if self.lm_head is not None and training:
            lm_logits = self.lm_head(encoded["sequence_output"])
            self.add_loss(self.lm_aux_weight * left_to_right_lm_loss(
                lm_logits, features["input_ids"], features["input_mask"]))
        return logits[:, 0] if self.num_labels == 1 else logits

    def head_variables(self) -> dict:
        names = {**self.classifier.checkpoint_variables(), **_bilstm_variables(self.bilstm)}
        if self.lm_head is not None:
            names.update(self.lm_head.checkpoint_variables())
        return names


@keras.saving.register_keras_serializable(package="bert")
class BertMultipleChoice(_FineTuningModel):
    """SWAG: each (context, ending) pair encoded, one score per choice from [CLS]
    (from the last token under `causal`, GPT's multiple-choice input).

    It takes packed inputs [batch, choices, seq] (`tasks.classification`
    builds them from SWAG) and returns [batch, choices] scores.

    Args:
      config: the encoder's hyperparameters.
      causal: the left-to-right model, scoring each choice at its last token.
      **kwargs: Keras model arguments (`name`, `dtype`).

    Examples:

    >>> model = BertMultipleChoice.from_pretrained("uncased_L-12_H-768_A-12")
    >>> ids = np.ones((1, 4, 16), np.int32)
    >>> model({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids}).shape
    TensorShape([1, 4])
    """

    def __init__(self, config: BertConfig, causal: bool = False, **kwargs):
        kwargs.setdefault("name", "bert_multiple_choice")
        super().__init__(config, causal=causal, **kwargs)
        self.scorer = OutputProjection(1, config.hidden_size, config.initializer_range,
                                       "multiple_choice", name="scorer",
                                       dtype=self.dtype_policy)
        if causal:
            self.encoder.pooler.trainable = False  # each choice is read at its last token
        self._finish_build((None, 4, None))  # SWAG's four choices; any count works when called

    def call(self, features, training=None):
        flat, choices = _flatten_choices(features)
        encoded = self.encode(flat, training, pooled_only=not self.causal)
        summary = (_last_real_token(encoded["sequence_output"], flat["input_mask"])
                   if self.causal else encoded["pooled_output"])
        scores = self.scorer(self.dropout(summary, training=training))
        return ops.reshape(scores, (-1, choices))

    def head_variables(self) -> dict:
        return self.scorer.checkpoint_variables()

    def default_loss(self) -> keras.losses.Loss:
        # One score per choice; the label is the right choice's index.
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self) -> list:
        return [keras.metrics.SparseCategoricalAccuracy("accuracy")]

    def _empty_outputs(self, input_shape: tuple) -> np.ndarray:
        return np.zeros((0, input_shape[1] if len(input_shape) == 3 else 0), np.float32)


class _SequenceModel(_FineTuningModel):
    """A head on every position's vector: the sequence output, through an optional BiLSTM.

    `bilstm_units > 0` puts a randomly initialized bidirectional LSTM between
    the encoder and the head (Table 5's "+ BiLSTM"), fine-tuned with it. No
    head here reads [CLS]'s pooled vector, so the pooler stays frozen.
    """

    def __init__(self, config: BertConfig, bilstm_units: int = 0, **kwargs):
        super().__init__(config, **kwargs)
        self.keep_settings(bilstm_units=bilstm_units)
        self.bilstm = _bilstm(bilstm_units, config.hidden_size, True, self.dtype_policy)
        self.sequence_width = 2 * bilstm_units if bilstm_units else config.hidden_size
        self.encoder.pooler.trainable = False

    def read_sequence(self, features, training=None):
        """[batch, seq, `sequence_width`]: what the head reads at each position."""
        sequence = self.encode(features, training)["sequence_output"]
        if self.bilstm is None:
            return sequence
        return self.bilstm(sequence, mask=ops.cast(features["input_mask"], "bool"),
                           training=training)


@keras.saving.register_keras_serializable(package="bert")
class BertSpanModel(SpanTextMixin, _SequenceModel):
    """SQuAD: start and end logits per position (the paper's vectors S and E).

    Args:
      config: the encoder's hyperparameters.
      bilstm_units: units per direction of a BiLSTM under the head; 0 for none.
      **kwargs: Keras model arguments (`name`, `dtype`) and `preprocessor`.

    Examples:

    >>> model = BertSpanModel.from_pretrained("squad_output_dir")
    >>> model.predict_answers(["Where does John live?"], ["John lives in Paris."])
    ['Paris.']
    """

    def __init__(self, config: BertConfig, bilstm_units: int = 0, **kwargs):
        kwargs.setdefault("name", "bert_span")
        super().__init__(config, bilstm_units, **kwargs)
        self.span = OutputProjection(2, self.sequence_width, config.initializer_range,
                                     "cls/squad", name="span", dtype=self.dtype_policy)
        self._finish_build((None, None))

    def call(self, features, training=None):
        logits = self.span(self.read_sequence(features, training))
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}

    def head_variables(self) -> dict:
        return {**self.span.checkpoint_variables(), **_bilstm_variables(self.bilstm)}


@keras.saving.register_keras_serializable(package="bert")
class BertTokenTagger(WordTaggerMixin, _SequenceModel):
    """Token tagging (NER): K logits at every position, no CRF, as the paper.

    Args:
      config: the encoder's hyperparameters.
      num_labels: tags.
      bilstm_units: units per direction of a BiLSTM under the head; 0 for none.
      label_names: a name per tag, in order: tags in and out by name.
      **kwargs: Keras model arguments (`name`, `dtype`) and `preprocessor`.

    Examples:

    >>> model = BertTokenTagger.from_pretrained("cased_L-12_H-768_A-12", num_labels=3,
    ...                                         label_names=["O", "B-PER", "B-LOC"])
    >>> model.compile()
    >>> model.fit([["John", "lives", "in", "Paris"]], [["B-PER", "O", "O", "B-LOC"]])
    >>> model.predict_labels([["Mary", "lives", "in", "Rome"]])
    [['B-PER', 'O', 'O', 'B-LOC']]
    """

    def __init__(self, config: BertConfig, num_labels: int, bilstm_units: int = 0,
                 label_names: list[str] | None = None, **kwargs):
        kwargs.setdefault("name", "bert_tagger")
        num_labels = check_integer("num_labels", num_labels)
        super().__init__(config, bilstm_units, **kwargs)
        self.keep_settings(num_labels=num_labels,
                           label_names=check_label_names(label_names, num_labels))
        self.tagger = OutputProjection(num_labels, self.sequence_width, config.initializer_range,
                                       "ner", name="tagger", dtype=self.dtype_policy)
        self._finish_build((None, None))

    def call(self, features, training=None):
        sequence = self.read_sequence(features, training)
        return self.tagger(self.dropout(sequence, training=training))

    def head_variables(self) -> dict:
        return {**self.tagger.checkpoint_variables(), **_bilstm_variables(self.bilstm)}


def classification_loss(features: dict, logits) -> dict:
    """Mean cross-entropy against `label_ids` (also multiple choice: one label per row)."""
    return {"loss": ops.mean(cross_entropy(features["label_ids"], logits))}


def regression_loss(features: dict, scores) -> dict:
    """Mean squared error against float `label_ids` (STS-B)."""
    return {"loss": ops.mean(ops.square(scores - ops.cast(features["label_ids"], "float32")))}


def span_loss(features: dict, outputs: dict) -> dict:
    """Mean of the start and end cross-entropies, as the original run_squad.py."""
    start = ops.mean(cross_entropy(features["start_positions"], outputs["start_logits"]))
    end = ops.mean(cross_entropy(features["end_positions"], outputs["end_logits"]))
    return {"loss": (start + end) / 2.0, "start_loss": start, "end_loss": end}


def tagging_loss(features: dict, logits) -> dict:
    """Mean cross-entropy over labelled positions; `label_ids` < 0 (sub-tokens, padding,
    context) carry no loss, the paper's "X" positions."""
    labels = features["label_ids"]
    weights = ops.cast(labels >= 0, "float32")
    per_token = cross_entropy(ops.maximum(labels, 0), logits)
    return {"loss": ops.sum(per_token * weights) / ops.maximum(ops.sum(weights), 1.0)}


def _bilstm(units: int, input_size: int, return_sequences: bool, dtype) -> keras.layers.Layer | None:
    """A bidirectional LSTM of `units` per direction, built; None for 0 units."""
    units = check_integer("bilstm_units", units, minimum=0)
    if not units:
        return None
    layer = keras.layers.Bidirectional(
        keras.layers.LSTM(units, return_sequences=return_sequences, dtype=dtype),
        name="bilstm", dtype=dtype)
    layer.build((None, None, input_size))
    return layer


def _bilstm_variables(bilstm: keras.layers.Layer | None) -> dict:
    return {} if bilstm is None else {f"bilstm/{variable.path}": variable
                                      for variable in bilstm.weights}


def _flatten_choices(features: dict) -> tuple[dict, int]:
    """[batch, n, seq] encoder inputs as [batch * n, seq] rows, and n."""
    shape = ops.shape(features["input_ids"])
    flat = {key: ops.reshape(features[key], (-1, shape[-1]))
            for key in ENCODER_INPUTS if key in features}
    return flat, shape[1]


def _last_real_token(sequence_output, input_mask):
    """The hidden vector at each row's last unpadded position: [batch, hidden]."""
    last = ops.sum(ops.cast(input_mask, "int32"), axis=1) - 1
    last = ops.maximum(last, 0)
    return ops.take_along_axis(sequence_output, last[:, None, None], axis=1)[:, 0]
