"""The one contract every task implements, so a runner, a notebook or an experiment drives
any of them the same way.

Each task module exposes one object, `TASK`, with two steps. `prepare`
refuses what can be refused before any work and resolves the model's files
by the task's rule (`tasks.model_files`); `run` does what the task's
settings ask and returns one `TaskResult`. Between the two, a runner makes
its strategy and claims its output folder. The words mean one thing each:
`task` is what to do and on which data (the module's own dataclass),
`model_files` where the model comes from as named and `resolved` those files
found and checked (its config, its tokenizer), `training` how a run batches, saves and reports
(`TrainingConfig`), `optimization` the optimizer and its schedule.

The fine-tuning tasks implement the two steps once, in `tasks.driver`; a
task that trains nothing (features) takes None for `training` and
`optimization`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Protocol, TypeVar, runtime_checkable

import keras
import tensorflow as tf

from tasks.model_files import ModelFiles, ResolvedModel
from training.configs import OptimizationConfig, TrainingConfig

TaskT = TypeVar("TaskT", contravariant=True)
TaskSettingsT = TypeVar("TaskSettingsT")


@dataclasses.dataclass(frozen=True)
class TaskResult:
    """What a task scored, what it wrote, and the model it trained or loaded."""

    scores: dict[str, float]  # as eval_results.txt holds them; empty when nothing was scored
    outputs: tuple[str, ...]  # files and folders written, in order (a checkpoint by its prefix)
    model: keras.Model | None = None  # None for a task that keeps no model (features)


@runtime_checkable
class Task(Protocol[TaskT]):
    """A task family: its settings dataclass is `TaskT`."""

    def prepare(self, task: TaskT, model_files: ModelFiles, training: TrainingConfig,
                optimization: OptimizationConfig) -> ResolvedModel:
        """Refuses settings that would fail late; the model's files resolved by the task's rule."""

    def run(self, task: TaskT, resolved: ResolvedModel, training: TrainingConfig,
            optimization: OptimizationConfig, strategy: tf.distribute.Strategy | None = None
            ) -> TaskResult:
        """Does what `task` asks, with `strategy` (default: the current one)."""


def run_task(family: Task[TaskSettingsT], task: TaskSettingsT, model_files: ModelFiles,
             training: TrainingConfig | None, optimization: OptimizationConfig | None,
             start: Callable[[ResolvedModel], tf.distribute.Strategy] | None = None
             ) -> TaskResult:
    """`prepare`, then `start` (a runner's strategy and folder claim), then `run`."""
    resolved = family.prepare(task, model_files, training, optimization)
    return family.run(task, resolved, training, optimization,
                      start(resolved) if start else None)
