"""The one place where pre-training and fine-tuning set up training.

Both need the same pieces: the optimizer with the warmup-then-decay
schedule (wrapped for loss scaling under mixed_float16), a
`loop.TrainingLoop` and its restore of the newest checkpoint, a distributed dataset
that skips the batches a resumed run already consumed, and the callbacks
that save checkpoints and report progress. Building them in one class keeps
resuming, divergence handling and the step arithmetic of gradient
accumulation identical for every task. `fine_tune` is that class on a
fine-tuning task's arrays, with the paper's schedule (Section 4 / Appendix
A.3): AdamW, warmup over the first `warmup_proportion` of the updates, then
linear decay.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from core.arguments import FieldError
from training import loop
from training.configs import OptimizationConfig, TrainingConfig, check_batch_split
from training.distribution import default_jit_compile
from training.optimization import create_optimizer

# (input context or None, global micro-batch size) -> batched, repeated dataset
DatasetBuilder = Callable[[tf.distribute.InputContext | None, int], tf.data.Dataset]


class TrainingRun:
    """A model, its optimizer and its checkpoints under `checkpoint_dir`, ready to train.

    `num_updates` and `num_warmup` count optimizer updates; the TrainingLoop
    counts micro-batches, `gradient_accumulation_steps` per update.
    `hidden_size` is the encoder's width: with `training.jit_compile` unset,
    it decides whether the step is compiled with XLA (`default_jit_compile`).
    Construction ends with the TrainingLoop's restore of the newest checkpoint in
    `checkpoint_dir`, so `restored_from` tells whether pre-trained weights
    should still be loaded.
    """

    def __init__(self, model: keras.Model, loss_fn: loop.LossFunction,
                 strategy: tf.distribute.Strategy, optimization: OptimizationConfig,
                 training: TrainingConfig, num_updates: int, num_warmup: int, checkpoint_dir: str,
                 *, hidden_size: int, max_to_keep: int | None = None):
        check_batch_split(training, optimization)
        self.training = training
        self.strategy = strategy
        self.accumulation = optimization.gradient_accumulation_steps
        self.num_updates = num_updates
        self.total_steps = num_updates * self.accumulation
        self.micro_batch = training.train_batch_size // self.accumulation
        self.jit_compile = training.jit_compile
        if self.jit_compile is None:
            self.jit_compile = default_jit_compile(strategy, training.dtype, hidden_size)
        logging.info("Training step compiled with XLA: %s", self.jit_compile)
        with strategy.scope():
            optimizer = create_optimizer(optimization.learning_rate, num_updates, num_warmup,
                                         optimization.optimizer,
                                         gradient_accumulation_steps=self.accumulation,
                                         adam_bias_correction=optimization.adam_bias_correction)
            if training.dtype == "mixed_float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            self.loop = loop.TrainingLoop(model, optimizer, strategy, loss_fn, checkpoint_dir,
                                        max_to_keep or training.keep_checkpoint_max,
                                        self.jit_compile, steps_per_update=self.accumulation)
            self.loop.restore_newest_checkpoint()
        self.optimizer = optimizer

    @property
    def restored_from(self) -> str | None:
        return self.loop.restored_from

    @property
    def step(self) -> int:
        """Micro-batches trained so far, restored ones included."""
        return self.loop.step

    @property
    def global_step(self) -> int:
        """Optimizer updates so far, as the runners number their steps."""
        return self.loop.step // self.accumulation

    def train(self, build_dataset: DatasetBuilder) -> None:
        """Trains to `num_updates`, continuing where a killed run stopped.

        Raises `loop.TrainingDiverged` when the loss or the gradients stop
        being finite; nothing after the last good checkpoint is saved.
        """
        if self.step >= self.total_steps:
            return
        save_every = self.training.save_checkpoints_steps * self.accumulation
        log_every = self.training.log_every * self.accumulation
        skip = self.step

        def build(context):
            return build_dataset(context, self.micro_batch).skip(skip)

        log_dir = (os.path.join(self.training.output_dir, "logs", "train")
                   if self.loop.chief else None)
        callbacks = [loop.CheckpointEvery(self.loop, save_every, self.total_steps),
                     loop.ProgressLogger(self.optimizer, self.total_steps, self.micro_batch,
                                         log_every, log_dir, first_step=self.step)]
        # Without a set loop length, each tf.function call ends exactly where a checkpoint
        # or progress line is due, sparing the per-call overhead of a step at a time.
        steps_per_loop = self.training.iterations_per_loop or int(np.gcd(save_every, log_every))
        self.loop.train(self.strategy.distribute_datasets_from_function(build),
                           self.total_steps, steps_per_loop, callbacks)

    def evaluate(self, dataset: tf.data.Dataset, metric_fn: loop.MetricFunction,
                 max_steps: int) -> dict[str, float]:
        """Weighted means of `metric_fn`'s sums over at most `max_steps` batches."""
        return self.loop.evaluate(dataset, metric_fn, max_steps)


def weights_checksum(model: keras.Model) -> float:
    """Sum of |w| over all weights: equal on every worker of a run in lockstep."""
    return float(sum(abs(variable.numpy()).sum() for variable in model.weights))


def fine_tune(model: keras.Model, strategy: tf.distribute.Strategy, arrays: dict[str, np.ndarray],
              loss_fn: loop.LossFunction, optimization: OptimizationConfig,
              training: TrainingConfig, output_dir: str, seed: int, *, hidden_size: int,
              checkpoint_name: str = "checkpoints") -> int:
    """Fine-tunes `model` on `arrays` for `optimization`'s epochs; returns the updates made.

    A run killed at any point and started again resumes from its newest
    checkpoint in `output_dir/checkpoint_name` and ends with the same
    weights. Raises `loop.TrainingDiverged` (a ValueError) when the loss or
    gradients stop being finite, so a sweep can skip that rate and a lone
    run exits with the step and checkpoint.

    Args:
      model: the task model, built in `strategy`'s scope.
      strategy: where it trains.
      arrays: the features as numpy arrays (`input_ids`, `input_mask`,
        `segment_ids` plus the labels `loss_fn` reads), one row per example.
      loss_fn: (features, outputs) -> {"loss": scalar, other scalars to log}.
      optimization: the rate, epochs and warmup of the paper's schedule.
      training: batch size, checkpoint and log intervals, dtype.
      output_dir: the run's own folder (a sweep run's): its checkpoints and
        TensorBoard's `logs/train`.
      seed: orders the data.
      hidden_size: the encoder's width, which picks XLA or not (`TrainingRun`).
      checkpoint_name: the checkpoints' folder under `output_dir`.

    Examples:

    >>> fine_tune(model, strategy, arrays, classification_loss, OptimizationConfig(),
    ...           TrainingConfig("out"), "out", seed=0, hidden_size=768)
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
