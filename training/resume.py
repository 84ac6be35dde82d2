"""A `fit` that survives a kill: its checkpoints in a folder, and the run continued from them.

`fit(..., resume_dir=FOLDER)` saves every `save_freq` steps, at the end of
each epoch and at the end everything the rest of the run depends on: the
weights, the optimizer (its moments and update count, which drives the
learning-rate schedule), the dropout layers' random state, the number of
steps done and the seed of the example order. Run again with the same
call, it restores the newest checkpoint and continues at the batch after
it (`training.example_order` makes every batch a function of the seed and
its position), so it ends with the same weights, bit for bit, as a `fit`
that never stopped. The runners' loop (`training.loop`) resumes the same way.

Why not `keras.callbacks.BackupAndRestore`: it restores the weights, the
optimizer and the epoch, but not the dropout layers' random state nor the
position in a shuffled dataset, and a run it resumes inside an epoch
trains on that epoch's first batches again.

What is saved, restored and refused is the runners' `TrainingState`
(`training.state`), with the order seed added. The folder is locked and
stamped with the call's plan (`core.run_folder`): a second process is
refused, and so is a call that would continue another call's run (other
examples, batch size, epochs or schedule).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import keras
import tensorflow as tf
from absl import logging

from core import run_folder
from training.divergence import EveryFewSteps, StepGuard
from training.state import TrainingState


class ResumeFolder:
    """The checkpoints of one `fit` run in `folder`, locked for this process until `release`.

    Args:
      folder: where the checkpoints go (created if missing).
      model: a compiled, built model; its optimizer is built here.
      task: what runs, for the folder's stamp (e.g. "fit:BertClassifier").
      plan: the call's settings that fix the run (counts, sizes, a digest of
        the examples); a folder stamped with other values is refused.
    """

    def __init__(self, folder: str | os.PathLike, model: keras.Model, task: str,
                 plan: Mapping[str, Any]):
        self.folder = os.path.abspath(os.fspath(folder))
        os.makedirs(self.folder, exist_ok=True)
        try:
            run_folder.claim(self.folder, task, plan)
        except BaseException:  # refused: another run's folder
            run_folder.release(self.folder)
            raise
        optimizer = model.optimizer
        with model.distribute_strategy.scope():
            optimizer.build(model.trainable_variables)
        self.seed = tf.Variable(0, dtype=tf.int64, trainable=False, name="order_seed")
        self.state = TrainingState(self.folder, model, optimizer,
                                   extra={"order_seed": self.seed}, argument="resume_dir")

    @property
    def newest(self) -> str | None:
        return self.state.newest

    def release(self) -> None:
        """Unlocks the folder: a `fit` holds it only while it runs."""
        run_folder.release(self.folder)

    def restore(self, seed: int | None) -> tuple[int, int | None]:
        """(steps done, order seed) from the newest checkpoint; (0, `seed`) when there is none.

        `seed` is a new run's order seed, which the checkpoints then keep.
        """
        try:
            newest = self.state.restore()
        except BaseException:
            self.release()
            raise
        if newest is None:
            self.seed.assign(seed or 0)
            return 0, seed
        logging.info("fit resumes from %s", newest)
        return int(self.state.step.numpy()), int(self.seed.numpy())

    def save(self, step: int) -> None:
        """Saves the state after `step` steps; refuses (TrainingDiverged) a non-finite one."""
        self.state.save(step)


class SaveCheckpoints(EveryFewSteps):
    """Saves `folder` every `every` steps, at each epoch's end and at step `total`.

    Nothing is saved after a step the guard refused: the weights then are
    those from before it, and a checkpoint claiming that step done would let
    a resumed run pass over the bad batch.
    """

    def __init__(self, folder: ResumeFolder, guard: StepGuard, every: int, total: int):
        super().__init__(guard, every, total)
        self.folder = folder

    def act(self, step: int, logs: dict) -> None:
        self.folder.save(step)

    def on_epoch_end(self, epoch, logs=None):
        step = self.step
        if step != self.last and not self.guard.diverged:
            self.last = step
            self.act(step, logs or {})
