"""Sentence(-pair) classification, regression and multiple choice: GLUE, SWAG, your own TSV.

The paper's recipe (Section 4.1): for each learning rate and each restart
(different data order and classifier initialization), fine-tune and score
on dev; keep the best. A run whose loss stops being finite is listed as
`diverged at step N` and never chosen; if every run diverges, nothing is
saved and the task fails. The best run's dev scores are the evaluation
results: dev is predicted once per run, never again after the sweep. A
run that looks degenerate (`evaluation.degenerate_runs`) is warned about.
"""

from __future__ import annotations

import dataclasses
import math
import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from core.arguments import check_non_negative
from core.atomic import write_atomically
from data_prep.datasets import glue, swag
from evaluation import glue as glue_metrics
from evaluation.degenerate_runs import majority_accuracy, run_warning
from evaluation.results import write_eval_results
from modeling.task_models import (BertClassifier, BertMultipleChoice, classification_loss,
                                  regression_loss)
from tasks.contract import FineTuningTask, TaskResult
from tasks.model_files import ResolvedModel
from tasks.serving import export_classifier
from training import finetuning, loop
from training.configs import OptimizationConfig, TrainingConfig

KINDS = ("classification", "regression", "multiple_choice")


@dataclasses.dataclass(frozen=True)
class ClassificationTask:
    """Which task, where its files are, the sweep, and what to do."""

    task_name: str  # a GLUE task, swag, or tsv
    data_dir: str  # the task's files in their distributed layout
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    learning_rates: tuple[float, ...] = ()  # the sweep (default: the optimization's rate)
    num_restarts: int = 1  # runs per learning rate, with different seeds
    causal: bool = False  # left-to-right model: causal attention, last-token classifier
    lm_aux_weight: float = 0.0  # GPT's auxiliary LM loss weight (with causal)
    both_orders: bool = False  # GPT's similarity input: (a, b) and (b, a) added (with causal)
    bilstm_units: int = 0  # a BiLSTM over the sequence classifies from its final states
    wnli_majority_class: bool = False  # submit WNLI's majority class, as the paper
    export_saved_model: bool = True  # a SavedModel taking raw strings
    tsv_text_a_column: str | None = None
    tsv_text_b_column: str | None = None
    tsv_label_column: str | None = None
    tsv_labels: tuple[str, ...] | None = None  # default: the training file's labels
    tsv_has_header: bool = True

    def __post_init__(self) -> None:
        for name in ("task_name", "data_dir"):
            if not getattr(self, name):
                raise ValueError(f"--{name} is required")
        if self.num_restarts < 1:
            raise ValueError(f"--num_restarts must be positive, got {self.num_restarts}")
        check_non_negative("lm_aux_weight", self.lm_aux_weight)
        check_non_negative("bilstm_units", self.bilstm_units)
        if self.bilstm_units and self.task_name.lower() == "swag":
            raise ValueError("--bilstm_units is for classification; SWAG has no BiLSTM head")
        if self.both_orders and not self.causal:
            raise ValueError("--both_orders is GPT's similarity input for the left-to-right "
                             "model; pass --causal too")
        if self.both_orders and self.task_name.lower() == "swag":
            raise ValueError("--both_orders is for text pairs; SWAG is multiple choice")
        for rate in self.learning_rates:
            if not (math.isfinite(rate) and rate > 0):
                raise ValueError(f"--learning_rates: every rate must be positive, got {rate}")


@dataclasses.dataclass
class ClassificationData:
    """A task's arrays, and the examples they came from (for submissions)."""

    name: str  # the GLUE name, or SWAG
    kind: str  # one of KINDS
    labels: list[str] | None  # None for regression and multiple choice
    pair: bool  # two texts per example
    train: dict[str, np.ndarray] | None
    train_examples: list
    dev: dict[str, tuple[dict, list]]  # dev set name -> (arrays, examples)
    test: dict[str, tuple[dict, list]]  # submission file stem -> (arrays, examples)


@dataclasses.dataclass
class SweepRun:
    learning_rate: float
    restart: int
    score: float
    scores: dict[str, float]
    status: str
    warning: str = ""  # why the run looks degenerate, if it does


def read_data(task: ClassificationTask, tokenizer, max_seq_length: int) -> ClassificationData:
    """The splits the actions need, converted to arrays."""
    if task.task_name.lower() == "swag":
        def read(name: str, has_label: bool) -> list:
            return swag.read_swag(os.path.join(task.data_dir, name), has_label)

        def mc_arrays(examples: list) -> dict:
            return swag.convert_multiple_choice(examples, tokenizer, max_seq_length)

        train = read("train.csv", True) if task.do_train else []
        dev = {"dev": read("val.csv", True)} if task.do_eval else {}
        test = {"SWAG": read("test.csv", False)} if task.do_predict else {}
        return ClassificationData(
            name="SWAG", kind="multiple_choice", labels=None, pair=True,
            train=mc_arrays(train) if train else None, train_examples=train,
            dev={k: (mc_arrays(v), v) for k, v in dev.items()},
            test={k: (mc_arrays(v), v) for k, v in test.items()})
    processor = glue.get_processor(
        task.task_name, tsv_text_a_column=task.tsv_text_a_column,
        tsv_text_b_column=task.tsv_text_b_column, tsv_label_column=task.tsv_label_column,
        tsv_labels=list(task.tsv_labels) if task.tsv_labels else None,
        tsv_has_header=task.tsv_has_header)
    train = processor.train_examples(task.data_dir) if task.do_train else []
    dev = processor.dev_sets(task.data_dir) if task.do_eval else {}
    test = processor.test_sets(task.data_dir) if task.do_predict else {}
    labels = processor.labels  # known once a split is read (tsv takes them from train)

    convert = glue.convert_both_orders if task.both_orders else glue.convert_examples

    def arrays(examples: list, what: str) -> dict:
        try:
            converted = convert(examples, tokenizer, max_seq_length, labels)
        except ValueError as error:
            raise ValueError(f"--task_name={task.task_name}, {what}: {error}") from None
        if converted.num_truncated:
            logging.info("%s: %d of %d examples truncated to %d tokens", what,
                         converted.num_truncated, len(examples), max_seq_length)
        return converted.features

    sample = next(iter([*train, *[e for v in dev.values() for e in v]]), None)
    return ClassificationData(
        name=processor.name, kind="regression" if labels is None else "classification",
        labels=labels, pair=sample is not None and sample.text_b is not None,
        train=arrays(train, "train") if train else None, train_examples=train,
        dev={k: (arrays(v, k), v) for k, v in dev.items()},
        test={k: (arrays(v, k), v) for k, v in test.items()})


def build_model(resolved: ResolvedModel, strategy: tf.distribute.Strategy,
                data: ClassificationData, task: ClassificationTask) -> keras.Model:
    def model_fn() -> keras.Model:
        if data.kind == "multiple_choice":
            return BertMultipleChoice(resolved.config, causal=task.causal)
        return BertClassifier(resolved.config, num_labels=len(data.labels or [None]),
                              causal=task.causal, lm_aux_weight=task.lm_aux_weight,
                              both_orders=task.both_orders, bilstm_units=task.bilstm_units)

    return finetuning.build_model(strategy, model_fn, resolved.files.init_checkpoint,
                                  resolved.files.transfer_layers)


def loss(data: ClassificationData) -> loop.LossFunction:
    return regression_loss if data.kind == "regression" else classification_loss


def score(data: ClassificationData, model: keras.Model, batch_size: int) -> dict[str, float]:
    """Dev metrics, prefixed by the dev set's name when there are several (MNLI)."""
    results = {}
    for name, (arrays, _) in data.dev.items():
        predictions = finetuning.predict(model, arrays, batch_size)
        metric_task = "swag" if data.kind == "multiple_choice" else data.name
        metrics = glue_metrics.compute_metrics(metric_task, predictions, arrays["label_ids"])
        metrics["score"] = (metrics["accuracy"] if data.kind == "multiple_choice"
                            else glue_metrics.glue_score(metric_task, metrics))
        prefix = _result_prefix(data, name)
        results.update({f"{prefix}_{key}": value for key, value in metrics.items()})
    return results


def _result_prefix(data: ClassificationData, dev_name: str) -> str:
    return "eval" if len(data.dev) == 1 else dev_name


def dev_majorities(data: ClassificationData) -> dict[str, float]:
    """Each dev set's majority-class accuracy, keyed like its accuracy in `score`'s results."""
    if data.kind == "regression":
        return {}
    return {f"{_result_prefix(data, name)}_accuracy": majority_accuracy(arrays["label_ids"])
            for name, (arrays, _) in data.dev.items()}


def flag_degenerate_runs(runs: list[SweepRun], majorities: dict[str, float]) -> None:
    """Sets the warning of each scored run that looks degenerate, and logs it."""
    for r in runs:
        if r.status != "finished" or not r.scores:
            continue
        r.warning = run_warning(r.scores, majorities, r.score, [other.score for other in runs])
        if r.warning:
            logging.warning("learning rate %g, restart %d: dev score %.4f, %s", r.learning_rate,
                            r.restart, r.score, r.warning)


def sweep(resolved: ResolvedModel, strategy: tf.distribute.Strategy, data: ClassificationData,
          task: ClassificationTask, training: TrainingConfig, optimization: OptimizationConfig
          ) -> tuple[keras.Model, list[SweepRun], SweepRun]:
    """Fine-tunes every (learning rate, restart); returns the best model, every run, the best.

    A run that diverges is listed as such and never chosen: its weights are
    NaN, and a too-high rate in a sweep should cost one row, not the sweep.
    """
    rates = task.learning_rates or (optimization.learning_rate,)
    grid = [(rate, restart) for rate in rates for restart in range(task.num_restarts)]
    best, runs = None, []
    for rate, restart in grid:
        run_dir = training.output_dir if len(grid) == 1 else os.path.join(
            training.output_dir, "runs", f"lr{rate:g}_restart{restart}")
        keras.utils.set_random_seed(training.random_seed + restart)
        model = build_model(resolved, strategy, data, task)
        try:
            step = finetuning.train(model, strategy, data.train, loss(data),
                                    dataclasses.replace(optimization, learning_rate=rate),
                                    training, run_dir, seed=training.random_seed + restart,
                                    hidden_size=resolved.config.hidden_size)
        except loop.TrainingDiverged as error:
            if len(grid) == 1:
                raise
            runs.append(SweepRun(rate, restart, math.nan, {}, f"diverged at step {error.step}"))
            logging.warning("learning rate %g, restart %d: %s", rate, restart, error)
            continue
        scores = score(data, model, training.eval_batch_size) if data.dev else {}
        finetuning.write_eval_scalars(strategy, run_dir, step, scores)
        mean = float(np.mean([v for k, v in scores.items() if k.endswith("_score")])) \
            if scores else 0.0
        runs.append(SweepRun(rate, restart, mean, scores, "finished"))
        logging.info("learning rate %g, restart %d: dev score %.4f", rate, restart, mean)
        if best is None or mean > best[1].score:
            best = (model, runs[-1])
    flag_degenerate_runs(runs, dev_majorities(data))
    if best is None:
        write_sweep_table(training.output_dir, runs, None)
        listed = ", ".join(f"{r.learning_rate:g} (restart {r.restart}) {r.status}" for r in runs)
        raise ValueError(f"every run of the sweep diverged: {listed}; see "
                         f"{os.path.join(training.output_dir, 'sweep_results.tsv')} and pass "
                         "lower --learning_rates")
    return best[0], runs, best[1]


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


def write_submissions(data: ClassificationData, model: keras.Model, task: ClassificationTask,
                      output_dir: str, batch_size: int) -> list[str]:
    """`submission/<stem>.tsv`: GLUE's server layout, or SWAG's `id<TAB>prediction`."""
    folder, written = os.path.join(output_dir, "submission"), []
    for stem, (arrays, examples) in data.test.items():
        predictions = finetuning.predict(model, arrays, batch_size)
        if data.kind == "multiple_choice":
            rows = ["id\tprediction"] + [f"{example.guid}\t{int(choice)}" for example, choice
                                         in zip(examples, predictions.argmax(-1))]
            write_atomically(os.path.join(folder, f"{stem}.tsv"), "\n".join(rows) + "\n")
        else:
            majority = (glue.majority_class(data.train_examples)
                        if stem == "WNLI" and task.wnli_majority_class else None)
            glue.write_submission(folder, stem, predictions, data.labels,
                                  indices=[example.guid for example in examples],
                                  majority_label=majority)
        logging.info("Wrote %s/%s.tsv (%d rows)", folder, stem, len(examples))
        written.append(os.path.join(folder, f"{stem}.tsv"))
    return written


class Classification(FineTuningTask):
    """The contract (`tasks.contract.Task`) for `ClassificationTask`."""

    def train_and_score(self, task: ClassificationTask, resolved: ResolvedModel,
                        training: TrainingConfig, optimization: OptimizationConfig,
                        strategy: tf.distribute.Strategy) -> TaskResult:
        """Trains (the sweep), evaluates and predicts as `task` asks."""
        output_dir = training.output_dir
        data = read_data(task, resolved.tokenizer, training.max_seq_length)
        scores, written = {}, []
        if task.do_train:
            model, runs, chosen = sweep(resolved, strategy, data, task, training, optimization)
            written.append(write_sweep_table(output_dir, runs, chosen))
            written.extend(finetuning.save_model_files(model, resolved.config,
                                                       resolved.files.vocab_file, output_dir,
                                                       data.labels))
            scores = chosen.scores
        else:
            model = build_model(resolved, strategy, data, task)
            if task.do_eval:
                scores = score(data, model, training.eval_batch_size)
                finetuning.write_eval_scalars(strategy, output_dir, 0, scores)
        if task.do_eval:
            written.append(os.path.join(output_dir, "eval_results.txt"))
            write_eval_results(written[-1], scores)
        if task.do_predict:
            written.extend(write_submissions(data, model, task, output_dir,
                                             training.predict_batch_size))
        if task.do_train and task.export_saved_model and data.kind != "multiple_choice":
            written.append(export_classifier(model, resolved.tokenizer, training.max_seq_length,
                                             data.labels, data.pair,
                                             os.path.join(output_dir, "saved_model")))
            logging.info("Exported %s (serving signature takes raw strings)", written[-1])
        return TaskResult(scores, tuple(written), model)


TASK = Classification()
