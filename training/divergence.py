"""Training stops at the first non-finite loss or gradient: one rule, one error, for every trainer.

A step whose loss or gradients hold NaN or infinity writes NaN into every
weight it updates, and Keras' `fit` carries on: it reports `loss: nan` and
leaves a model that predicts NaN. Both trainers stop instead, by the same
test (`finite_update`) and with the same error (`TrainingDiverged`, whose
`step` a learning-rate sweep lists as "diverged at step N"):

- the runners' loop (`training.loop`) stops after the call it happened in
  and saves nothing from then on, so its last checkpoint is the last good one;
- the task models' `fit` (and the feature-based tagger's) applies an
  update only while the loss and the gradients are finite, so a bad step
  leaves the weights (and the optimizer's moments) as the last good step
  left them, and `fit` raises `FitDiverged` naming it.

Every other stop is worded by one factory, `diverged`.

Per step this costs one global norm of the gradients (a single read of
each, against the optimizer's several passes over them) and, in the
callback that ends `fit`, one read of a scalar; no copy of the weights.
"""

from __future__ import annotations

import keras
import tensorflow as tf


class TrainingDiverged(ValueError):
    """Training stopped at a step whose loss, gradients or weights were not finite.

    Attributes:
      step: the step it stopped at, counted from 1 (the runners count
        optimizer updates, `fit` its batches).
      last_good_checkpoint: the newest checkpoint saved before it, or None.

    Args:
      step: the step it stopped at.
      message: what went wrong and what to do.
      last_good_checkpoint: the newest checkpoint saved before it, or None.

    Examples:

    >>> try:
    ...     run_task(classification.TASK, task, model_files, training, optimization)
    ... except TrainingDiverged as error:
    ...     print(error.step, error.last_good_checkpoint)
    """

    def __init__(self, step: int, message: str, last_good_checkpoint: str | None = None):
        self.step = step
        self.last_good_checkpoint = last_good_checkpoint
        super().__init__(message)


def diverged(step: int, what: str, last_good_checkpoint: str | None) -> TrainingDiverged:
    """The error for a run that diverged at `step` because of `what`, saying what a rerun
    resumes from: the one wording of every trainer but `fit`'s own step (`FitDiverged`).

    Args:
      step: the step (or optimizer update) it stopped at, counted from 1.
      what: what was not finite, e.g. "loss=nan".
      last_good_checkpoint: the newest checkpoint saved before it, or None.

    Examples:

    >>> raise diverged(12, "loss=nan", "out/ckpt-10")
    """
    kept = (f"the last good checkpoint, {last_good_checkpoint}, is kept and a rerun "
            "resumes from it" if last_good_checkpoint
            else "no checkpoint was written before it")
    return TrainingDiverged(step, f"training diverged at step {step}: {what}; {kept}; lower the "
                            "learning rate (or check the input data) and rerun",
                            last_good_checkpoint)


class FitDiverged(TrainingDiverged):
    """The loss or the gradients of a step in `fit` were not finite; the step was not applied.

    Args:
      step: the step, counting the `fit` call's batches from 1.
      loss: that step's loss (NaN or infinite, or finite with bad gradients).
      last_good_checkpoint: with `resume_dir`, the newest checkpoint before it.

    Examples:

    >>> try:
    ...     model.fit(texts, labels)
    ... except FitDiverged as error:
    ...     print(error.step, error.loss)
    """

    def __init__(self, step: int, loss: float, last_good_checkpoint: str | None = None):
        self.loss = loss
        super().__init__(
            step, f"fit stopped at step {step} (counting its batches from 1): the loss or the "
            f"global norm of its gradients is not finite (loss={loss:.6g}); that step's update "
            "was not applied, so the model keeps the weights from before it. Lower "
            "learning_rate, or check the inputs, labels and sample weights of that batch",
            last_good_checkpoint)


def finite_update(loss: tf.Tensor, gradients: list, loss_scaling: bool = False
                  ) -> tuple[tf.Tensor, tf.Tensor]:
    """(whether a step's update may be applied, the global norm of its gradients).

    An update is finite when its loss is and the global norm of its
    gradients is. The norm rather than each gradient: an optimizer clipping
    by it (the original's, at 1.0) turns finite gradients whose norm
    overflows into NaN weights. Under loss scaling the norm is not tested
    (and is returned as 0): float16 gradients overflow now and then,
    harmlessly, and the optimizer skips those steps itself.
    """
    finite = tf.math.is_finite(tf.cast(loss, tf.float32))
    norm = tf.constant(0.0)
    if not loss_scaling:
        norm = tf.linalg.global_norm([g for g in gradients if g is not None])
        finite = tf.logical_and(finite, tf.math.is_finite(norm))
    return finite, norm


def all_finite(values) -> tf.Tensor:
    """Whether every element of every tensor (or variable) in `values` is finite."""
    return tf.reduce_all([tf.reduce_all(tf.math.is_finite(value)) for value in values])


class StepGuard:
    """A model's record of its steps in the current `fit`: how many, and the first bad one.

    Kept out of the model's tracked state (a plain object, not a layer), so
    neither checkpoints nor `.keras` files see it; one per model, since the
    compiled training function captures its variables. Outside `fit`
    (`train_on_batch`, which shares that function) nothing is recorded: a
    non-finite step is skipped and its loss returned as it is.
    """

    def __init__(self):
        aggregation = tf.VariableAggregation.ONLY_FIRST_REPLICA  # every replica agrees

        def variable(dtype):
            return tf.Variable(0, dtype=dtype, trainable=False, aggregation=aggregation)

        self.in_fit, self.steps, self.bad_step = (variable(tf.int64) for _ in range(3))
        self.bad_loss = variable(tf.float32)

    def start(self, steps_done: int = 0) -> "StopOnDivergence":
        """Resets the record for a new `fit` and gives the callback that ends it.

        `steps_done` counts the steps a resumed `fit` made before, so that its
        steps are numbered as an uninterrupted one's.
        """
        self._reset(in_fit=1, steps=steps_done)
        return StopOnDivergence(self)

    @property
    def diverged(self) -> bool:
        """Whether the current `fit` has met a step it refused."""
        return bool(self.bad_step.numpy())

    def finish(self, last_good_checkpoint: str | None = None) -> FitDiverged | None:
        """Ends the record of a `fit`: the error for its bad step, if it had one."""
        step, loss = int(self.bad_step.numpy()), float(self.bad_loss.numpy())
        self._reset(in_fit=0)
        return FitDiverged(step, loss, last_good_checkpoint) if step else None

    def _reset(self, in_fit: int, steps: int = 0) -> None:
        for variable in (self.bad_step, self.bad_loss):
            variable.assign(tf.zeros_like(variable))
        self.steps.assign(steps)
        self.in_fit.assign(in_fit)


class StopOnDivergence(keras.callbacks.Callback):
    """Ends `fit` after the step its model's guard refused."""

    def __init__(self, guard: StepGuard):
        super().__init__()
        self.guard = guard

    def on_train_batch_end(self, batch, logs=None):
        if self.guard.diverged:
            self.model.stop_training = True


class EveryFewSteps(keras.callbacks.Callback):
    """A callback that acts every `every` steps of a `fit` and at its last step, `total`.

    Steps are the guard's count, which a resumed `fit` continues; nothing is
    done after a step the guard refused. Subclasses give `act(step, logs)`.
    """

    def __init__(self, guard: StepGuard, every: int, total: float):
        super().__init__()
        self.guard, self.every, self.total = guard, every, total
        self.last = None  # the step last acted at

    @property
    def step(self) -> int:
        return int(self.guard.steps.numpy())

    def on_train_begin(self, logs=None):
        if self.last is None:
            self.last = self.step

    def on_train_batch_end(self, batch, logs=None):
        step = self.step
        if not self.guard.diverged and (step - self.last >= self.every or step >= self.total):
            self.last = step
            self.act(step, logs or {})

    def act(self, step: int, logs: dict) -> None:
        raise NotImplementedError


class GuardedSteps:
    """A Keras model mixin: once it has a `StepGuard`, it trains on `guarded_train_step`.

    Put it before `keras.Model` among the bases and call
    `_add_step_guard()` when the model is compiled; a model compiled
    without one trains on Keras' own step. The `fit` that runs the steps
    starts and finishes the guard's record (`StepGuard.start`, `finish`).
    """

    _step_guard: StepGuard | None = None

    def _add_step_guard(self) -> None:
        if self._step_guard is None:  # one per model: the compiled step captures its variables
            with self.distribute_strategy.scope():
                self._step_guard = StepGuard()

    def train_step(self, data):
        if self._step_guard is None:
            return super().train_step(data)
        return guarded_train_step(self, data, self._step_guard)


def guarded_train_step(model: keras.Model, data, guard: StepGuard) -> dict:
    """Keras' training step, with the update applied only when it is finite.

    The loss and metrics are computed and logged as Keras' own step does
    (through the model's public `compute_loss` and `compute_metrics`); the
    update waits for the first step whose loss or gradients are not finite,
    and for every step after it, so that the weights `fit` leaves are those
    from before it.
    """
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    optimizer = model.optimizer
    with tf.GradientTape() as tape:
        y_pred = model(x, training=True)
        loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight,
                                  training=True)
        rows = tf.shape(next(part for part in tf.nest.flatten(x) if part is not None))[0]
        # `compute_loss` divides by the replicas (gradients are summed); the log shows the mean.
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        _loss_metric(model).update_state(loss * replicas, sample_weight=rows)
        scaled = optimizer.scale_loss(loss)
    variables = model.trainable_weights
    gradients = tape.gradient(scaled, variables)
    finite, _ = finite_update(loss, gradients,
                              isinstance(optimizer, keras.optimizers.LossScaleOptimizer))
    finite = _agreed(finite)
    clean = tf.equal(guard.bad_step, 0)  # no bad step yet in this fit
    _apply_if(tf.logical_and(finite, clean), optimizer, gradients, variables)
    step = guard.steps.assign_add(1)
    first_bad = tf.logical_and(tf.logical_and(tf.logical_not(finite), clean),
                               tf.equal(guard.in_fit, 1))
    guard.bad_step.assign(tf.where(first_bad, step, guard.bad_step))
    guard.bad_loss.assign(tf.where(first_bad, tf.cast(loss * replicas, tf.float32),
                                   guard.bad_loss))
    return model.compute_metrics(x, y, y_pred, sample_weight=sample_weight)


def _loss_metric(model: keras.Model) -> keras.metrics.Metric:
    """The metric `fit` logs as `loss` (Keras' first metric once compiled)."""
    return next(metric for metric in model.metrics if metric.name == "loss")


def _agreed(finite: tf.Tensor) -> tf.Tensor:
    """True on every replica only if it is on all: they must apply (or skip) together."""
    if tf.distribute.get_strategy().num_replicas_in_sync == 1:
        return finite
    replica = tf.distribute.get_replica_context()
    bad = replica.all_reduce(tf.distribute.ReduceOp.SUM, tf.cast(tf.logical_not(finite), tf.int32))
    return tf.equal(bad, 0)


def _apply_if(good: tf.Tensor, optimizer, gradients: list, variables: list) -> None:
    """`optimizer.apply_gradients` when `good`, nothing otherwise.

    Under several replicas the condition is taken in the cross-replica
    context, since a replica may not branch around the optimizer's own
    cross-replica calls (as Keras' LossScaleOptimizer does).
    """
    def apply(gradients):
        optimizer.apply_gradients(zip(gradients, variables))

    if tf.distribute.get_strategy().num_replicas_in_sync == 1:
        tf.cond(good, lambda: apply(gradients), lambda: None)
        return

    def cross_replica(distribution, good, gradients):
        good = distribution.experimental_local_results(good)[0]
        tf.cond(good, lambda: distribution.extended.call_for_each_replica(
            apply, args=(gradients,)), lambda: None)

    tf.distribute.get_replica_context().merge_call(cross_replica, args=(good, gradients))
