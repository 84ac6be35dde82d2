"""TensorBoard scalars of a training run: the runners' loop and `fit(..., log_dir=...)` alike.

Both write the loss and the learning rate every few steps under
`<log_dir>/train`, numbered by the run's step, so a resumed run continues
its curves where the killed one left them. `keras.callbacks.TensorBoard`
logs the learning rate once per epoch only, and counts batches from 0 again
in every `fit` call, so a resumed run would draw over its own curve.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np
import tensorflow as tf

from training.divergence import EveryFewSteps, StepGuard


def write_scalars(writer_or_dir, step: int, values: dict[str, float]) -> None:
    """Scalars to TensorBoard; `writer_or_dir` is a summary writer or a log folder."""
    writer = (tf.summary.create_file_writer(writer_or_dir)
              if isinstance(writer_or_dir, str) else writer_or_dir)
    with writer.as_default(step=step):
        for key, value in values.items():
            tf.summary.scalar(key, float(value))
    writer.flush()


def write_eval_scalars(output_dir: str, step: int, results: Mapping[str, object]) -> None:
    """An evaluation's numbers to TensorBoard's `output_dir/logs/eval`, beside `logs/train`.

    `step` is the run's last update, so the scores line up with the loss
    curve that led to them (0 for a model evaluated without training); what
    is not a number (a bool, a name) is left out. Call it from the chief alone.

    Args:
      output_dir: the run's folder.
      step: the update the scores belong to.
      results: the scores by name, as `eval_results.txt` holds them.

    Examples:

    >>> write_eval_scalars("out", 1200, {"eval_accuracy": 0.91, "eval_loss": 0.27})
    """
    numbers = {key: value for key, value in results.items()
               if isinstance(value, (int, float, np.number)) and not isinstance(value, bool)}
    write_scalars(os.path.join(output_dir, "logs", "eval"), step, numbers)


class LogScalars(EveryFewSteps):
    """`fit`'s loss, metrics and learning rate every `every` steps and at step `total`, under
    `log_dir/train`; each epoch's validation scores under `log_dir/validation`.

    The loss and metrics are those Keras reports after the step: means over
    the epoch so far. Steps are counted by the model's `StepGuard`, across
    resumed runs.
    """

    def __init__(self, log_dir: str | os.PathLike, guard: StepGuard, every: int, total: float):
        super().__init__(guard, every, total)
        log_dir = os.fspath(log_dir)
        self.train = tf.summary.create_file_writer(os.path.join(log_dir, "train"))
        self.validation = tf.summary.create_file_writer(os.path.join(log_dir, "validation"))

    def act(self, step: int, logs: dict) -> None:
        # A LossScaleOptimizer's learning_rate is its inner optimizer's.
        write_scalars(self.train, step, {**logs,
                                         "learning_rate": self.model.optimizer.learning_rate})

    def on_epoch_end(self, epoch, logs=None):
        scores = {key[len("val_"):]: value for key, value in (logs or {}).items()
                  if key.startswith("val_")}
        if scores:
            write_scalars(self.validation, self.step, scores)
