"""SQuAD v1.1 / v2.0 question answering (Sections 4.2-4.3): fine-tune, predict, score.

The question and a window of the context are packed as `[CLS] question
[SEP] context [SEP]`; a start vector and an end vector score every token.
Contexts longer than a window are read in windows `doc_stride` tokens
apart. For v2.0 a question is answered "" when the null score beats the
best span by more than `null_score_diff_threshold`.
"""

from __future__ import annotations

import dataclasses
import os

import keras
import tensorflow as tf
from absl import logging

from core.arguments import check_non_negative, check_positive
from data_prep.datasets.squad import SquadExample, read_squad_examples
from data_prep.datasets.squad_features import (InputFeatures, convert_examples_to_features,
                                               features_to_arrays)
from evaluation.results import write_eval_results
from evaluation.squad import evaluate_v1, evaluate_v2, load_json
from modeling.task_models import BertSpanModel, span_loss
from tasks.contract import FineTuningTask, TaskResult
from tasks.model_files import ResolvedModel
from tasks.serving_span import export_span_model
from tasks.squad_predictions import RawResult, compute_predictions, write_prediction_files
from training import finetuning
from training.configs import OptimizationConfig, TrainingConfig

_LOGGED_WINDOWS = 20


@dataclasses.dataclass(frozen=True)
class SquadTask:
    """The files, the windowing and answer search, and what to do."""

    train_file: str | None = None  # SQuAD JSON for training
    predict_file: str | None = None  # SQuAD JSON to predict (and score with do_eval)
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    version_2_with_negative: bool = False  # SQuAD 2.0: questions may have no answer
    doc_stride: int = 128  # tokens between the starts of a context's windows
    max_query_length: int = 64  # question tokens kept
    n_best_size: int = 20  # start and end candidates per window
    max_answer_length: int = 30  # longest answer in WordPiece tokens
    null_score_diff_threshold: float = 0.0  # v2.0: answer "" above this
    verbose_logging: bool = False  # log the first windows of each file
    bilstm_units: int = 0  # units per direction of a BiLSTM before the span layer (0: none)
    causal: bool = False  # the left-to-right model: each position scored from its left context
    export_saved_model: bool = True  # after training: a SavedModel on question and context

    def __post_init__(self) -> None:
        if self.do_train and not self.train_file:
            raise ValueError("--do_train needs --train_file")
        if (self.do_predict or self.do_eval) and not self.predict_file:
            raise ValueError("--do_predict and --do_eval need --predict_file")
        for name in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length"):
            check_positive(name, getattr(self, name))
        check_non_negative("bilstm_units", self.bilstm_units)


def read_data(task: SquadTask, path: str, tokenizer, max_seq_length: int, is_training: bool
              ) -> tuple[list[SquadExample], list[InputFeatures]]:
    """(examples, windows) of one SQuAD file."""
    examples, report = read_squad_examples(path, is_training, task.version_2_with_negative)
    logging.info(report.summary())
    features = convert_examples_to_features(examples, tokenizer, max_seq_length,
                                            task.doc_stride, task.max_query_length, is_training)
    logging.info("%s: %d questions in %d windows of %d tokens", path, len(examples),
                 len(features), max_seq_length)
    if task.verbose_logging:
        for feature in features[:_LOGGED_WINDOWS]:
            example = examples[feature.example_index]
            target = ("" if feature.start_position is None else
                      f" target {feature.start_position}-{feature.end_position}"
                      f"{' (impossible)' if feature.is_impossible else ''}")
            logging.info("%s window %d (unique_id %d)%s: %s", example.qas_id,
                         feature.doc_span_index, feature.unique_id, target,
                         " ".join(feature.tokens))
    return examples, features


def build_model(resolved: ResolvedModel, strategy: tf.distribute.Strategy,
                task: SquadTask) -> keras.Model:
    return finetuning.build_model(
        strategy, lambda: BertSpanModel(resolved.config, bilstm_units=task.bilstm_units,
                                        causal=task.causal),
        resolved.files.init_checkpoint, resolved.files.transfer_layers)


def write_outputs(model: keras.Model, task: SquadTask, examples: list[SquadExample],
                  features: list[InputFeatures], do_lower_case: bool, training: TrainingConfig
                  ) -> tuple[dict[str, str], dict[str, float], list[str]]:
    """Writes the prediction files; returns (answers, null odds (v2.0)) for scoring, and
    the files' paths."""
    arrays = features_to_arrays(features)
    outputs = finetuning.predict(model, arrays, training.predict_batch_size)
    results = [RawResult(int(unique_id), start, end) for unique_id, start, end
               in zip(arrays["unique_ids"], outputs["start_logits"], outputs["end_logits"])]
    predictions, nbest, null_odds = compute_predictions(
        examples, features, results, task.n_best_size, task.max_answer_length,
        do_lower_case, task.version_2_with_negative, task.null_score_diff_threshold)
    written = write_prediction_files(training.output_dir, predictions, nbest, null_odds)
    empty = sum(1 for text in predictions.values() if not text)
    logging.info("Wrote answers to %d questions (%d of them empty) in %s", len(predictions),
                 empty, training.output_dir)
    return predictions, null_odds, written


def score(task: SquadTask, predictions: dict[str, str],
          null_odds: dict[str, float]) -> dict[str, float]:
    """The official metrics of the predictions against `task.predict_file`."""
    dataset = load_json(task.predict_file, "--predict_file")
    if not task.version_2_with_negative:
        try:
            return evaluate_v1(dataset, predictions)
        except ValueError as error:  # a v2.0 file: unanswerable questions have no answers
            raise ValueError(f"{task.predict_file}: {error}; for SQuAD 2.0 pass "
                             "--version_2_with_negative") from None
    # Thresholding at the task's value leaves predictions.json's answers as they are.
    return dict(evaluate_v2(dataset, predictions, null_odds,
                            na_prob_thresh=task.null_score_diff_threshold))


class Squad(FineTuningTask):
    """The contract (`tasks.contract.Task`) for `SquadTask`."""

    def train_and_score(self, task: SquadTask, resolved: ResolvedModel, training: TrainingConfig,
                        optimization: OptimizationConfig, strategy: tf.distribute.Strategy
                        ) -> TaskResult:
        """Trains, predicts and scores as `task` asks; the scores are empty without do_eval."""
        output_dir, length = training.output_dir, training.max_seq_length
        if task.do_train:  # read before the model is built: a bad file fails fast
            train_arrays = features_to_arrays(read_data(task, task.train_file, resolved.tokenizer,
                                                        length, is_training=True)[1])
            del train_arrays["unique_ids"]
        if task.do_predict or task.do_eval:
            examples, features = read_data(task, task.predict_file, resolved.tokenizer, length,
                                           is_training=False)
        keras.utils.set_random_seed(training.random_seed)
        model = build_model(resolved, strategy, task)
        step, written = 0, []
        if task.do_train:
            step = finetuning.train(model, strategy, train_arrays, span_loss, optimization,
                                    training, output_dir, seed=training.random_seed,
                                    hidden_size=resolved.config.hidden_size)
            written.extend(finetuning.save_model_files(model, resolved.config,
                                                       resolved.files.vocab_file, output_dir))
            if task.export_saved_model:
                written.append(export_span_model(model, resolved.tokenizer, length, task,
                                                 os.path.join(output_dir, "saved_model")))
                logging.info("Exported %s (serving signature takes question and context)",
                             written[-1])
        if not (task.do_predict or task.do_eval):
            return TaskResult({}, tuple(written), model)
        predictions, null_odds, predicted = write_outputs(model, task, examples, features,
                                                          resolved.files.do_lower_case, training)
        written.extend(predicted)
        scores = {}
        if task.do_eval:
            scores = score(task, predictions, null_odds)
            written.append(os.path.join(output_dir, "eval_results.txt"))
            write_eval_results(written[-1], scores)
            finetuning.write_eval_scalars(strategy, output_dir, step, scores)
        return TaskResult(scores, tuple(written), model)


TASK = Squad()
