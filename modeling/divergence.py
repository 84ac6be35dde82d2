"""`fit` stops at the first non-finite loss or gradient, keeping the weights from before it.

A step whose loss or gradients hold NaN or infinity writes NaN into every
weight it updates, and Keras' `fit` carries on: it reports `loss: nan` and
leaves a model that predicts NaN. The runners stop such a run in their own
loop (`training.loop`); the task models do the same in `fit`: their
training step applies an update only while the loss and every gradient are
finite, so a bad step leaves the weights (and the optimizer's moments) as
the last good step left them, and `fit` raises `FitDiverged` naming it.

Per step this costs one finiteness test of the gradients (a single read of
each, against the optimizer's several passes over them) and, in the
callback that ends `fit`, one read of a scalar; no copy of the weights.
"""

from __future__ import annotations

import keras
import tensorflow as tf


class FitDiverged(ValueError):
    """The loss or the gradients of a step in `fit` were not finite; the step was not applied.

    Args:
      step: the step, counting the `fit` call's batches from 1.
      loss: that step's loss (NaN or infinite, or finite with bad gradients).

    Examples:

    >>> try:
    ...     model.fit(texts, labels)
    ... except FitDiverged as error:
    ...     print(error.step, error.loss)
    """

    def __init__(self, step: int, loss: float):
        self.step, self.loss = step, loss
        super().__init__(
            f"fit stopped at step {step} (counting this call's batches from 1): the loss or "
            f"its gradients are not finite (loss={loss:.6g}); that step's update was not "
            "applied, so the model keeps "
            "the weights from before it. Lower learning_rate, or check the inputs, labels and "
            "sample weights of that batch")


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

    def start(self) -> "StopOnDivergence":
        """Resets the record for a new `fit` and gives the callback that ends it."""
        self._reset(in_fit=1)
        return StopOnDivergence(self)

    def finish(self) -> FitDiverged | None:
        """Ends the record of a `fit`: the error for its bad step, if it had one."""
        step, loss = int(self.bad_step.numpy()), float(self.bad_loss.numpy())
        self._reset(in_fit=0)
        return FitDiverged(step, loss) if step else None

    def _reset(self, in_fit: int) -> None:
        for variable in (self.steps, self.bad_step, self.bad_loss):
            variable.assign(tf.zeros_like(variable))
        self.in_fit.assign(in_fit)


class StopOnDivergence(keras.callbacks.Callback):
    """Ends `fit` after the step its model's guard refused."""

    def __init__(self, guard: StepGuard):
        super().__init__()
        self.guard = guard

    def on_train_batch_end(self, batch, logs=None):
        if int(self.guard.bad_step.numpy()):
            self.model.stop_training = True


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
    finite = tf.math.is_finite(tf.cast(loss, tf.float32))
    if not isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        # Loss scaling's overflowing steps are its own business: it skips them itself.
        finite = tf.logical_and(finite, _all_finite(gradients))
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


def _all_finite(gradients) -> tf.Tensor:
    values = [gradient.values if isinstance(gradient, tf.IndexedSlices) else gradient
              for gradient in gradients if gradient is not None]
    return tf.reduce_all([tf.reduce_all(tf.math.is_finite(value)) for value in values])


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
