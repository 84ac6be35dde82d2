"""A distributed training loop with checkpoints that survive a kill, progress lines, TensorBoard.

Why not `model.fit`: under MultiWorkerMirroredStrategy, Keras 3's `fit`
fails on per-replica values (keras-team/keras#20585), and the paper's
pre-training is a multi-worker job. This loop is `strategy.run` over a
`tf.function` that runs `steps_per_loop` steps per call, the same on one
device, several GPUs, several workers and TPUs.

Resuming: the model's weights, the optimizer (slots and update counter,
which drives the learning-rate schedule), a step counter and the dropout
layers' random state are the run's `training.state.TrainingState`, the
same as `fit`'s. The caller restores the newest checkpoint
(`TrainingLoop.restore_newest_checkpoint`, before training or saving) and skips
the batches already consumed, so a seeded input pipeline continues at the
batch where the run stopped and ends with the same weights, bit for bit,
as one that never stopped.

A non-finite loss or gradient norm stops training with `TrainingDiverged`
at the end of the `tf.function` call it happened in, before anything is
saved: otherwise the run would go on to write NaN checkpoints and rotate
every good one out. Float16 loss scaling's overflow steps are not
divergence: the optimizer skips them and lowers the scale.

Progress is one line per `log_every` steps with steps/s, examples/s, the
losses and the ETA; the same scalars, plus the learning rate, go to
TensorBoard under `<output_dir>/logs/train`.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Callable

import keras
import tensorflow as tf

from core import faults
from core.arguments import check_integer
# TrainingDiverged: what `TrainingLoop.train` and `.save` raise, caught as loop.TrainingDiverged.
from training.divergence import TrainingDiverged, all_finite, diverged, finite_update  # noqa: F401
from training.state import TrainingState
from training.training_logs import write_scalars

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


class TrainingLoop:
    """Trains `model` with `optimizer` under `strategy`; owns the checkpoints in `checkpoint_dir`.

    Build the model and optimizer inside `strategy.scope()` and construct the
    TrainingLoop there too, then call `restore_newest_checkpoint()`: construction
    reads no checkpoint, and a TrainingLoop refuses to train or save before that
    call, so no caller can start over in a folder holding an earlier run and
    rotate its checkpoints out. `step` counts batches: micro-batches when the
    optimizer accumulates gradients, `steps_per_update` of them per update
    (its `gradient_accumulation_steps`), which divergence reports convert
    to the update the runners number.
    """

    def __init__(self, model: keras.Model, optimizer: keras.optimizers.Optimizer,
                 strategy: tf.distribute.Strategy, loss_fn: LossFunction, checkpoint_dir: str,
                 max_to_keep: int = 5, jit_compile: bool = False, steps_per_update: int = 1):
        check_integer("steps_per_update", steps_per_update)
        self.model = model
        self.optimizer = optimizer
        self.strategy = strategy
        self.loss_fn = loss_fn
        self.jit_compile = jit_compile
        self.chief = is_chief(strategy)
        optimizer.build(model.trainable_variables)
        self._loss_scaling = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
        # Saving is collective; workers other than the chief write to scratch space.
        self.state = TrainingState(
            checkpoint_dir, model, optimizer, max_to_keep=max_to_keep,
            steps_per_update=steps_per_update,
            worker=None if self.chief else int(strategy.cluster_resolver.task_id))
        self.step_counter = self.state.step
        self._steps_per_update = steps_per_update
        self._restore_step_taken = False
        self._restored_from: str | None = None
        self._train_function = None

    def restore_newest_checkpoint(self) -> str | None:
        """Restores the newest checkpoint in `checkpoint_dir` into the model, the optimizer,
        the step and the dropout state; returns its path, or None when there is none yet.

        Raises ValueError naming the checkpoint when it is damaged or does not
        fit this model and optimizer. Call it once, before `train` or `save`.
        """
        if self._restore_step_taken:
            raise RuntimeError("restore_newest_checkpoint was already called for this "
                               f"TrainingLoop (it restored {self._restored_from})")
        newest = self.state.restore()
        self._restore_step_taken = True
        self._restored_from = newest
        return newest

    @property
    def restored_from(self) -> str | None:
        """The checkpoint `restore_newest_checkpoint` restored; None for a fresh run."""
        self._require_restore_step("restored_from")
        return self._restored_from

    def _require_restore_step(self, what: str) -> None:
        if not self._restore_step_taken:
            raise RuntimeError(f"TrainingLoop.{what} was used before "
                               "restore_newest_checkpoint(): call it first, so that a run in "
                               "a folder holding checkpoints "
                               "continues from them instead of overwriting them")

    @property
    def step(self) -> int:
        return int(self.step_counter.numpy())

    def save(self) -> None:
        """Saves a checkpoint, unless a value in it is not finite (then raises TrainingDiverged).

        Checked here as well as in the training step because optimizer slots
        can overflow while the loss and the weights stay finite.
        """
        self._require_restore_step("save")
        self.state.save(self.step)

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
        gradients = tape.gradient(scaled, variables)
        # The norm is summed over replicas below: only its finiteness is reported.
        finite, norm = finite_update(loss, gradients, self._loss_scaling)
        self.optimizer.apply_gradients(zip(gradients, variables))
        return logs, tf.cast(tf.logical_not(finite), tf.float32), norm

    def _build_train_function(self):
        step = self._replica_step
        if self.jit_compile:
            step = tf.function(step, jit_compile=True)

        def run_step(iterator):
            logs, bad, norm = self.strategy.run(step, args=(next(iterator),))
            # Every replica must agree on stopping, or the others wait in collectives.
            return (logs, self.strategy.reduce("SUM", bad, axis=None) > 0,
                    self.strategy.reduce("SUM", norm, axis=None))

        @tf.function
        def train_steps(iterator, steps):
            """Runs up to `steps` steps; stops after the first one with a non-finite value."""
            logs, diverged, norm = run_step(iterator)
            done = tf.constant(1)
            for _ in tf.range(steps - 1):
                if diverged:
                    break
                logs, diverged, norm = run_step(iterator)
                done += 1
            self.step_counter.assign_add(tf.cast(done, tf.int64))
            logs = {key: self.strategy.reduce("MEAN", value, axis=None)
                    for key, value in logs.items()}
            return logs, diverged, norm, all_finite(self.model.trainable_variables)

        return train_steps

    def train(self, dataset, total_steps: int, steps_per_loop: int = 1,
              callbacks: list[Callable[[int, dict], None]] = ()) -> None:
        """Runs until `step == total_steps`, calling each callback(step, logs) every loop."""
        self._require_restore_step("train")
        if self._train_function is None:
            self._train_function = self._build_train_function()
        iterator = iter(dataset)
        while self.step < total_steps:
            faults.raise_pending_signal()
            steps = min(steps_per_loop, total_steps - self.step)
            logs, stopped, norm, weights_finite = self._train_function(iterator,
                                                                       tf.constant(steps))
            logs = {key: float(value) for key, value in logs.items()}
            if bool(stopped) or not bool(weights_finite):
                what = f"loss={logs['loss']:.6g}"
                if not bool(stopped):
                    what += ", but the update made the weights non-finite"
                elif not math.isfinite(float(norm)):
                    what += ", non-finite gradients"
                raise diverged(self._update(self.step), what, self.state.newest)
            for callback in callbacks:
                callback(self.step, logs)

    def _update(self, step: int) -> int:
        """The optimizer update a batch count falls in, as the runners number their steps."""
        return -(-step // self._steps_per_update)

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
            faults.raise_pending_signal()
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

    def __init__(self, training_loop: TrainingLoop, every: int, total_steps: int):
        self.training_loop = training_loop
        self.every = every
        self.total_steps = total_steps
        self._last_saved = training_loop.step

    def __call__(self, step: int, logs: dict) -> None:
        if step - self._last_saved >= self.every or step >= self.total_steps:
            self.training_loop.save()
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
            # A LossScaleOptimizer's learning_rate is its inner optimizer's.
            scalars = {**logs, "learning_rate": float(self.optimizer.learning_rate),
                       "examples_per_second": steps_per_second * self.examples_per_step}
            write_scalars(self.writer, step, scalars)


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}"
