"""Pre-training (masked LM + next sentence) or one of the paper's ablations, as a library call.

Objectives: `mlm_nsp` (the paper), `mlm` (Table 5's "No NSP"), `ltr` (a
causal encoder predicting every next token). A killed run restarts from the
newest checkpoint in `output_dir` (model, optimizer, step) and continues
with the batch it would have read next; pre-trained weights
(`init_checkpoint`, e.g. phase 1 for phase 2) load only into a fresh run.
"""

from __future__ import annotations

import dataclasses
import math
import os

import keras
import tensorflow as tf
from absl import logging

from core import atomic
from core.arguments import FieldError, check_integer
from evaluation.results import write_eval_results
from modeling.pretrainer import OBJECTIVES, BertPretrainer
from network.checkpoints import export_google_checkpoint, load_weights
from network.model_folder import GOOGLE_CHECKPOINT, write_model_folder
from tasks.contract import TaskResult
from tasks.model_files import PRETRAINING, ModelFiles, ResolvedModel, resolve_model_files
from training.configs import OptimizationConfig, TrainingConfig, check_weights_to_evaluate
from training.input_pipeline import (check_record_files, list_files, naming_corrupt_records,
                                     naming_out_of_vocabulary_ids, pretraining_dataset)
from training.training_run import TrainingRun, weights_checksum
from training.training_logs import write_eval_scalars


@dataclasses.dataclass(frozen=True)
class PretrainingTask:
    """The records to train and evaluate on, and what to do with them."""

    input_file: str  # TFRecord files: glob or comma-separated globs
    eval_input_file: str | None = None  # evaluation records (default: input_file)
    objective: str = "mlm_nsp"  # one of OBJECTIVES
    max_predictions_per_seq: int = 20  # masked positions per record
    max_eval_steps: int = 100  # evaluation batches
    do_train: bool = True
    do_eval: bool = False

    def __post_init__(self) -> None:
        if not self.input_file:
            raise FieldError("{input_file} is required")
        if self.objective not in OBJECTIVES:
            raise FieldError("{objective} must be one of {0}, got {1!r}", ", ".join(OBJECTIVES),
                             self.objective)
        check_integer("max_predictions_per_seq", self.max_predictions_per_seq, minimum=0)
        check_integer("max_eval_steps", self.max_eval_steps)
        if not (self.do_train or self.do_eval):
            raise FieldError("at least one of {do_train} and {do_eval} must be set")


def check(task: PretrainingTask, model_files: ModelFiles, training: TrainingConfig) -> None:
    """Refuses settings that would fail late or give a run that exits 0 with a wrong result."""
    if task.max_predictions_per_seq > training.max_seq_length:
        raise FieldError("{max_predictions_per_seq} cannot exceed {max_seq_length}")
    if task.do_eval:
        check_weights_to_evaluate(("do_eval",), task.do_train, model_files.init_checkpoint,
                                  training.output_dir)


_SAMPLED_RECORDS = 64


def check_records_fit_objective(file_pattern: str, objective: str) -> None:
    """Refuses records written for the other kind of objective, from the first few of them.

    LTR predicts every next token, so records written with masking would
    train it to read and predict [MASK]; an MLM objective on records written
    with `--masked_lm_prob=0` has nothing to predict. Either trains to the
    end with exit 0. A record is masked when any `masked_lm_weights` is set.
    """
    path = list_files(file_pattern)[0]
    check_record_files([path])  # a folder or a damaged file is named, not read
    masked = 0
    with naming_corrupt_records(path):  # a damaged file is named here, before any training
        records = list(tf.data.TFRecordDataset(path).take(_SAMPLED_RECORDS))
    for record in records:
        feature = tf.train.Example.FromString(record.numpy()).features.feature
        if "masked_lm_weights" in feature:
            masked += any(feature["masked_lm_weights"].float_list.value)
    if objective == "ltr" and masked:
        raise FieldError("{objective}=ltr: {0} holds masked records ({1} of its first {2} have "
                         "masked positions, [MASK] in their input); the left-to-right model "
                         "needs records written with masked_lm_prob=0", path, masked, len(records))
    if objective != "ltr" and records and not masked:
        raise FieldError("{objective}={0}: none of the first {1} records of {2} has a masked "
                         "position (written with masked_lm_prob=0, for {objective}=ltr); the "
                         "masked LM would learn nothing", objective, len(records), path)


def train(training_run: TrainingRun, task: PretrainingTask, resolved: ResolvedModel,
          training: TrainingConfig) -> None:
    """Trains on `task.input_file`, naming a damaged record or an id past the vocabulary."""
    def build(context, micro_batch):
        return pretraining_dataset(task.input_file, micro_batch, training.max_seq_length,
                                   task.max_predictions_per_seq, True, input_context=context,
                                   seed=training.random_seed,
                                   vocab_size=resolved.config.vocab_size)

    with naming_corrupt_records(task.input_file), naming_out_of_vocabulary_ids(
            task.input_file, resolved.config.vocab_size, resolved.files.bert_config_file):
        training_run.train(build)


def score(training_run: TrainingRun, model: BertPretrainer, task: PretrainingTask,
          resolved: ResolvedModel, training: TrainingConfig) -> dict[str, float]:
    """Weighted means of `model`'s losses and accuracies, plus the LM's perplexity."""
    eval_input = task.eval_input_file or task.input_file

    def build(context):
        return pretraining_dataset(eval_input, training.eval_batch_size, training.max_seq_length,
                                   task.max_predictions_per_seq, False, input_context=context,
                                   seed=training.random_seed,
                                   vocab_size=resolved.config.vocab_size)

    with naming_corrupt_records(eval_input), naming_out_of_vocabulary_ids(
            eval_input, resolved.config.vocab_size, resolved.files.bert_config_file):
        scores = training_run.evaluate(
            training_run.strategy.distribute_datasets_from_function(build),
            model.pretraining_metric_sums, task.max_eval_steps)
    scores["perplexity"] = math.exp(min(scores[model.lm_loss_name], 50.0))
    return scores


def write_outputs(model: BertPretrainer, resolved: ResolvedModel, output_dir: str) -> list[str]:
    """The config and vocabulary beside the checkpoints, and Google's layout under export/."""
    export_dir = os.path.join(output_dir, "export")
    vocabulary = resolved.files.vocab_file
    written = write_model_folder(output_dir, config=resolved.config, vocabulary=vocabulary)
    atomic.remove_dead_temporaries(export_dir)
    return written + write_model_folder(
        export_dir, weights=(GOOGLE_CHECKPOINT, lambda path: export_google_checkpoint(model, path)),
        config=resolved.config, vocabulary=vocabulary)


class Pretraining:
    """The contract (`tasks.contract.Task`) for `PretrainingTask`."""

    def prepare(self, task: PretrainingTask, model_files: ModelFiles, training: TrainingConfig,
                optimization: OptimizationConfig) -> ResolvedModel:
        del optimization  # checked when it is built
        check(task, model_files, training)
        return resolve_model_files(model_files, PRETRAINING, training.max_seq_length)

    def run(self, task: PretrainingTask, resolved: ResolvedModel, training: TrainingConfig,
            optimization: OptimizationConfig, strategy: tf.distribute.Strategy | None = None
            ) -> TaskResult:
        """Trains and/or evaluates; the scores are empty without do_eval."""
        for wanted, pattern in ((task.do_train, task.input_file),
                                (task.do_eval, task.eval_input_file or task.input_file)):
            if wanted:
                check_records_fit_objective(pattern, task.objective)
        strategy = strategy or tf.distribute.get_strategy()
        output_dir = training.output_dir
        keras.utils.set_random_seed(training.random_seed)
        os.makedirs(output_dir, exist_ok=True)
        with strategy.scope():
            model = BertPretrainer(resolved.config, objective=task.objective)
        updates, warmup = optimization.schedule(None, training.train_batch_size)
        training_run = TrainingRun(model, model.pretraining_losses, strategy, optimization,
                                   training, updates, warmup, output_dir,
                                   hidden_size=resolved.config.hidden_size)
        if training_run.restored_from:
            logging.info("Resuming from %s at step %d", training_run.restored_from,
                         training_run.step)
        elif resolved.files.init_checkpoint:
            logging.info(load_weights(model, resolved.files.init_checkpoint).summary())
        if task.do_train:
            train(training_run, task, resolved, training)
        chief = training_run.loop.chief
        scores, written = {}, []
        if task.do_eval:
            scores = score(training_run, model, task, resolved, training)
            if chief:
                global_step = training_run.global_step
                write_eval_scalars(output_dir, global_step, scores)
                written.append(os.path.join(output_dir, "eval_results.txt"))
                write_eval_results(written[-1], {**scores, "global_step": global_step})
        if chief:
            written.extend(write_outputs(model, resolved, output_dir))
        logging.info("final weights checksum: %.6f", weights_checksum(model))
        return TaskResult(scores, tuple(written), model)



TASK = Pretraining()
