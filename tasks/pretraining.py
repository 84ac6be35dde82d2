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
import shutil

import keras
import tensorflow as tf
from absl import logging

from core import atomic
from evaluation.results import write_eval_results
from modeling.checkpoints import export_google_checkpoint, load_weights
from modeling.config import BertConfig
from modeling.pretrainer import BertPretrainer, pretraining_losses, pretraining_metric_sums
from text.tokenization import load_vocab
from training import loop
from training.configs import (ModelFiles, OptimizationConfig, RunConfig, check_non_negative,
                              check_positive, check_sequence_length,
                              check_weights_to_evaluate)
from training.input_pipeline import (list_files, naming_corrupt_records,
                                     naming_out_of_vocabulary_ids, pretraining_dataset)
from training.trainer import TrainingRun, weights_checksum

OBJECTIVES = ("mlm_nsp", "mlm", "ltr")


@dataclasses.dataclass(frozen=True)
class PretrainingData:
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
            raise ValueError("--input_file is required")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"--objective must be one of {', '.join(OBJECTIVES)}, "
                             f"got {self.objective!r}")
        check_non_negative("max_predictions_per_seq", self.max_predictions_per_seq)
        check_positive("max_eval_steps", self.max_eval_steps)
        if not (self.do_train or self.do_eval):
            raise ValueError("at least one of --do_train and --do_eval must be set")


def check(files: ModelFiles, run: RunConfig, data: PretrainingData) -> None:
    """Refuses settings that would fail late or give a run that exits 0 with a wrong result."""
    if data.max_predictions_per_seq > run.max_seq_length:
        raise ValueError("--max_predictions_per_seq cannot exceed --max_seq_length")
    if data.do_eval:
        check_weights_to_evaluate("--do_eval", data.do_train, files.init_checkpoint,
                                  run.output_dir)


_SAMPLED_RECORDS = 64


def check_records_fit_objective(file_pattern: str, objective: str) -> None:
    """Refuses records written for the other kind of objective, from the first few of them.

    LTR predicts every next token, so records written with masking would
    train it to read and predict [MASK]; an MLM objective on records written
    with `--masked_lm_prob=0` has nothing to predict. Either trains to the
    end with exit 0. A record is masked when any `masked_lm_weights` is set.
    """
    path = list_files(file_pattern)[0]
    masked = 0
    with naming_corrupt_records(path):  # a damaged file is named here, before any training
        records = list(tf.data.TFRecordDataset(path).take(_SAMPLED_RECORDS))
    for record in records:
        feature = tf.train.Example.FromString(record.numpy()).features.feature
        if "masked_lm_weights" in feature:
            masked += any(feature["masked_lm_weights"].float_list.value)
    if objective == "ltr" and masked:
        raise ValueError(f"--objective=ltr: {path} holds masked records ({masked} of its first "
                         f"{len(records)} have masked positions, [MASK] in their input); the "
                         "left-to-right model needs records written with --masked_lm_prob=0")
    if objective != "ltr" and records and not masked:
        raise ValueError(f"--objective={objective}: none of the first {len(records)} records "
                         f"of {path} has a masked position (written with --masked_lm_prob=0, "
                         "for --objective=ltr); the masked LM would learn nothing")


def build_model(files: ModelFiles, run: RunConfig, data: PretrainingData
                ) -> tuple[BertConfig, BertPretrainer]:
    config = BertConfig.from_json_file(files.bert_config_file)
    check_sequence_length(run.max_seq_length, config.max_position_embeddings,
                          files.bert_config_file)
    if files.vocab_file:
        # A vocab_size padded past the file (to a multiple of 8, say) is fine.
        tokens = len(load_vocab(files.vocab_file))
        if tokens > config.vocab_size:
            raise ValueError(f"{files.vocab_file} holds {tokens} tokens, more than "
                             f"vocab_size={config.vocab_size} of {files.bert_config_file}")
    return config, BertPretrainer(config, objective=data.objective)


def loss(data: PretrainingData) -> loop.LossFunction:
    return lambda features, outputs: pretraining_losses(features, outputs, data.objective)


def score(training: TrainingRun, run: RunConfig, data: PretrainingData, config: BertConfig,
          files: ModelFiles) -> dict[str, float]:
    """Weighted means of the losses and accuracies, plus the LM's perplexity."""
    eval_input = data.eval_input_file or data.input_file

    def build(context):
        return pretraining_dataset(eval_input, run.eval_batch_size, run.max_seq_length,
                                   data.max_predictions_per_seq, False, input_context=context,
                                   seed=run.random_seed, vocab_size=config.vocab_size)

    with naming_corrupt_records(eval_input), naming_out_of_vocabulary_ids(
            eval_input, config.vocab_size, files.bert_config_file):
        results = training.evaluate(
            training.strategy.distribute_datasets_from_function(build),
            lambda features, outputs: pretraining_metric_sums(features, outputs, data.objective),
            data.max_eval_steps)
    loss_key = "lm_loss" if data.objective == "ltr" else "masked_lm_loss"
    results["perplexity"] = math.exp(min(results[loss_key], 50.0))
    return results


def write_outputs(model: BertPretrainer, config: BertConfig, files: ModelFiles,
                  output_dir: str) -> None:
    """The config and vocabulary beside the checkpoints, and Google's layout under export/."""
    config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    export_dir = os.path.join(output_dir, "export")
    atomic.remove_dead_temporaries(export_dir)
    export_google_checkpoint(model, os.path.join(export_dir, "bert_model.ckpt"))
    config.to_json_file(os.path.join(export_dir, "bert_config.json"))
    if files.vocab_file:
        for folder in (output_dir, export_dir):
            shutil.copyfile(files.vocab_file, os.path.join(folder, "vocab.txt"))


def run(files: ModelFiles, run_config: RunConfig, optimization: OptimizationConfig,
        data: PretrainingData, strategy: tf.distribute.Strategy | None = None
        ) -> tuple[BertPretrainer, dict[str, float]]:
    """Trains and/or evaluates; returns the model and the evaluation results (empty without)."""
    check(files, run_config, data)
    for wanted, pattern in ((data.do_train, data.input_file),
                            (data.do_eval, data.eval_input_file or data.input_file)):
        if wanted:
            check_records_fit_objective(pattern, data.objective)
    strategy = strategy or tf.distribute.get_strategy()
    keras.utils.set_random_seed(run_config.random_seed)
    os.makedirs(run_config.output_dir, exist_ok=True)
    with strategy.scope():
        config, model = build_model(files, run_config, data)
    updates, warmup = optimization.schedule(None, run_config.train_batch_size)
    training = TrainingRun(model, loss(data), strategy, optimization, run_config, updates,
                           warmup, run_config.output_dir)
    if training.restored_from:
        logging.info("Resuming from %s at step %d", training.restored_from, training.step)
    elif files.init_checkpoint:
        logging.info(load_weights(model, files.init_checkpoint).summary())

    if data.do_train:
        def build(context, micro_batch):
            return pretraining_dataset(data.input_file, micro_batch, run_config.max_seq_length,
                                       data.max_predictions_per_seq, True,
                                       input_context=context, seed=run_config.random_seed,
                                       vocab_size=config.vocab_size)

        with naming_corrupt_records(data.input_file), naming_out_of_vocabulary_ids(
                data.input_file, config.vocab_size, files.bert_config_file):
            training.train(build)

    chief = training.trainer.chief
    results = {}
    if data.do_eval:
        results = score(training, run_config, data, config, files)
        if chief:
            global_step = training.global_step
            loop.write_scalars(os.path.join(run_config.output_dir, "logs", "eval"),
                               global_step, results)
            write_eval_results(os.path.join(run_config.output_dir, "eval_results.txt"),
                               {**results, "global_step": global_step})
    if chief:
        write_outputs(model, config, files, run_config.output_dir)
    logging.info("final weights checksum: %.6f", weights_checksum(model))
    return model, results
