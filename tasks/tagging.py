"""Named-entity recognition on CoNLL-2003 files: fine-tuning, or the feature-based approach.

`fine_tune` (Section 5.3): a linear tagger on every position of the
encoder's last layer, all weights trained, each word predicted at its first
WordPiece, no CRF. `feature_based` (Section 5.4, Table 7): the encoder stays
frozen; its activations are computed once per split and cached as .npy
files, and a two-layer BiLSTM with a linear classifier is trained on them
with Adam (Keras `fit` on one device: the BiLSTM is small next to the
encoder). A cache entry is keyed by the split, the layers, the sequence
length, and a hash of the checkpoint (path, file sizes and times), config,
precision and the windows' token ids, so changing the data or the
checkpoint never reads stale features.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
from typing import Callable

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from core.arguments import check_non_negative, check_positive
from core.record_schema import ENCODER_INPUTS
from data_prep.datasets.conll import (build_windows, check_entity_tags, detect_scheme, label_list,
                                      predictions_to_tags, read_conll, windows_to_arrays,
                                      write_conll_predictions)
from evaluation.ner import entity_scores, token_accuracy
from evaluation.results import write_eval_results
from modeling.encoder import BertEncoder
from modeling.feature_tagger import (FEATURE_LAYERS, FeatureBatches, FeatureTagger,
                                     check_feature_layers, write_features)
from modeling.pretrained import save_labels
from modeling.task_models import BertTokenTagger, tagging_loss
from tasks.contract import FineTuningTask, TaskResult
from tasks.model_files import (FINE_TUNING, FROZEN_ENCODER, ModelFiles, ModelNeeds,
                               ResolvedModel)
from tasks.serving_tagging import export_tagger
from training import finetuning
from training.configs import OptimizationConfig, TrainingConfig

SPLIT_FILES = {"train": ("train.txt",), "valid": ("valid.txt", "dev.txt"), "test": ("test.txt",)}
# The BiLSTM trains from scratch: the fine-tuning default rate is far too low for it.
FEATURE_LEARNING_RATE = 1e-3
Predictor = Callable[[str, dict], np.ndarray]  # split name, arrays -> logits


@dataclasses.dataclass(frozen=True)
class TaggingTask:
    """The data, the tag set, the approach, and what to do."""

    data_dir: str  # train.txt, valid.txt (or dev.txt), test.txt
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    labels: tuple[str, ...] | None = None  # default: the training file's tags
    tag_scheme: str = "auto"  # auto, IOB1 or IOB2
    document_context: bool = False  # fill windows with the document's neighbouring sentences
    window_stride: int | None = None  # sub-tokens between windows (default: half a window)
    mode: str = "fine_tune"  # fine_tune or feature_based
    causal: bool = False  # fine_tune: the left-to-right model, each tag sees its left context
    bilstm_units: int = 0  # fine_tune: a BiLSTM of this many units per direction before the tags
    export_saved_model: bool = True  # fine_tune, after training: a SavedModel tagging raw text
    feature_layers: str = "concat_last_four"  # feature_based: Table 7's row
    lstm_units: int = 768  # feature_based: units of each BiLSTM direction
    lstm_dropout: float = 0.1  # feature_based: dropout on features and LSTM outputs
    feature_cache_dir: str | None = None  # feature_based: default <output_dir>/features
    feature_learning_rate: float = FEATURE_LEARNING_RATE  # feature_based: Adam's rate

    def __post_init__(self) -> None:
        if not self.data_dir:
            raise ValueError("--data_dir is required")
        check_positive("lstm_units", self.lstm_units)
        if self.window_stride is not None:
            check_positive("window_stride", self.window_stride)
        if not 0 <= self.lstm_dropout < 1:
            raise ValueError(f"--lstm_dropout must be in [0, 1), got {self.lstm_dropout}")
        if self.mode not in ("fine_tune", "feature_based"):
            raise ValueError(f"--mode must be fine_tune or feature_based, got {self.mode!r}")
        if self.causal and self.mode != "fine_tune":
            raise ValueError("--causal fine-tunes the left-to-right model; it has no "
                             "--mode=feature_based")
        check_non_negative("bilstm_units", self.bilstm_units)
        if self.bilstm_units and self.mode != "fine_tune":
            raise ValueError("--bilstm_units is fine-tuned with the encoder; "
                             "--mode=feature_based has its own BiLSTM (--lstm_units)")
        if self.feature_layers not in FEATURE_LAYERS:
            raise ValueError(f"--feature_layers must be one of {', '.join(FEATURE_LAYERS)}")


def check_epochs(task: TaggingTask, optimization: OptimizationConfig) -> None:
    """Refuses a feature-based run that would train a fraction of an epoch."""
    epochs = optimization.num_train_epochs
    if task.mode == "feature_based" and task.do_train and (epochs < 1 or epochs != int(epochs)):
        raise ValueError(f"--mode=feature_based trains whole epochs; got "
                         f"--num_train_epochs={epochs}")


@dataclasses.dataclass
class Split:
    name: str
    sentences: list
    windows: list
    arrays: dict[str, np.ndarray]


def _read_split(data_dir: str, name: str) -> list:
    paths = [os.path.join(data_dir, file) for file in SPLIT_FILES[name]]
    for path in paths:
        if os.path.exists(path):
            return read_conll(path)
    raise FileNotFoundError(f"{name} split: no file {' or '.join(paths)}")


def _check_same_columns(sentences: dict[str, list]) -> None:
    """Refuses split files of different layouts, blaming the one with fewer columns.

    A file missing a column has its tags read from another column (`TOKEN
    POS CHUNK` gives chunk tags); the file with more columns is the complete
    one, so the error names the other, with its first token line.
    """
    firsts = sorted((split[0] for split in sentences.values()), key=lambda s: s.columns)
    short, full = firsts[0], firsts[-1]
    if short.columns != full.columns:
        raise ValueError(f"{short.source}: {short.columns} columns per token line where "
                         f"{full.source.rpartition(':')[0]} has {full.columns}: is a column "
                         "missing? every file needs the same layout (TOKEN POS CHUNK TAG, "
                         "or TOKEN TAG)")


def _check_labels(labels: list[str]) -> None:
    if len(set(labels)) != len(labels):
        raise ValueError(f"--labels lists a label twice: {','.join(labels)}")
    bad = [label for label in labels
           if label != "O" and (label[:2] not in ("B-", "I-") or len(label) < 3)]
    if bad:
        raise ValueError(f"labels {', '.join(bad)} are not O, B-TYPE or I-TYPE; entity-level "
                         "scoring needs IOB1 or IOB2 tags")


def read_data(task: TaggingTask, tokenizer, max_seq_length: int
              ) -> tuple[list[str], str, dict[str, Split]]:
    """(labels, tag scheme, the splits the actions need, in windows)."""
    wanted = [name for name, wanted in (("train", task.do_train), ("valid", task.do_eval),
                                        ("test", task.do_predict)) if wanted]
    sentences = {name: _read_split(task.data_dir, name) for name in wanted}
    if not task.labels and "train" not in sentences:
        sentences["train"] = _read_split(task.data_dir, "train")
    _check_same_columns(sentences)
    for name, split in sentences.items():
        check_entity_tags(split, training=name == "train")
    labels = list(task.labels or label_list(sentences["train"]))
    _check_labels(labels)
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
    return labels, scheme, splits


def _batch_size(training: TrainingConfig, split: str) -> int:
    return training.eval_batch_size if split == "valid" else training.predict_batch_size


@dataclasses.dataclass
class Tagger:
    """A built (and with do_train, trained and saved) tagger, by either approach."""

    model: keras.Model
    predict: Predictor
    step: int  # updates trained (0 for a loaded tagger)
    written: list[str]  # the files saved


def fine_tune(resolved: ResolvedModel, strategy: tf.distribute.Strategy, task: TaggingTask,
              training: TrainingConfig, optimization: OptimizationConfig, labels: list[str],
              splits: dict[str, Split]) -> Tagger:
    """Builds (and with do_train, fine-tunes and saves) the tagger."""
    keras.utils.set_random_seed(training.random_seed)
    model = finetuning.build_model(strategy,
                                   lambda: BertTokenTagger(resolved.config, len(labels),
                                                           causal=task.causal,
                                                           bilstm_units=task.bilstm_units),
                                   resolved.files.init_checkpoint, resolved.files.transfer_layers)
    step, written = 0, []
    if task.do_train:
        step = finetuning.train(model, strategy, splits["train"].arrays, tagging_loss,
                                optimization, training, training.output_dir,
                                seed=training.random_seed,
                                hidden_size=resolved.config.hidden_size)
        written.extend(finetuning.save_model_files(model, resolved.config,
                                                   resolved.files.vocab_file,
                                                   training.output_dir, labels))
        if task.export_saved_model:
            written.append(export_tagger(model, resolved.tokenizer, training.max_seq_length,
                                         labels, os.path.join(training.output_dir,
                                                              "saved_model")))
            logging.info("Exported %s (serving signature takes a sentence)", written[-1])

    def predict(name: str, arrays: dict) -> np.ndarray:
        return finetuning.predict(model, arrays, _batch_size(training, name))

    return Tagger(model, predict, step, written)


def _checkpoint_fingerprint(path: str) -> list:
    """(file, size, mtime) of each file of a checkpoint: a prefix, a file or a folder."""
    files = (sorted(os.path.join(path, name) for name in os.listdir(path))
             if os.path.isdir(path) else sorted(glob.glob(glob.escape(path) + "*")))
    if not files:
        raise FileNotFoundError(f"--init_checkpoint {path}: no such file, folder or prefix")
    return [(os.path.basename(file), os.stat(file).st_size, os.stat(file).st_mtime_ns)
            for file in files]


def _cache_path(split: Split, resolved: ResolvedModel, task: TaggingTask,
                training: TrainingConfig) -> str:
    checkpoint = os.path.abspath(resolved.files.init_checkpoint)
    digest = hashlib.sha256(json.dumps(
        {"checkpoint": checkpoint, "files": _checkpoint_fingerprint(checkpoint),
         "config": resolved.config.to_dict(), "dtype": training.dtype}, sort_keys=True).encode())
    for key in ENCODER_INPUTS:
        digest.update(np.ascontiguousarray(split.arrays[key]).tobytes())
    folder = task.feature_cache_dir or os.path.join(training.output_dir, "features")
    return os.path.join(folder, f"{split.name}-{task.feature_layers}-len{training.max_seq_length}"
                                f"-{digest.hexdigest()[:16]}.npy")


def cached_features(resolved: ResolvedModel, strategy: tf.distribute.Strategy,
                    task: TaggingTask, training: TrainingConfig,
                    splits: dict[str, Split]) -> dict[str, np.ndarray]:
    """Each split's features, computed by the frozen encoder only where no cache entry exists."""
    paths = {name: _cache_path(split, resolved, task, training)
             for name, split in splits.items()}
    encoder = None
    for name, path in paths.items():
        if os.path.exists(path):
            logging.info("%s: reusing cached features %s", name, path)
            continue
        if encoder is None:
            encoder = finetuning.build_model(
                strategy, lambda: BertEncoder(resolved.config, output_hidden_states=True),
                resolved.files.init_checkpoint)
        logging.info("%s: computing %s features of %d windows into %s", name,
                     task.feature_layers, len(splits[name].windows), path)
        write_features(encoder, splits[name].arrays, task.feature_layers, path,
                       training.predict_batch_size)
    return {name: np.load(path, mmap_mode="r") for name, path in paths.items()}


def feature_based(resolved: ResolvedModel, strategy: tf.distribute.Strategy, task: TaggingTask,
                  training: TrainingConfig, optimization: OptimizationConfig, labels: list[str],
                  splits: dict[str, Split]) -> Tagger:
    """Trains (or loads) the BiLSTM on cached features."""
    features = cached_features(resolved, strategy, task, training, splits)
    keras.utils.set_random_seed(training.random_seed)
    model = FeatureTagger(len(labels), task.lstm_units, dropout=task.lstm_dropout)

    def batches(name: str, batch_size: int, shuffle: bool) -> FeatureBatches:
        arrays = splits[name].arrays
        return FeatureBatches(features[name], arrays["input_mask"], arrays["label_ids"],
                              batch_size, training.random_seed if shuffle else None)

    weights = os.path.join(training.output_dir, "feature_tagger.weights.h5")
    written = []
    if task.do_train:
        epochs = int(optimization.num_train_epochs)
        logging.info("Training the BiLSTM tagger: %d epochs, Adam at learning rate %g",
                     epochs, task.feature_learning_rate)
        model.compile(optimizer=keras.optimizers.Adam(task.feature_learning_rate))
        model.fit(batches("train", training.train_batch_size, True), epochs=epochs,
                  validation_data=batches("valid", training.eval_batch_size, False)
                  if "valid" in splits else None, verbose=2)
        model.save_weights(weights)
        step = int(model.optimizer.iterations.numpy())
        written = [weights, str(save_labels(training.output_dir, labels))]
    else:
        step = 0
        if not os.path.exists(weights):
            raise FileNotFoundError(f"{weights}: no trained tagger; run with --do_train first")
        model(batches(next(iter(splits)), 1, False)[0][0])  # builds the weights to load
        model.load_weights(weights)

    def predict(name: str, arrays: dict) -> np.ndarray:
        del arrays  # the cached features stand for them
        return model.predict(batches(name, _batch_size(training, name), False), verbose=0)

    return Tagger(model, predict, step, written)


def score(split: Split, logits: np.ndarray, labels: list[str], scheme: str, prefix: str,
          output_dir: str) -> dict[str, float]:
    """Writes the split's predictions in CoNLL layout; returns its conlleval scores."""
    predicted = predictions_to_tags(split.windows, logits, split.sentences, labels)
    path = os.path.join(output_dir, f"{split.name}_predictions.txt")
    write_conll_predictions(path, split.sentences, predicted)
    gold = [sentence.tags for sentence in split.sentences]
    scores = entity_scores(gold, predicted, scheme)
    results = {f"{prefix}_{key}": scores[key] for key in ("precision", "recall", "f1")}
    results[f"{prefix}_accuracy"] = token_accuracy(gold, predicted)
    results.update({f"{prefix}_f1_{kind}": values["f1"]
                    for kind, values in scores["per_type"].items()})
    logging.info("%s: entity F1 %.4f (%d gold, %d predicted, %d correct entities); wrote %s",
                 split.name, scores["f1"], scores["support"], scores["predicted"],
                 scores["correct"], path)
    return results


class Tagging(FineTuningTask):
    """The contract (`tasks.contract.Task`) for `TaggingTask`."""

    def needs(self, task: TaggingTask) -> ModelNeeds:
        return FROZEN_ENCODER if task.mode == "feature_based" else FINE_TUNING

    def prepare(self, task: TaggingTask, model_files: ModelFiles, training: TrainingConfig,
                optimization: OptimizationConfig) -> ResolvedModel:
        check_epochs(task, optimization)  # before any file is read
        resolved = super().prepare(task, model_files, training, optimization)
        if task.mode == "feature_based":
            check_feature_layers(task.feature_layers, resolved.config.num_hidden_layers)
        return resolved

    def train_and_score(self, task: TaggingTask, resolved: ResolvedModel,
                        training: TrainingConfig, optimization: OptimizationConfig,
                        strategy: tf.distribute.Strategy) -> TaskResult:
        """Trains and/or scores as `task` asks; the scores are those of eval_results.txt."""
        output_dir = training.output_dir
        labels, scheme, splits = read_data(task, resolved.tokenizer, training.max_seq_length)
        build = fine_tune if task.mode == "fine_tune" else feature_based
        tagger = build(resolved, strategy, task, training, optimization, labels, splits)
        scores, written = {}, tagger.written
        for name, prefix in (("valid", "eval"), ("test", "test")):
            if name in splits:
                logits = tagger.predict(name, splits[name].arrays)
                scores.update(score(splits[name], logits, labels, scheme, prefix, output_dir))
                written.append(os.path.join(output_dir, f"{name}_predictions.txt"))
        if scores:
            written.append(os.path.join(output_dir, "eval_results.txt"))
            write_eval_results(written[-1], scores)
            finetuning.write_eval_scalars(strategy, output_dir, tagger.step, scores)
        return TaskResult(scores, tuple(written), tagger.model)


TASK = Tagging()
