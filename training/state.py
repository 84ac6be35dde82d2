"""The checkpointed state of a training run, one class under both trainers.

The runners' loop (`training.loop.TrainingLoop`) and the task models' `fit`
(`training.resume.ResumeFolder`) resume a killed run the same way, so what
they save, how they restore it and when they refuse to save is written once
here: the model's weights, the optimizer (its moments and update count,
which drives the learning-rate schedule), the steps done, the dropout
layers' random state (without which a resumed run draws other masks than
the run it continues) and whatever else the trainer names (`fit`'s order
seed).

A checkpoint is complete or absent: TensorFlow writes the `checkpoint`
index file last, so a kill during a save leaves the previous checkpoint the
newest, and what the cut save left is removed when the state is built, by
the folder's one writer, and after a save that fails. A state whose
weights or optimizer slots are not finite is never saved: the slots can
overflow while the loss and the weights stay finite, and a saved NaN would
rotate every good checkpoint out.
"""

from __future__ import annotations

import os
import re
import shutil

import keras
import tensorflow as tf
from absl import logging

from core import atomic, faults
from core.framework import seed_generator_states
from network.checkpoints import training_checkpoint
from network.checkpoints.readers import damaged_checkpoint_error
from training.divergence import all_finite, diverged

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


class TrainingState:
    """A model's training state and its checkpoints in `folder`: restore, save-if-finite, cleanup.

    Build the model and optimizer first (the optimizer's slots must exist to
    be saved). `step` counts the steps done; a trainer advances it or
    assigns it, and `save` writes checkpoint `ckpt-<step>`.

    Args:
      folder: where the checkpoints go.
      model: the model whose `checkpoint_variables()` are saved.
      optimizer: its optimizer, built.
      max_to_keep: how many checkpoints the folder keeps.
      extra: other variables saved beside the state, by name.
      argument: the argument that named `folder`, for messages (None: "folder").
      steps_per_update: steps per optimizer update; a diverged step is
        reported as the update it falls in.
      worker: None for the folder's writer; a worker's number for another
        worker of a multi-worker run, whose (collective) saves go to scratch
        space under `folder` and are deleted at once.

    Examples:

    >>> state = TrainingState(folder, model, model.optimizer)
    >>> state.restore()
    >>> state.save(100)
    """

    def __init__(self, folder: str, model: keras.Model, optimizer: keras.optimizers.Optimizer,
                 *, max_to_keep: int = 1, extra: dict[str, tf.Variable] | None = None,
                 argument: str | None = None, steps_per_update: int = 1,
                 worker: int | None = None):
        self.folder = folder
        self.write_dir = folder if worker is None else os.path.join(folder, f".worker-{worker}")
        self.writer = worker is None
        if self.writer:  # the only writer here, and it has not written anything yet
            remove_save_leftovers(folder)
            atomic.remove_dead_temporaries(folder)
        self._named = f"{argument}={folder}" if argument else folder
        self._instead = f"pass another {argument or 'folder'}"
        self._steps_per_update = steps_per_update
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self._objects = {"optimizer": optimizer, "step": self.step, **(extra or {})}
        self._model = model
        # Saved by position: the seed generators' names carry a per-process counter.
        self._dropout_seeds = seed_generator_states(model)
        self.checkpoint = training_checkpoint(model, **self._objects,
                                              dropout_seeds=self._dropout_seeds)
        saved = [*model.checkpoint_variables().values(), *optimizer.variables]
        floats = [v for v in saved if keras.backend.is_float_dtype(v.dtype)]
        self._all_finite = tf.function(lambda: all_finite(floats))
        self.manager = tf.train.CheckpointManager(self.checkpoint, self.write_dir,
                                                  max_to_keep=max_to_keep)

    @property
    def newest(self) -> str | None:
        """The newest checkpoint, named where the writer keeps it (workers' copies are scratch)."""
        latest = self.manager.latest_checkpoint
        return latest and os.path.join(self.folder, os.path.basename(latest))

    def restore(self) -> str | None:
        """Restores the newest checkpoint into the model, the optimizer, the step, the dropout
        state and the extra variables; returns its path, None when there is none yet.

        Raises ValueError naming the checkpoint when it is damaged or does
        not fit this model and optimizer.
        """
        newest = self.manager.latest_checkpoint
        if self.writer:
            faults.note_resume_point(f"the newest checkpoint is {newest}"
                                     if newest else "no checkpoint was saved yet")
        if newest:
            restore_checkpoint(self._restorable(newest), newest, self._named, self._instead)
        return newest

    def _restorable(self, path: str) -> tf.train.Checkpoint:
        """The checkpoint object to restore the checkpoint at `path` into.

        Checkpoints written before the dropout state was saved still resume:
        everything else is restored, and the dropout masks start afresh (so
        that one run is not bit-identical to an uninterrupted one).
        """
        saved = {name.split("/", 1)[0] for name, _ in tf.train.list_variables(path)}
        if not self._dropout_seeds or "dropout_seeds" in saved:
            return self.checkpoint
        logging.warning("%s holds no dropout random state (written by an older version); "
                        "resuming with fresh dropout masks", path)
        return training_checkpoint(self._model, **self._objects)

    def save(self, step: int) -> str:
        """Saves the state after `step` steps as `ckpt-<step>`; returns its path.

        Raises TrainingDiverged, saving nothing, when a weight or optimizer
        slot is not finite; an OSError naming the checkpoint when the disk
        has no room for it.
        """
        if not bool(self._all_finite()):
            raise diverged(-(-step // self._steps_per_update),
                           "the weights or optimizer slots hold non-finite values", self.newest)
        self.step.assign(step)
        try:
            saved = self.manager.save(checkpoint_number=step)
        except BaseException as error:
            # A save cut short (a full disk, Ctrl-C) would leave ckpt-N_temp/ until the next start.
            remove_save_leftovers(self.write_dir)
            no_room = faults.no_room_error(error)
            if no_room is None:
                raise
            # Named as the checkpoint, not as the temporary file TensorFlow was writing.
            raise OSError(no_room.errno, no_room.strerror,
                          os.path.join(self.folder, f"ckpt-{step}")) from None
        if self.writer:
            faults.note_resume_point(f"the newest checkpoint is {saved}")
        else:
            shutil.rmtree(self.write_dir, ignore_errors=True)
        return saved
