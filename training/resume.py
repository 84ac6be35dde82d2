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

A checkpoint is complete or absent: TensorFlow writes the `checkpoint`
index file last, so a kill during a save leaves the previous checkpoint the
newest, and what the cut save left is removed at the next start. The folder
is locked and stamped with the call's plan (`core.run_folder`): a second
process is refused, and so is a call that would continue another call's
run (other examples, batch size, epochs or schedule).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from typing import Any

import keras
import tensorflow as tf
from absl import logging

from core import atomic, run_folder
from core.framework import seed_generator_states
from network.checkpoints import training_checkpoint
from network.checkpoints.readers import damaged_checkpoint_error
from training.divergence import EveryFewSteps, StepGuard, TrainingDiverged, all_finite

# What a save cut short leaves: TensorFlow writes the shards of `ckpt-N` under
# `ckpt-N_temp/` and the `checkpoint` index through `checkpoint.tmp<uuid hex>`.
_SAVE_LEFTOVER = re.compile(r"(ckpt-\d+_temp|checkpoint\.tmp[0-9a-f]{32})")


def remove_save_leftovers(checkpoint_dir: str) -> None:
    """Deletes what a save killed midway left in `checkpoint_dir`.

    TensorFlow never cleans these up unless a later save reuses the same
    number. Only safe while no one else writes there: call it from the
    folder's single writer before its first save.
    """
    if not os.path.isdir(checkpoint_dir):
        return
    for name in sorted(os.listdir(checkpoint_dir)):
        if not _SAVE_LEFTOVER.fullmatch(name):
            continue
        path = os.path.join(checkpoint_dir, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
        logging.info("Removed %s, left by a checkpoint save that was cut short", path)


def restore_checkpoint(checkpoint: tf.train.Checkpoint, path: str, folder: str,
                       instead: str) -> None:
    """Restores the training checkpoint at `path` into `checkpoint`, every saved object matched.

    A damaged checkpoint, or one of another model or optimizer, raises a
    ValueError naming it; `folder` names where it lies, `instead` what to
    pass rather than delete that folder.
    """
    try:
        checkpoint.restore(path).assert_existing_objects_matched()
    except (IndexError, tf.errors.DataLossError) as error:  # a short read, a bad checksum
        raise damaged_checkpoint_error(path, error) from None
    except (AssertionError, ValueError, tf.errors.OpError) as error:
        raise ValueError(f"{folder} holds {path}, which does not fit this model and optimizer "
                         f"({str(error).splitlines()[0]}); {instead}, or delete that folder "
                         "to start over") from None


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
        remove_save_leftovers(self.folder)
        atomic.remove_dead_temporaries(self.folder)
        optimizer = model.optimizer
        with model.distribute_strategy.scope():
            optimizer.build(model.trainable_variables)
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.seed = tf.Variable(0, dtype=tf.int64, trainable=False, name="order_seed")
        self.checkpoint = training_checkpoint(
            model, optimizer=optimizer, step=self.step, order_seed=self.seed,
            dropout_seeds=seed_generator_states(model))
        saved = [*model.checkpoint_variables().values(), *optimizer.variables]
        floats = [v for v in saved if keras.backend.is_float_dtype(v.dtype)]
        self._all_finite = tf.function(lambda: all_finite(floats))
        self.manager = tf.train.CheckpointManager(self.checkpoint, self.folder, max_to_keep=1)

    @property
    def newest(self) -> str | None:
        return self.manager.latest_checkpoint

    def release(self) -> None:
        """Unlocks the folder: a `fit` holds it only while it runs."""
        run_folder.release(self.folder)

    def restore(self, seed: int | None) -> tuple[int, int | None]:
        """(steps done, order seed) from the newest checkpoint; (0, `seed`) when there is none.

        `seed` is a new run's order seed, which the checkpoints then keep.
        """
        newest = self.newest
        if newest is None:
            self.seed.assign(seed or 0)
            return 0, seed
        try:
            restore_checkpoint(self.checkpoint, newest, f"resume_dir={self.folder}",
                               "pass another resume_dir")
        except BaseException:
            self.release()
            raise
        logging.info("fit resumes from %s", newest)
        return int(self.step.numpy()), int(self.seed.numpy())

    def save(self, step: int) -> None:
        """Saves the state after `step` steps; refuses (TrainingDiverged) a non-finite one.

        Checked here as in the runners' loop: optimizer slots can overflow
        while the loss and the weights stay finite.
        """
        if not bool(self._all_finite()):
            newest = self.newest
            kept = (f"the newest checkpoint, {newest}, is from before it" if newest
                    else "no checkpoint was saved before it")
            raise TrainingDiverged(step, f"fit stopped at step {step}: the weights or optimizer "
                                   f"slots hold non-finite values, so they were not saved; {kept}",
                                   newest)
        self.step.assign(step)
        try:
            self.manager.save(checkpoint_number=step)
        except BaseException:
            # A save cut short (a full disk, Ctrl-C) would leave ckpt-N_temp/ until the next start.
            remove_save_leftovers(self.folder)
            raise


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
