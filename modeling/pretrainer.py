"""The pre-training model: encoder + heads, the paper's losses (`modeling.losses`) and metrics.

`BertPretrainer` takes the features dict of the pre-training TFRecords and
returns logits. Its `compute_loss` / `compute_metrics` make `fit` and
`evaluate` work on those features directly (no separate labels), reporting
the metrics the original wrote to `eval_results.txt`. For custom training
loops, `pretraining_losses` and `pretraining_metric_sums` are methods of the
model: the objective a model was built for decides its loss and metrics, so
it is named once, when the model is built.
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from core.record_schema import ENCODER_INPUTS
from modeling.losses import (cross_entropy, left_to_right_lm_loss, masked_lm_loss,
                             next_sentence_loss, next_token_targets)
from network.config import BertConfig
from network.encoder import BertEncoder
from network.heads import LeftToRightLMHead, MaskedLMHead, NextSentenceHead
from network.layers.settings import ConfigurableModel
from network.pretrained import Pretrained
from network.quantization import QuantizableModel
from network.serving_spec import ServingSpec

OBJECTIVES = ("mlm_nsp", "mlm", "ltr")


def _weighted_mean(values, weights):
    weights = ops.cast(weights, "float32")
    return ops.sum(ops.cast(values, "float32") * weights) / ops.maximum(ops.sum(weights), 1e-5)


def _correct(logits, labels):
    return ops.equal(ops.argmax(logits, axis=-1), ops.cast(labels, "int64"))


def masked_lm_accuracy(logits, masked_lm_ids, masked_lm_weights):
    """Fraction of real masked positions predicted right (padding slots weigh 0)."""
    return _weighted_mean(_correct(logits, masked_lm_ids), masked_lm_weights)


def next_sentence_accuracy(logits, next_sentence_labels):
    labels = ops.reshape(next_sentence_labels, (-1,))
    return ops.mean(ops.cast(_correct(logits, labels), "float32"))


def _sums(values: dict, weights) -> dict:
    total = ops.sum(weights)
    return {name: (ops.sum(ops.cast(value, "float32") * weights), total)
            for name, value in values.items()}


@keras.saving.register_keras_serializable(package="bert")
class BertPretrainer(Pretrained, QuantizableModel, ConfigurableModel):
    """BERT with its pre-training heads, for one of three objectives.

    - "mlm_nsp": masked LM + next-sentence prediction (the paper's BERT);
    - "mlm": masked LM only (the paper's "No NSP" ablation);
    - "ltr": a causal encoder trained to predict the next token at every
      position, the left-to-right (OpenAI GPT style) model of the ablations.

    Outputs: "masked_lm_logits" [B, P, vocab], "next_sentence_logits" [B, 2],
    or for "ltr" "lm_logits" [B, S, vocab]; all float32.

    Args:
      config: the encoder's hyperparameters.
      objective: "mlm_nsp", "mlm" or "ltr".
      **kwargs: Keras model arguments (`name`, `dtype`).

    Examples:

    >>> model = BertPretrainer.from_pretrained("uncased_L-12_H-768_A-12")
    >>> model.compile(optimizer="adam")
    >>> model.fit(pretraining_records_dataset, epochs=1)  # the TFRecords' features
    """

    def __init__(self, config: BertConfig, objective: str = "mlm_nsp", **kwargs):
        if not isinstance(objective, str) or objective not in OBJECTIVES:
            raise ValueError(f"unknown pre-training objective {objective!r}; expected one of "
                             f"{', '.join(OBJECTIVES)}")
        kwargs.setdefault("name", "bert_pretrainer")
        super().__init__(**kwargs)
        self.keep_settings(config=config, objective=objective)
        self.encoder = BertEncoder(config, causal=objective == "ltr", name="bert",
                                   dtype=self.dtype_policy)
        table = self.encoder.embedding_table
        if objective == "ltr":
            self.lm_head = LeftToRightLMHead(config, table, dtype=self.dtype_policy)
        else:
            self.masked_lm_head = MaskedLMHead(config, table, dtype=self.dtype_policy)
        if objective == "mlm_nsp":
            self.next_sentence_head = NextSentenceHead(config, dtype=self.dtype_policy)
        else:
            # Only the next-sentence loss trains the pooler; freezing it
            # otherwise spares the optimizer variables that never get a gradient.
            self.encoder.pooler.trainable = False
        # Streaming means over an epoch / evaluation, weighted as the original's
        # tf.metrics: masked-LM figures by masked_lm_weights.
        self.trackers = {name: keras.metrics.Mean(name=name) for name in self._metric_names()}
        self.built = True

    def _metric_names(self) -> tuple[str, ...]:
        if self.objective == "ltr":
            return ("lm_accuracy", self.lm_loss_name)
        names = ("masked_lm_accuracy", self.lm_loss_name)
        if self.objective == "mlm_nsp":
            names += ("next_sentence_accuracy", "next_sentence_loss")
        return names

    def call(self, features, training=None):
        missing = [key for key in self._required_features() if key not in features]
        if missing:
            raise ValueError(f"pre-training features lack {', '.join(missing)} "
                           f"(objective {self.objective!r})")
        inputs = {key: features[key] for key in ENCODER_INPUTS}
        if self.objective == "ltr":
            encoded = self.encoder(inputs, training=training)
            return {"lm_logits": self.lm_head(encoded["sequence_output"])}
        # The last block runs only where the heads read it: masked positions and [CLS].
        encoded = self.encoder(inputs, training=training,
                               output_positions=features["masked_lm_positions"])
        outputs = {"masked_lm_logits": self.masked_lm_head(encoded["sequence_output"])}
        if self.objective == "mlm_nsp":
            outputs["next_sentence_logits"] = self.next_sentence_head(encoded["pooled_output"])
        return outputs

    def _required_features(self) -> tuple[str, ...]:
        return ENCODER_INPUTS + (() if self.objective == "ltr" else ("masked_lm_positions",))

    def _label_features(self) -> tuple[str, ...]:
        """What the loss reads beside the inputs (`pretraining_losses`)."""
        if self.objective == "ltr":
            return ()
        labels = ("masked_lm_ids", "masked_lm_weights")
        return labels + (("next_sentence_labels",) if self.objective == "mlm_nsp" else ())

    def _check_features(self, x, call: str, labels: bool) -> None:
        """Refuses a dict `x` lacking a feature `call` reads, before Keras meets it (as a
        KeyError, or for no features `pop from an empty set`)."""
        if not isinstance(x, dict):
            return
        needed = self._required_features() + (self._label_features() if labels else ())
        missing = [key for key in needed if key not in x]
        if missing:
            raise ValueError(f"{call}: x, the pre-training features, lacks "
                             f"{', '.join(missing)} (objective {self.objective!r})")

    def fit(self, x=None, *args, **kwargs):
        self._check_features(x, "fit", labels=True)
        return super().fit(x, *args, **kwargs)

    def evaluate(self, x=None, *args, **kwargs):
        self._check_features(x, "evaluate", labels=True)
        return super().evaluate(x, *args, **kwargs)

    def predict(self, x, *args, **kwargs):
        self._check_features(x, "predict", labels=False)
        return super().predict(x, *args, **kwargs)

    @property
    def lm_loss_name(self) -> str:
        """The language model's loss among the losses and metrics: the perplexity's exponent."""
        return "lm_loss" if self.objective == "ltr" else "masked_lm_loss"

    def pretraining_losses(self, features: dict, outputs: dict) -> dict:
        """The terms of the paper's loss for this model's objective, and their sum under "loss".

        Args:
            features: the pre-training record's features (labels included).
            outputs: this model's outputs for them.
        """
        if self.objective == "ltr":
            loss = left_to_right_lm_loss(outputs["lm_logits"], features["input_ids"],
                                         features["input_mask"])
            return {self.lm_loss_name: loss, "loss": loss}
        losses = {self.lm_loss_name: masked_lm_loss(
            outputs["masked_lm_logits"], features["masked_lm_ids"],
            features["masked_lm_weights"])}
        if self.objective == "mlm_nsp":
            losses["next_sentence_loss"] = next_sentence_loss(
                outputs["next_sentence_logits"], features["next_sentence_labels"])
        losses["loss"] = sum(losses.values())
        return losses

    def pretraining_metric_sums(self, features: dict, outputs: dict) -> dict:
        """{metric: (weighted sum, total weight)} for one batch, to be summed over batches.

        Summing numerators and denominators separately, then dividing once,
        gives the streaming means the original's `tf.metrics.mean` reported
        (masked-LM figures weighted by `masked_lm_weights`), also across replicas.

        Args:
            features: the pre-training record's features (labels included).
            outputs: this model's outputs for them.
        """
        if self.objective == "ltr":
            targets, weights = next_token_targets(features["input_ids"], features["input_mask"])
            logits = outputs["lm_logits"][:, :-1]
            return _sums({"lm_accuracy": _correct(logits, targets),
                          self.lm_loss_name: cross_entropy(targets, logits)}, weights)
        weights = ops.cast(features["masked_lm_weights"], "float32")
        logits, ids = outputs["masked_lm_logits"], features["masked_lm_ids"]
        sums = _sums({"masked_lm_accuracy": _correct(logits, ids),
                      self.lm_loss_name: cross_entropy(ids, logits)}, weights)
        if self.objective == "mlm_nsp":
            logits = outputs["next_sentence_logits"]
            labels = ops.reshape(features["next_sentence_labels"], (-1,))
            ones = ops.ones_like(ops.cast(labels, "float32"))
            sums.update(_sums({"next_sentence_accuracy": _correct(logits, labels),
                               "next_sentence_loss": cross_entropy(labels, logits)}, ones))
        return sums

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The paper's loss from the features in `x`; `y` is unused (labels are features)."""
        loss = self.pretraining_losses(x, y_pred)["loss"]
        if self.losses:
            loss = loss + ops.sum(self.losses)
        # Gradients are summed over replicas, so each replica contributes its share.
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        return loss / replicas if replicas > 1 else loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        for name, (total, weight) in self.pretraining_metric_sums(x, y_pred).items():
            # The batch mean, weighted by its total weight: a streaming weighted mean.
            self.trackers[name].update_state(total / ops.maximum(weight, 1e-12),
                                             sample_weight=weight)
        return self.get_metrics_result()

    def checkpoint_variables(self) -> dict[str, keras.Variable]:
        """The encoder's Google names plus the heads' (`cls/...`)."""
        names = dict(self.encoder.checkpoint_variables())
        for head in self._heads():
            names.update(head.checkpoint_variables())
        return names

    def serving_spec(self) -> ServingSpec:
        """What the pre-trainer serves (`network.serving_spec`): its heads' logits."""
        outputs = {"ltr": ("lm_logits",), "mlm": ("masked_lm_logits",),
                   "mlm_nsp": ("masked_lm_logits", "next_sentence_logits")}[self.objective]
        return ServingSpec("pretrainer", outputs, returns_dict=True,
                           causal=self.objective == "ltr")

    def _heads(self) -> list[keras.layers.Layer]:
        if self.objective == "ltr":
            return [self.lm_head]
        heads = [self.masked_lm_head]
        if self.objective == "mlm_nsp":
            heads.append(self.next_sentence_head)
        return heads
