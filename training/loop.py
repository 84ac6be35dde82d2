"""A distributed training loop with checkpoints that survive a kill, progress lines, TensorBoard.

Why not `model.fit`: under MultiWorkerMirroredStrategy, Keras 3's `fit`
fails on per-replica values (keras-team/keras#20585), and the paper's
pre-training is a multi-worker job. This loop is `strategy.run` over a
`tf.function` that runs `steps_per_loop` steps per call, the same on one
device, several GPUs, several workers and TPUs.

Resuming: the model's weights, the optimizer (slots and update counter,
which drives the learning-rate schedule) and a step counter live in one
`tf.train.CheckpointManager`. On start the newest checkpoint is restored;
the caller skips the batches already consumed, so a seeded input pipeline
continues at the batch where the run stopped. A checkpoint is complete or
absent: TensorFlow writes the `checkpoint` index file last.

Progress is one line per `log_every` steps with steps/s, examples/s, the
losses and the ETA; the same scalars, plus the learning rate, go to
TensorBoard under `<output_dir>/logs/train`.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import time
from typing import Callable

import keras
import tensorflow as tf

from modeling.checkpoints import training_checkpoint

# features, outputs -> {"loss": scalar, other scalars to log}
LossFunction = Callable[[dict, object], dict]
# features, outputs -> {metric: (weighted sum, total weight)}
MetricFunction = Callable[[dict, object], dict]


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes outputs: always, except on non-chief workers."""
    resolver = getattr(strategy, "cluster_resolver", None)
    task_type = getattr(resolver, "task_type", None)
    if not task_type:
        return True
    has_chief = "chief" in resolver.cluster_spec().jobs
    return task_type == "chief" or (task_type == "worker" and resolver.task_id == 0
                                    and not has_chief)


class Trainer:
    """Trains `model` with `optimizer` under `strategy`; owns the checkpoints in `checkpoint_dir`.

    Build the model and optimizer inside `strategy.scope()` and construct the
    Trainer there too. `step` counts batches (micro-batches when the
    optimizer accumulates gradients).
    """

    def __init__(self, model: keras.Model, optimizer: keras.optimizers.Optimizer,
                 strategy: tf.distribute.Strategy, loss_fn: LossFunction, checkpoint_dir: str,
                 max_to_keep: int = 5, jit_compile: bool = False):
        self.model = model
        self.optimizer = optimizer
        self.strategy = strategy
        self.loss_fn = loss_fn
        self.jit_compile = jit_compile
        self.chief = is_chief(strategy)
        if not self.chief:  # saving is collective; other workers write to scratch space
            task_id = int(strategy.cluster_resolver.task_id)
            checkpoint_dir = os.path.join(checkpoint_dir, f".worker-{task_id}")
        self.checkpoint_dir = checkpoint_dir
        optimizer.build(model.trainable_variables)
        self.step_counter = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.checkpoint = training_checkpoint(model, optimizer=optimizer, step=self.step_counter)
        self.manager = tf.train.CheckpointManager(self.checkpoint, checkpoint_dir,
                                                  max_to_keep=max_to_keep)
        self.restored_from = self.manager.latest_checkpoint
        if self.restored_from:
            try:
                self.checkpoint.restore(self.restored_from).assert_existing_objects_matched()
            except (AssertionError, ValueError, tf.errors.OpError) as error:
                raise ValueError(
                    f"{checkpoint_dir} holds {self.restored_from}, which does not fit this "
                    f"model and optimizer ({str(error).splitlines()[0]}); pass a new "
                    "--output_dir, or delete that folder to start over") from None
        self._train_function = None

    @property
    def step(self) -> int:
        return int(self.step_counter.numpy())

    def save(self) -> None:
        self.manager.save(checkpoint_number=self.step)
        if not self.chief:
            shutil.rmtree(self.checkpoint_dir, ignore_errors=True)

    def _replica_step(self, features):
        replicas = self.strategy.num_replicas_in_sync
        with tf.GradientTape() as tape:
            outputs = self.model(features, training=True)
            logs = dict(self.loss_fn(features, outputs))
            loss = logs["loss"]
            if self.model.losses:
                loss = loss + tf.add_n(self.model.losses)
                logs["loss"] = loss
            # Gradients are summed over replicas, so each one contributes its share.
            scaled = self.optimizer.scale_loss(loss / replicas)
        variables = self.model.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(scaled, variables), variables))
        return logs

    def _build_train_function(self):
        step = self._replica_step
        if self.jit_compile:
            step = tf.function(step, jit_compile=True)

        @tf.function
        def train_steps(iterator, steps):
            logs = self.strategy.run(step, args=(next(iterator),))
            for _ in tf.range(steps - 1):
                logs = self.strategy.run(step, args=(next(iterator),))
            self.step_counter.assign_add(tf.cast(steps, tf.int64))
            return {key: self.strategy.reduce("MEAN", value, axis=None)
                    for key, value in logs.items()}

        return train_steps

    def train(self, dataset, total_steps: int, steps_per_loop: int = 1,
              callbacks: list[Callable[[int, dict], None]] = ()) -> None:
        """Runs until `step == total_steps`, calling each callback(step, logs) every loop."""
        if self._train_function is None:
            self._train_function = self._build_train_function()
        iterator = iter(dataset)
        while self.step < total_steps:
            steps = min(steps_per_loop, total_steps - self.step)
            logs = self._train_function(iterator, tf.constant(steps))
            logs = {key: float(value) for key, value in logs.items()}
            for callback in callbacks:
                callback(self.step, logs)

    def evaluate(self, dataset, metric_fn: MetricFunction, max_steps: int) -> dict[str, float]:
        """Streaming means of `metric_fn`'s sums over at most `max_steps` batches."""

        @tf.function
        def eval_step(features):
            def replica(features):
                return metric_fn(features, self.model(features, training=False))
            sums = self.strategy.run(replica, args=(features,))
            return {name: (self.strategy.reduce("SUM", total, axis=None),
                           self.strategy.reduce("SUM", weight, axis=None))
                    for name, (total, weight) in sums.items()}

        totals: dict[str, list[float]] = {}
        for index, features in enumerate(dataset):
            if index >= max_steps:
                break
            for name, (total, weight) in eval_step(features).items():
                accumulated = totals.setdefault(name, [0.0, 0.0])
                accumulated[0] += float(total)
                accumulated[1] += float(weight)
        if not totals:
            raise ValueError("the evaluation data holds no complete batch")
        return {name: total / max(weight, 1e-12) for name, (total, weight) in totals.items()}


class CheckpointEvery:
    """Callback: saves every `every` steps and when training reaches `total_steps`."""

    def __init__(self, trainer: Trainer, every: int, total_steps: int):
        self.trainer = trainer
        self.every = every
        self.total_steps = total_steps
        self._last_saved = trainer.step

    def __call__(self, step: int, logs: dict) -> None:
        if step - self._last_saved >= self.every or step >= self.total_steps:
            self.trainer.save()
            self._last_saved = step


class ProgressLogger:
    """Callback: a progress line and TensorBoard scalars every `log_every` steps."""

    def __init__(self, optimizer, total_steps: int, examples_per_step: int, log_every: int,
                 log_dir: str | None, first_step: int = 0):
        self.optimizer = optimizer
        self.total_steps = total_steps
        self.examples_per_step = examples_per_step
        self.log_every = max(1, log_every)
        self.writer = tf.summary.create_file_writer(log_dir) if log_dir else None
        self._window = (time.monotonic(), first_step)
        self._last_logged = first_step

    def __call__(self, step: int, logs: dict) -> None:
        if step - self._last_logged < self.log_every and step < self.total_steps:
            return
        self._last_logged = step
        now = time.monotonic()
        started, first = self._window
        steps_per_second = (step - first) / max(now - started, 1e-9)
        self._window = (now, step)
        remaining = (self.total_steps - step) / steps_per_second if steps_per_second else math.inf
        values = " ".join(f"{key}={value:.4g}" for key, value in sorted(logs.items()))
        print(f"step {step}/{self.total_steps}  {steps_per_second:.2f} steps/s  "
              f"{steps_per_second * self.examples_per_step:.1f} examples/s  {values}  "
              f"ETA {_duration(remaining)}", file=sys.stderr, flush=True)
        if self.writer is not None:
            scalars = {**logs, "learning_rate": learning_rate(self.optimizer),
                       "examples_per_second": steps_per_second * self.examples_per_step}
            write_scalars(self.writer, step, scalars)


def write_scalars(writer_or_dir, step: int, values: dict[str, float]) -> None:
    """Scalars to TensorBoard; `writer_or_dir` is a summary writer or a log folder."""
    writer = (tf.summary.create_file_writer(writer_or_dir)
              if isinstance(writer_or_dir, str) else writer_or_dir)
    with writer.as_default(step=step):
        for key, value in values.items():
            tf.summary.scalar(key, float(value))
    writer.flush()


def learning_rate(optimizer) -> float:
    """The rate the optimizer's next update will use (unwrapping loss scaling)."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    return float(inner.learning_rate)


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}"
