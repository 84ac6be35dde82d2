"""The one fine-tuning driver: the paper's learning-rate sweep and every step after it.

Classification, SQuAD and tagging (fine-tuned or on frozen features)
fine-tune the same way, so the sequence is written here once and a task
gives only hooks, as a Model Garden task gives them to its trainer:

    read_data -> for each learning rate and each restart: build_model, train,
    score on dev -> keep the best -> save -> export -> write_predictions
    -> eval_results.txt, sweep_results.tsv and TensorBoard's logs/eval

The paper's recipe (Section 4.1) picks the rate on dev for every task:
each (rate, restart) is a run with its own seed (data order, new layers'
initialization), and the run with the best dev score is the one saved,
exported and used for predictions. A run whose loss stops being finite is
a row `diverged at step N` and never chosen; if every run diverges, nothing
is saved and the task fails, naming `sweep_results.tsv`. A lone run trains
in the output folder itself; a sweep's runs each train in
`runs/lr<rate>_restart<k>/`, so a killed sweep rerun with the same settings
resumes each run from its own checkpoints, and a finished run is not
trained again (it is only scored again). A run that looks degenerate
(`evaluation.degenerate_runs`) is warned about.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Callable, Protocol

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from core.arguments import FieldError, check_integer, is_number
from core.atomic import remove_dead_temporaries, write_atomically
from evaluation.degenerate_runs import NEAR_MAJORITY, majority_fields, run_warning
from evaluation.results import write_eval_results
from network.checkpoints import load_weights
from network.model_folder import write_model_folder
from tasks.contract import TaskResult
from tasks.model_files import (FINE_TUNING, ModelFiles, ModelNeeds, ResolvedModel,
                               resolve_model_files)
from training import loop
from training.configs import MAX_SEED, OptimizationConfig, TrainingConfig
from training.training_run import fine_tune
from training.training_logs import write_eval_scalars


@dataclasses.dataclass(frozen=True, kw_only=True)
class FineTuningSettings:
    """What every fine-tuning task is asked to do, and its sweep; a task's settings extend it."""

    do_train: bool = False
    do_eval: bool = False  # score on dev (and choose the sweep's best run there)
    do_predict: bool = False
    learning_rates: tuple[float, ...] = ()  # the sweep (default: the optimization's rate)
    num_restarts: int = 1  # runs per learning rate, each with its own seed
    export_saved_model: bool = True  # after training: a SavedModel on raw text

    def __post_init__(self) -> None:
        for rate in self.learning_rates:
            if not (is_number(rate) and rate > 0):
                raise FieldError("{learning_rates}: every rate must be a positive finite "
                                 "number, got {0!r}", rate)
        check_integer("num_restarts", self.num_restarts)
        runs = max(1, len(self.learning_rates)) * self.num_restarts
        if self.do_train and runs > 1 and not self.do_eval:
            raise FieldError("{learning_rates} and {num_restarts} ask for {0} runs and the best "
                             "is chosen on dev: pass {do_eval} too", runs)


class TaskData(Protocol):
    """What the driver reads of a task's data; the rest is the task's own."""

    train: dict[str, np.ndarray] | None  # training arrays (inputs and labels), None without
    labels: list[str] | None  # class or tag names in the order of the model's outputs


@dataclasses.dataclass
class DevScores:
    """A model's scores on dev, the one number the sweep compares, and what was predicted."""

    scores: dict[str, float]  # as eval_results.txt holds them
    selection: float  # higher is better; a fraction, as evaluation.degenerate_runs reads it
    predictions: Any = None  # for write_predictions, which need not predict dev again


@dataclasses.dataclass
class SweepRun:
    """One row of sweep_results.tsv."""

    learning_rate: float
    restart: int
    score: float  # the dev selection score; NaN for a run that did not finish
    scores: dict[str, float]
    status: str  # `finished` or `diverged at step N`
    warning: str = ""  # why the run looks degenerate, if it does


class TaskHooks:
    """What a fine-tuning task gives the driver, as methods of one run of the task.

    An instance is made for each `run`, with the settings every hook reads:
    `task` (the task's FineTuningSettings), `resolved` (the model's files),
    `training`, `strategy`, and `data` once `read_data` has read it. A
    subclass gives `read_data`, `build_model`, `loss`, `score` and
    `write_predictions`, and `export` for a SavedModel; the others have
    defaults it may replace (the feature-based tagger trains with Keras
    `fit` and saves its own way).
    """

    def __init__(self, task, resolved: ResolvedModel, training: TrainingConfig,
                 strategy: tf.distribute.Strategy):
        self.task, self.resolved, self.training, self.strategy = task, resolved, training, strategy
        self.chief = loop.is_chief(strategy)  # the process that writes the outputs
        self.data: TaskData | None = None

    @classmethod
    def for_task(cls, task) -> type[TaskHooks]:
        """The hooks for `task`: these, or a subclass's for a variant of the task."""
        del task
        return cls

    @classmethod
    def needs(cls, task) -> ModelNeeds:
        """What `task` needs of the model's files (`tasks.model_files`)."""
        del task
        return FINE_TUNING

    @classmethod
    def check(cls, task, optimization: OptimizationConfig,
              resolved: ResolvedModel | None = None) -> None:
        """Refuses settings that would fail late: called before the model's files are read
        (`resolved` None), and again with them."""

    def learning_rates(self, optimization: OptimizationConfig) -> tuple[float, ...]:
        """The sweep's rates: the task's list, or the optimization's one rate."""
        return self.task.learning_rates or (optimization.learning_rate,)

    def read_data(self) -> TaskData:
        """The splits the task asks for, read and converted once before any model is built."""
        raise NotImplementedError

    def build_model(self) -> keras.Model:
        """A fresh model with the pre-trained weights (or, without training, the ones to score)."""
        raise NotImplementedError

    def pretrained(self, model_fn: Callable[[], keras.Model]) -> keras.Model:
        """`model_fn`'s model in the strategy's scope, `init_checkpoint`'s weights loaded
        (`transfer_layers=N`: the embeddings and the first N blocks only)."""
        files = self.resolved.files
        with self.strategy.scope():
            model = model_fn()
        if files.init_checkpoint:
            report = load_weights(model, files.init_checkpoint, files.transfer_layers)
            logging.info(report.summary())
        else:
            logging.warning("No init_checkpoint: the encoder starts from random weights")
        return model

    def loss(self) -> loop.LossFunction:
        raise NotImplementedError

    def train(self, model: keras.Model, optimization: OptimizationConfig, seed: int,
              output_dir: str) -> int:
        """Trains `model` with checkpoints and logs in `output_dir` (the run's folder); returns
        the updates made. Raises `loop.TrainingDiverged` when the loss stops being finite."""
        return fine_tune(model, self.strategy, self.data.train, self.loss(), optimization,
                         self.training, output_dir, seed,
                         hidden_size=self.resolved.config.hidden_size)

    def score(self, model: keras.Model) -> DevScores:
        """`model`'s scores on dev."""
        raise NotImplementedError

    def majorities(self) -> dict[str, float]:
        """Each dev accuracy's majority-class baseline, keyed like the accuracy in the scores."""
        return {}

    def save(self, model: keras.Model) -> list[str]:
        """Saves the chosen model in the output folder, with its config, vocabulary, settings
        and labels, so `from_pretrained` reloads it whole; returns the paths written."""
        return write_model_folder(self.training.output_dir, task_model=model,
                                  config=self.resolved.config,
                                  vocabulary=self.resolved.files.vocab_file,
                                  labels=self.data.labels)

    def log_eval(self, output_dir: str, step: int, scores: dict[str, Any]) -> None:
        """`scores` to TensorBoard's `output_dir/logs/eval` at `step`, from the chief alone."""
        if self.chief:
            write_eval_scalars(output_dir, step, scores)

    def export(self, model: keras.Model, path: str) -> str | None:
        """Exports the chosen model as a SavedModel on raw text; None: nothing to export."""
        del model, path
        return None

    def write_predictions(self, model: keras.Model, dev: DevScores | None
                          ) -> tuple[dict[str, float], list[str]]:
        """Writes what the task asks to predict; returns scores to add to the dev scores (a
        test split's) and the paths written. `dev` is the chosen model's, when scored."""
        raise NotImplementedError


class FineTuningTask:
    """The `tasks.contract.Task` of a fine-tuning task: the driver, over its `TaskHooks`."""

    def __init__(self, hooks: type[TaskHooks]):
        self.hooks = hooks

    def prepare(self, task, model_files: ModelFiles, training: TrainingConfig,
                optimization: OptimizationConfig) -> ResolvedModel:
        """The model's files resolved by the task's needs, its checks before and after."""
        hooks = self.hooks.for_task(task)
        hooks.check(task, optimization)
        if training.random_seed + task.num_restarts - 1 > MAX_SEED:  # restart k seeds seed + k
            raise FieldError("{random_seed}={0} with {num_restarts}={1}: the last restart's "
                             "seed would pass 2**32 - 1", training.random_seed, task.num_restarts)
        resolved = resolve_model_files(model_files, hooks.needs(task), training.max_seq_length)
        hooks.check(task, optimization, resolved)
        return resolved

    def run(self, task, resolved: ResolvedModel, training: TrainingConfig,
            optimization: OptimizationConfig, strategy: tf.distribute.Strategy | None = None
            ) -> TaskResult:
        """Sweeps, saves, exports, predicts and scores as `task` asks.

        What a killed save left in the folder goes first, before anything
        reads it.
        """
        hooks = self.hooks.for_task(task)(task, resolved, training,
                                          strategy or tf.distribute.get_strategy())
        output_dir = training.output_dir
        if hooks.chief:  # a rerun after a kill starts clean
            remove_dead_temporaries(output_dir)
        hooks.data = hooks.read_data()
        written, step, logged = [], 0, set()
        if task.do_train:
            model, dev, step, lone, table = sweep(hooks, optimization)
            written.append(table)
            if lone and dev:  # its dev scores are in the folder's logs/eval already
                logged = set(dev.scores)
            written.extend(hooks.save(model))
            exported = task.export_saved_model and hooks.export(
                model, os.path.join(output_dir, "saved_model"))
            if exported:
                written.append(exported)
                logging.info("Exported %s, a SavedModel on raw text", exported)
        else:
            keras.utils.set_random_seed(training.random_seed)
            model = hooks.build_model()
            dev = hooks.score(model) if task.do_eval else None
        scores = dict(dev.scores) if dev else {}
        # Where the model stands to the majority class: in the results, not on TensorBoard.
        baselines = majority_scores(dev.scores, hooks.majorities()) if dev else {}
        predicted, files = hooks.write_predictions(model, dev)
        scores.update(predicted)
        written.extend(files)
        if scores:
            written.append(os.path.join(output_dir, "eval_results.txt"))
            write_eval_results(written[-1], {**scores, **baselines})
            unlogged = {key: value for key, value in scores.items() if key not in logged}
            if unlogged:
                hooks.log_eval(output_dir, step, unlogged)
        return TaskResult({**scores, **baselines}, tuple(written), model)


def sweep(hooks: TaskHooks, optimization: OptimizationConfig
          ) -> tuple[keras.Model, DevScores | None, int, bool, str]:
    """Trains every (learning rate, restart) and keeps the best on dev.

    Returns the best model, its dev scores (None without do_eval), its
    updates, whether it was the only run (trained in the output folder
    itself), and the path of sweep_results.tsv.
    """
    task, training = hooks.task, hooks.training
    rates = hooks.learning_rates(optimization)
    # Walked, not listed: the sweep may be as long as the seeds allow (2**32 runs).
    grid = ((rate, restart) for rate in rates for restart in range(task.num_restarts))
    lone, best, runs = len(rates) * task.num_restarts == 1, None, []
    for rate, restart in grid:
        run_dir = training.output_dir if lone else os.path.join(
            training.output_dir, "runs", f"lr{rate:g}_restart{restart}")
        seed = training.random_seed + restart
        keras.utils.set_random_seed(seed)
        model = hooks.build_model()
        try:
            step = hooks.train(model, dataclasses.replace(optimization, learning_rate=rate), seed,
                               run_dir)
        except loop.TrainingDiverged as error:
            if lone:
                raise
            runs.append(SweepRun(rate, restart, math.nan, {}, f"diverged at step {error.step}"))
            logging.warning("learning rate %g, restart %d: %s", rate, restart, error)
            continue
        dev = hooks.score(model) if task.do_eval else None
        if dev:
            hooks.log_eval(run_dir, step, dev.scores)
        runs.append(SweepRun(rate, restart, dev.selection if dev else 0.0,
                             dev.scores if dev else {}, "finished"))
        logging.info("learning rate %g, restart %d: dev score %.4f", rate, restart,
                     runs[-1].score)
        if best is None or runs[-1].score > best[0].score:
            best = (runs[-1], model, dev, step)
    flag_degenerate_runs(runs, hooks.majorities())
    table = write_sweep_table(training.output_dir, runs, best[0] if best else None)
    if best is None:
        listed = ", ".join(f"{r.learning_rate:g} (restart {r.restart}) {r.status}" for r in runs)
        raise FieldError("every run of the sweep diverged: {0}; see {1} and pass lower "
                         "{learning_rates}", listed, table)
    return best[1], best[2], best[3], lone, table


def majority_scores(scores: dict[str, float], majorities: dict[str, float]) -> dict[str, float]:
    """The evaluated model's standing to each dev set's majority class (`majority_fields`),
    for eval_results.txt; a warning when it is no better than the majority class."""
    fields = majority_fields(scores, majorities)
    for name, near in fields.items():
        if name.endswith("_near_majority_class") and near:
            prefix = name.removesuffix("_near_majority_class")
            logging.warning("%s: accuracy %.1f%% is within %.0f point of always predicting the "
                            "majority class (%.1f%%): the model learnt the label prior, not the "
                            "task; try other seeds (num_restarts) or adam_bias_correction",
                            prefix, 100 * scores[f"{prefix}_accuracy"], 100 * NEAR_MAJORITY,
                            100 * fields[f"{prefix}_majority_class_accuracy"])
    return fields


def flag_degenerate_runs(runs: list[SweepRun], majorities: dict[str, float]) -> None:
    """Sets the warning of each scored run that looks degenerate, and logs it."""
    for r in runs:
        if r.status != "finished" or not r.scores:
            continue
        r.warning = run_warning(r.scores, majorities, r.score, [other.score for other in runs])
        if r.warning:
            logging.warning("learning rate %g, restart %d: dev score %.4f, %s", r.learning_rate,
                            r.restart, r.score, r.warning)


def write_sweep_table(output_dir: str, runs: list[SweepRun], chosen: SweepRun | None) -> str:
    """`sweep_results.tsv`: one row per run with its dev scores; the chosen one starred."""
    keys = sorted({key for r in runs for key in r.scores})
    lines = ["\t".join(["learning_rate", "restart", "dev_score", *keys, "status", "warning",
                        "chosen"])]
    for r in runs:
        lines.append("\t".join([f"{r.learning_rate:g}", str(r.restart), f"{r.score:.4f}",
                                *(f"{r.scores.get(key, float('nan')):.4f}" for key in keys),
                                r.status, r.warning, "*" if r is chosen else ""]))
    path = os.path.join(output_dir, "sweep_results.tsv")
    write_atomically(path, "\n".join(lines) + "\n")
    return path
