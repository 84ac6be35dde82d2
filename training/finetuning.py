"""What the fine-tuning tasks share: training on arrays, prediction, the saved model.

Classification, SQuAD and tagging differ in how they read their data and
score predictions; the rest is here once: a pre-trained checkpoint loaded
into a fresh task model,
training with AdamW, warmup over the first `warmup_proportion` of the
steps and linear decay (Section 4 / Appendix A.3 of the paper) through
`training.trainer.TrainingRun`, and batched prediction.

Features are numpy arrays in a dict (`input_ids`, `input_mask`,
`segment_ids` plus the task's label arrays); a task's loss function reads
its labels from the same dict.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import weakref
from typing import Callable, Mapping

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from core import atomic
from core.arguments import FieldError
from core.record_schema import ENCODER_INPUTS
from network.checkpoints import load_weights, save_checkpoint
from network.config import BertConfig
from network.model_folder import LABELS_FILE, model_settings, save_labels, save_model_settings
from training import loop
from training.configs import OptimizationConfig, TrainingConfig
from training.trainer import TrainingRun


def remove_dead_temporaries(strategy: tf.distribute.Strategy, output_dir: str) -> None:
    """Dead writers' temporary files in `output_dir` go (by the chief alone), so a rerun
    after a kill starts clean."""
    if loop.is_chief(strategy):
        atomic.remove_dead_temporaries(output_dir)


def build_model(strategy: tf.distribute.Strategy, model_fn: Callable[[], keras.Model],
                init_checkpoint: str | None, transfer_layers: int | None = None) -> keras.Model:
    """The task model inside the strategy's scope, with the pre-trained weights loaded.

    `transfer_layers=N` loads the embeddings and the first N blocks only.
    """
    with strategy.scope():
        model = model_fn()
    if init_checkpoint:
        report = load_weights(model, init_checkpoint, transfer_layers)
        logging.info(report.summary())
    else:
        logging.warning("No init_checkpoint: the encoder starts from random weights")
    return model


def train(model: keras.Model, strategy: tf.distribute.Strategy, arrays: dict[str, np.ndarray],
          loss_fn: loop.LossFunction, optimization: OptimizationConfig,
          training: TrainingConfig, output_dir: str, seed: int, *, hidden_size: int,
          checkpoint_name: str = "checkpoints") -> int:
    """Fine-tunes `model` on `arrays` for `optimization`'s epochs; returns the updates made.

    The schedule is the paper's. Checkpoints and TensorBoard's `logs/train`
    go to `output_dir`, a sweep run's own folder. `seed` orders the data;
    `hidden_size`, the encoder's width, picks XLA or not (`TrainingRun`). A
    run killed at any point and started again resumes from its newest
    checkpoint in `output_dir/checkpoint_name` and ends with the same
    weights. Raises `loop.TrainingDiverged` (a
    ValueError) when the loss or gradients stop being finite, so a sweep
    can skip that rate and a lone run exits with the step and checkpoint.
    """
    examples = len(next(iter(arrays.values())))
    if examples < training.train_batch_size:
        raise FieldError("{0} training examples cannot fill one batch of {train_batch_size}={1}",
                         examples, training.train_batch_size)
    updates, warmup = optimization.schedule(examples, training.train_batch_size)
    training_run = TrainingRun(model, loss_fn, strategy, optimization,
                               dataclasses.replace(training, output_dir=output_dir), updates,
                               warmup, os.path.join(output_dir, checkpoint_name),
                               hidden_size=hidden_size, max_to_keep=1)
    logging.info("Fine-tuning on %d examples: %d updates of %d", examples, updates,
                 training.train_batch_size)

    def build(context: tf.distribute.InputContext | None, micro_batch: int) -> tf.data.Dataset:
        data = tf.data.Dataset.from_tensor_slices(arrays)
        if context is not None and context.num_input_pipelines > 1:
            data = data.shard(context.num_input_pipelines, context.input_pipeline_id)
        per_replica = context.get_per_replica_batch_size(micro_batch) if context else micro_batch
        data = data.shuffle(examples, seed=seed, reshuffle_each_iteration=True).repeat()
        return data.batch(per_replica, drop_remainder=True).prefetch(2)

    training_run.train(build)
    return training_run.global_step


def write_eval_scalars(strategy: tf.distribute.Strategy, output_dir: str, step: int,
                       results: Mapping[str, object]) -> None:
    """The evaluation's numbers to TensorBoard's `logs/eval`, beside the run's `logs/train`.

    `step` is the run's last update, so the scores line up with the loss
    curve that led to them (0 for a model evaluated without training).
    """
    if loop.is_chief(strategy):
        numbers = {key: value for key, value in results.items()
                   if isinstance(value, (int, float, np.number)) and not isinstance(value, bool)}
        loop.write_scalars(os.path.join(output_dir, "logs", "eval"), step, numbers)


_PREDICT_FUNCTIONS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def predict(model: keras.Model, arrays: dict[str, np.ndarray], batch_size: int,
            keys: tuple[str, ...] = ENCODER_INPUTS):
    """The model's outputs for every row of `arrays`, in order, as numpy (dicts kept).

    The last batch is padded to `batch_size` so that one traced function
    serves every batch of every call for this model.
    """
    if model not in _PREDICT_FUNCTIONS:
        _PREDICT_FUNCTIONS[model] = tf.function(lambda features: model(features, training=False))
    call = _PREDICT_FUNCTIONS[model]
    count = len(arrays[keys[0]])
    if not count:
        raise ValueError("nothing to predict: no examples")
    outputs = []
    for start in range(0, count, batch_size):
        batch = {key: arrays[key][start:start + batch_size] for key in keys}
        rows = len(batch[keys[0]])
        if rows < batch_size:
            batch = {key: np.concatenate([value, np.zeros((batch_size - rows, *value.shape[1:]),
                                                          value.dtype)])
                     for key, value in batch.items()}
        result = call({key: tf.constant(value) for key, value in batch.items()})
        outputs.append(tf.nest.map_structure(lambda tensor: tensor.numpy()[:rows], result))
    return tf.nest.map_structure(lambda *parts: np.concatenate(parts), *outputs)


def save_model_files(model: keras.Model, config: BertConfig, vocab_file: str, output_dir: str,
                     labels: list[str] | None = None) -> tuple[str, ...]:
    """The fine-tuned model in this project's format, with its config, vocabulary and labels.

    `labels` (the class or tag names, in the order of the model's outputs)
    go to `labels.txt`, so `modeling.load_task_model` reloads the folder
    without `num_labels` and with names; the model's class and settings
    (`causal`, `bilstm_units`, `multi_label`, `long_texts`, ...) to
    `model_settings.json` (`network.model_folder`), so it reloads as the
    same model. A model without labels (regression, SQuAD) removes an
    earlier run's `labels.txt`, which would describe another head. Returns
    the paths written.
    """
    written = (os.path.join(output_dir, "model.ckpt"),
               os.path.join(output_dir, "bert_config.json"), os.path.join(output_dir, "vocab.txt"))
    save_checkpoint(model, written[0])
    config.to_json_file(written[1])
    shutil.copyfile(vocab_file, written[2])
    written = (*written, str(save_model_settings(output_dir, model_settings(model))))
    if labels:
        return (*written, str(save_labels(output_dir, labels)))
    if os.path.exists(os.path.join(output_dir, LABELS_FILE)):
        os.remove(os.path.join(output_dir, LABELS_FILE))
    return written
