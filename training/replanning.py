"""A schedule and an optimizer that a new `fit` re-plans in place instead of rebuilding.

The library's `fit` plans the paper's warm-up and decay over the steps it is
about to run, so each call needs a schedule of its own length and an
optimizer as fresh as a new one. Building a new optimizer throws away the
traced training step (its variables are captured), and tracing it again is
most of what a `fit` on a small model costs. Here the schedule's step
counts live in variables the step reads, and `OptimizerRestart` puts the
optimizer's own variables back to their values at build: the same numbers
as a new optimizer, under the step already traced.
"""

from __future__ import annotations

import keras
from keras import ops

from training.optimization import WarmupLinearDecay


@keras.saving.register_keras_serializable(package="bert")
class ReplannableDecay(WarmupLinearDecay):
    """`WarmupLinearDecay` whose step counts `replan` changes under a traced step.

    Args:
      init_lr, num_train_steps, num_warmup_steps, end_lr: as `WarmupLinearDecay`.

    Examples:

    >>> schedule = ReplannableDecay(1e-4, num_train_steps=10, num_warmup_steps=1)
    >>> schedule.replan(num_train_steps=100, num_warmup_steps=10)
    """

    def __init__(self, init_lr: float, num_train_steps: int, num_warmup_steps: int = 0,
                 end_lr: float = 0.0):
        super().__init__(init_lr, num_train_steps, num_warmup_steps, end_lr)
        self.counts = keras.Variable([float(num_train_steps), float(num_warmup_steps)],
                                     trainable=False, dtype="float32", name="schedule_steps")

    def replan(self, num_train_steps: int, num_warmup_steps: int) -> None:
        """The schedule over `num_train_steps` updates, the first `num_warmup_steps` warming up."""
        WarmupLinearDecay(self.init_lr, num_train_steps, num_warmup_steps)  # the same checks
        self.num_train_steps, self.num_warmup_steps = int(num_train_steps), int(num_warmup_steps)
        self.counts.assign([float(num_train_steps), float(num_warmup_steps)])

    def __call__(self, step):
        # The parent's arithmetic on the counts read from the variable, so a step traced
        # under one plan follows the next; with no warm-up the `where` keeps `decayed`.
        step = ops.cast(step, "float32")
        total, warmup_steps = self.counts[0], self.counts[1]
        done = ops.minimum(step, total) / total
        decayed = (self.init_lr - self.end_lr) * (1.0 - done) + self.end_lr
        warmup = self.init_lr * step / ops.maximum(warmup_steps, 1.0)
        return ops.where(step < warmup_steps, warmup, decayed)


class OptimizerRestart:
    """Puts a just-built optimizer's variables back to their values at build, on call.

    Keras makes every slot (moments, accumulators) zero; the scalars
    (`iterations`, a loss scale and its counter) are remembered as built.
    Taken right after `optimizer.build`, before any update.

    Args:
      optimizer: a built Keras optimizer, not yet used.
    """

    def __init__(self, optimizer: keras.optimizers.Optimizer):
        self.optimizer = optimizer
        self.scalars = [(variable, variable.numpy()) for variable in optimizer.variables
                        if len(variable.shape) == 0]

    def __call__(self) -> None:
        scalars = {id(variable) for variable, _ in self.scalars}
        for variable in self.optimizer.variables:
            if id(variable) not in scalars:
                variable.assign(ops.zeros_like(variable))
        for variable, value in self.scalars:
            variable.assign(value)
