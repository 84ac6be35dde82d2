"""Named-entity recognition on CoNLL-2003 files, fine-tuned or on frozen features: the hooks
of `tasks.driver`, whose runs are compared by their entity F1 on the validation split.

`fine_tune` (Section 5.3): a linear tagger on every position of the
encoder's last layer, all weights trained, each word predicted at its first
WordPiece, no CRF. `feature_based` (Section 5.4, Table 7): the encoder stays
frozen, its activations are cached once per split
(`modeling.feature_tagger.cached_features`), and each run trains a
two-layer BiLSTM with a linear classifier on them with Adam (Keras `fit` on
one device: the BiLSTM is small next to the encoder).
"""

from __future__ import annotations

import dataclasses
import os

import keras
import numpy as np
from absl import logging

from core.arguments import FieldError, check_integer, check_number
from data_prep.datasets.conll import (build_windows, check_labels, detect_scheme, label_list,
                                      predictions_to_tags, read_splits, windows_to_arrays,
                                      write_conll_predictions)
from evaluation.ner import entity_scores, token_accuracy
from export.serving_tagging import export_tagger
from modeling.feature_tagger import (FEATURE_LAYERS, FeatureBatches, FeatureTagger,
                                     cached_features, check_feature_layers, feature_layers_for)
from modeling.losses import tagging_loss
from modeling.token_tagger import BertTokenTagger
from network.encoder import BertEncoder
from network.model_folder import write_model_folder
from tasks.batch_prediction import predict
from tasks.driver import DevScores, FineTuningSettings, FineTuningTask, TaskHooks
from tasks.model_files import FROZEN_ENCODER, ModelNeeds, ResolvedModel
from training import loop
from training.divergence import FitDiverged, diverged
from training.configs import OptimizationConfig

# The BiLSTM trains from scratch: the fine-tuning default rate is far too low for it.
FEATURE_LEARNING_RATE = 1e-3
FEATURE_WEIGHTS = "feature_tagger.weights.h5"


@dataclasses.dataclass(frozen=True)
class TaggingTask(FineTuningSettings):
    """The data, the tag set and the approach (what to do: the base class)."""

    data_dir: str  # train.txt, valid.txt (or dev.txt), test.txt; or eng.train/testa/testb
    labels: tuple[str, ...] | None = None  # default: the training file's tags
    tag_scheme: str = "auto"  # auto, IOB1 or IOB2
    document_context: bool = False  # fill windows with the document's neighbouring sentences
    window_stride: int | None = None  # sub-tokens between windows (default: half a window)
    mode: str = "fine_tune"  # fine_tune or feature_based
    causal: bool = False  # fine_tune: the left-to-right model, each tag sees its left context
    bilstm_units: int = 0  # fine_tune: a BiLSTM of this many units per direction before the tags
    feature_layers: str = "concat_last_four"  # feature_based: Table 7's row
    lstm_units: int = 768  # feature_based: units of each BiLSTM direction
    lstm_dropout: float = 0.1  # feature_based: dropout on features and LSTM outputs
    feature_cache_dir: str | None = None  # feature_based: default <output_dir>/features
    # feature_based: cache every layer choice the encoder has from the one forward pass
    cache_all_feature_layers: bool = False
    # feature_based: Adam's rate when `learning_rates` is empty (the optimization's is not used)
    feature_learning_rate: float = FEATURE_LEARNING_RATE

    def __post_init__(self) -> None:
        if not self.data_dir:
            raise FieldError("{data_dir} is required")
        super().__post_init__()
        check_integer("lstm_units", self.lstm_units)
        if self.window_stride is not None:
            check_integer("window_stride", self.window_stride)
        check_number("lstm_dropout", self.lstm_dropout, 0, 1, below=True)
        check_number("feature_learning_rate", self.feature_learning_rate, 0, above=True)
        check_integer("bilstm_units", self.bilstm_units, minimum=0)
        if self.mode not in ("fine_tune", "feature_based"):
            raise FieldError("{mode} must be fine_tune or feature_based, got {0!r}", self.mode)
        if self.causal and self.mode != "fine_tune":
            raise FieldError("{causal} fine-tunes the left-to-right model; it has no "
                             "{mode}=feature_based")
        if self.bilstm_units and self.mode != "fine_tune":
            raise FieldError("{bilstm_units} is fine-tuned with the encoder; {mode}=feature_based "
                             "has its own BiLSTM ({lstm_units})")
        if self.feature_layers not in FEATURE_LAYERS:
            raise FieldError("{feature_layers} must be one of {0}", ", ".join(FEATURE_LAYERS))


@dataclasses.dataclass
class Split:
    name: str
    sentences: list
    windows: list
    arrays: dict[str, np.ndarray]


@dataclasses.dataclass
class TaggingData:
    """The tag set and scheme, the splits in windows and (feature_based) their features."""

    labels: list[str]
    scheme: str  # IOB1 or IOB2
    splits: dict[str, Split]
    features: dict[str, np.ndarray] | None = None  # feature_based: each split's, cached

    @property
    def train(self) -> dict[str, np.ndarray] | None:
        return self.splits["train"].arrays if "train" in self.splits else None


def read_data(task: TaggingTask, tokenizer, max_seq_length: int) -> TaggingData:
    """The tag set and the splits the actions need, in windows."""
    wanted = [name for name, wanted in (("train", task.do_train), ("valid", task.do_eval),
                                        ("test", task.do_predict)) if wanted]
    needed = wanted if task.labels or "train" in wanted else [*wanted, "train"]
    sentences = read_splits(task.data_dir, needed)
    labels = list(task.labels or label_list(sentences["train"]))
    check_labels(labels)
    scheme = task.tag_scheme if task.tag_scheme != "auto" else detect_scheme(
        sentences.get("train") or sentences[wanted[0]])
    logging.info("%d labels (%s): %s", len(labels), scheme, ", ".join(labels))
    label_map = {label: index for index, label in enumerate(labels)}
    splits = {}
    for name in wanted:
        windows = build_windows(sentences[name], tokenizer, max_seq_length, label_map,
                                task.document_context, task.window_stride)
        splits[name] = Split(name, sentences[name], windows, windows_to_arrays(windows))
        logging.info("%s: %d sentences in %d windows", name, len(sentences[name]), len(windows))
    return TaggingData(labels, scheme, splits)


def conll_scores(split: Split, tags: list[list[str]], scheme: str,
                 prefix: str) -> dict[str, float]:
    """conlleval's scores of the predicted tags, keyed `<prefix>_f1` etc."""
    gold = [sentence.tags for sentence in split.sentences]
    scores = entity_scores(gold, tags, scheme)
    results = {f"{prefix}_{key}": scores[key] for key in ("precision", "recall", "f1")}
    results[f"{prefix}_accuracy"] = token_accuracy(gold, tags)
    results.update({f"{prefix}_f1_{kind}": values["f1"]
                    for kind, values in scores["per_type"].items()})
    logging.info("%s: entity F1 %.4f (%d gold, %d predicted, %d correct entities)", split.name,
                 scores["f1"], scores["support"], scores["predicted"], scores["correct"])
    return results


class Tagging(TaskHooks):
    """The driver's hooks (`tasks.driver`) for `TaggingTask`: fine_tune, or (through
    `for_task`) `FeatureTagging`."""

    task: TaggingTask
    data: TaggingData

    @classmethod
    def for_task(cls, task: TaggingTask) -> type[TaskHooks]:
        return FeatureTagging if task.mode == "feature_based" else cls

    def read_data(self) -> TaggingData:
        return read_data(self.task, self.resolved.tokenizer, self.training.max_seq_length)

    def build_model(self) -> keras.Model:
        task = self.task
        return self.pretrained(lambda: BertTokenTagger(
            self.resolved.config, len(self.data.labels), causal=task.causal,
            bilstm_units=task.bilstm_units))

    def loss(self) -> loop.LossFunction:
        return tagging_loss

    def score(self, model: keras.Model) -> DevScores:
        """The validation split's entity scores; the sweep compares the entity F1."""
        tags = self.tags(model, "valid", self.training.eval_batch_size)
        scores = conll_scores(self.data.splits["valid"], tags, self.data.scheme, "eval")
        return DevScores(scores, scores["eval_f1"], tags)

    def export(self, model: keras.Model, path: str) -> str | None:
        return export_tagger(model, self.resolved.tokenizer, self.training.max_seq_length,
                             self.data.labels, path, self.task.window_stride)

    def write_predictions(self, model: keras.Model, dev: DevScores | None
                          ) -> tuple[dict[str, float], list[str]]:
        """`<split>_predictions.txt` (TOKEN GOLD PRED) for valid and test; test's scores."""
        splits, scores, written = self.data.splits, {}, []
        predicted = {"valid": dev.predictions} if dev else {}
        if "test" in splits:
            predicted["test"] = self.tags(model, "test", self.training.predict_batch_size)
            scores = conll_scores(splits["test"], predicted["test"], self.data.scheme, "test")
        for name, tags in predicted.items():
            written.append(os.path.join(self.training.output_dir, f"{name}_predictions.txt"))
            write_conll_predictions(written[-1], splits[name].sentences, tags)
        return scores, written

    def tags(self, model: keras.Model, name: str, batch_size: int) -> list[list[str]]:
        """The model's tag for every word of the split `name`."""
        split = self.data.splits[name]
        return predictions_to_tags(split.windows, self.logits(model, name, batch_size),
                                   split.sentences, self.data.labels)

    def logits(self, model: keras.Model, name: str, batch_size: int) -> np.ndarray:
        return predict(model, self.data.splits[name].arrays, batch_size)


class FeatureTagging(Tagging):
    """feature_based: a BiLSTM trained with Keras `fit` on the frozen encoder's cached
    features, one per run of the sweep, at `feature_learning_rate` by default."""

    @classmethod
    def needs(cls, task: TaggingTask) -> ModelNeeds:
        return FROZEN_ENCODER

    @classmethod
    def check(cls, task: TaggingTask, optimization: OptimizationConfig,
              resolved: ResolvedModel | None = None) -> None:
        """Whole epochs, and layers the encoder has."""
        epochs = optimization.num_train_epochs
        if task.do_train and epochs != int(epochs):
            raise FieldError("{mode}=feature_based trains whole epochs; got "
                             "{num_train_epochs}={0}", epochs)
        if resolved:
            check_feature_layers(task.feature_layers, resolved.config.num_hidden_layers)

    def learning_rates(self, optimization: OptimizationConfig) -> tuple[float, ...]:
        return self.task.learning_rates or (self.task.feature_learning_rate,)

    def read_data(self) -> TaggingData:
        """The windows, and each split's features, cached in `feature_cache_dir`."""
        data, resolved, training = super().read_data(), self.resolved, self.training
        data.features = cached_features(
            lambda: self.pretrained(lambda: BertEncoder(resolved.config,
                                                        output_hidden_states=True)),
            resolved.files.init_checkpoint,
            {"config": resolved.config.to_dict(), "dtype": training.dtype},
            {name: split.arrays for name, split in data.splits.items()},
            self.task.feature_layers,
            self.task.feature_cache_dir or os.path.join(training.output_dir, "features"),
            training.predict_batch_size, self.other_feature_layers())
        return data

    def other_feature_layers(self) -> list[str]:
        """With `cache_all_feature_layers`, the other choices this encoder is deep enough for."""
        if not self.task.cache_all_feature_layers:
            return []
        return [name for name in feature_layers_for(self.resolved.config.num_hidden_layers)
                if name != self.task.feature_layers]

    def build_model(self) -> keras.Model:
        """A fresh BiLSTM to train, or (without do_train) the one trained earlier."""
        task = self.task
        model = FeatureTagger(len(self.data.labels), task.lstm_units, dropout=task.lstm_dropout)
        if not task.do_train:
            weights = os.path.join(self.training.output_dir, FEATURE_WEIGHTS)
            if not os.path.exists(weights):
                raise FieldError("{0}: no trained tagger; run with {do_train} first", weights)
            model(self.batches(next(iter(self.data.splits)), 1)[0][0])  # builds, to load
            model.load_weights(weights)
        return model

    def batches(self, split: str, batch_size: int, seed: int | None = None) -> FeatureBatches:
        """A split's cached features in batches, shuffled each epoch with `seed`."""
        arrays = self.data.splits[split].arrays
        return FeatureBatches(self.data.features[split], arrays["input_mask"],
                              arrays["label_ids"], batch_size, seed)

    def train(self, model: keras.Model, optimization: OptimizationConfig, seed: int,
              output_dir: str) -> int:
        """Adam for whole epochs; a step whose loss or gradients are not finite stops the run as
        diverged, the weights kept from before it."""
        epochs, rate = int(optimization.num_train_epochs), optimization.learning_rate
        logging.info("Training the BiLSTM tagger: %d epochs, Adam at learning rate %g", epochs,
                     rate)
        model.compile(optimizer=keras.optimizers.Adam(rate))
        batches = self.batches("train", self.training.train_batch_size, seed)
        progress = loop.ProgressLogger(  # the fine-tuning loop's lines and TensorBoard curves
            model.optimizer, epochs * len(batches), self.training.train_batch_size,
            self.training.log_every, os.path.join(output_dir, "logs", "train"))
        try:
            model.fit(batches, epochs=epochs, verbose=0, callbacks=[_EveryStep(progress)])
        except FitDiverged as error:  # that step was not applied; nothing was saved
            raise diverged(error.step, f"loss={error.loss:.6g}", None) from None
        return int(model.optimizer.iterations.numpy())

    def save(self, model: keras.Model) -> list[str]:
        return write_model_folder(self.training.output_dir,
                                  weights=(FEATURE_WEIGHTS, model.save_weights),
                                  labels=self.data.labels)

    def export(self, model: keras.Model, path: str) -> None:
        return None

    def logits(self, model: keras.Model, name: str, batch_size: int) -> np.ndarray:
        return model.predict(self.batches(name, batch_size), verbose=0)


class _EveryStep(keras.callbacks.Callback):
    """Hands `report` (a `loop.ProgressLogger`) each training step's number and logs."""

    def __init__(self, report: loop.ProgressLogger):
        super().__init__()
        self.report, self.step = report, 0

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        self.report(self.step, {key: float(value) for key, value in (logs or {}).items()})


TASK = FineTuningTask(Tagging)
