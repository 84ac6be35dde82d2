"""SQuAD v1.1 / v2.0 question answering (Sections 4.2-4.3): the hooks of `tasks.driver`.

The question and a window of the context are packed as `[CLS] question
[SEP] context [SEP]`; a start vector and an end vector score every token.
Contexts longer than a window are read in windows `doc_stride` tokens
apart. For v2.0 a question is answered "" when the null score beats the
best span by more than `null_score_diff_threshold`. Dev is `predict_file`:
each run of a sweep is scored on it with the official metrics and compared
by its F1; the chosen run's answers are the prediction files.
"""

from __future__ import annotations

import dataclasses
import os

import keras
from absl import logging

from core.arguments import FieldError, FieldFileNotFoundError, check_integer, check_not_blank
from data_prep.datasets.squad import SquadExample, read_squad_examples
from data_prep.datasets.squad_features import (InputFeatures, convert_examples_to_features,
                                               features_to_arrays)
from evaluation.squad import evaluate_v1, evaluate_v2, load_json
from export.serving_span import export_span_model
from modeling.losses import span_loss
from modeling.span_model import BertSpanModel
from tasks.batch_prediction import predict
from tasks.driver import DevScores, FineTuningSettings, FineTuningTask, TaskHooks
from tasks.model_files import ResolvedModel
from tasks.squad_predictions import RawResult, compute_predictions, write_prediction_files
from text.answer_spans import MAX_ANSWER_LENGTH, MAX_QUERY_LENGTH, N_BEST_SIZE
from text.sliding_windows import DOC_STRIDE
from training import loop
from training.configs import OptimizationConfig

_LOGGED_WINDOWS = 20
Answers = tuple[dict[str, str], dict[str, list[dict]], dict[str, float]]  # texts, n-best, odds


@dataclasses.dataclass(frozen=True)
class SquadTask(FineTuningSettings):
    """The files, the windowing and answer search, and the model's variant."""

    train_file: str | None = None  # SQuAD JSON for training
    predict_file: str | None = None  # SQuAD JSON to predict (and score with do_eval)
    version_2_with_negative: bool = False  # SQuAD 2.0: questions may have no answer
    doc_stride: int = DOC_STRIDE  # tokens between the starts of a context's windows
    max_query_length: int = MAX_QUERY_LENGTH  # question tokens kept
    n_best_size: int = N_BEST_SIZE  # start and end candidates per window
    max_answer_length: int = MAX_ANSWER_LENGTH  # longest answer in WordPiece tokens
    null_score_diff_threshold: float = 0.0  # v2.0: answer "" above this
    verbose_logging: bool = False  # log the first windows of each file
    bilstm_units: int = 0  # units per direction of a BiLSTM before the span layer (0: none)
    causal: bool = False  # the left-to-right model: each position scored from its left context

    def __post_init__(self) -> None:
        if self.do_train and not self.train_file:
            raise FieldError("{do_train} needs {train_file}")
        if (self.do_predict or self.do_eval) and not self.predict_file:
            raise FieldError("{do_predict} and {do_eval} need {predict_file}")
        super().__post_init__()
        for name in ("train_file", "predict_file"):
            check_not_blank(name, getattr(self, name))
        for name in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length"):
            check_integer(name, getattr(self, name))
        check_integer("bilstm_units", self.bilstm_units, minimum=0)


@dataclasses.dataclass
class SquadData:
    """The training windows' arrays, and `predict_file`'s questions and windows."""

    train: dict | None
    examples: list[SquadExample]
    features: list[InputFeatures]
    do_lower_case: bool  # how the answers are matched back to the context's words
    labels: None = None  # spans have no label names


class Squad(TaskHooks):
    """The driver's hooks (`tasks.driver`) for `SquadTask`."""

    task: SquadTask
    data: SquadData

    @classmethod
    def check(cls, task: SquadTask, optimization: OptimizationConfig,
              resolved: ResolvedModel | None = None) -> None:
        """The JSON files the task will read exist, each named by its setting if not."""
        del optimization
        reads = {"train_file": task.do_train, "predict_file": task.do_predict or task.do_eval}
        for name, needed in reads.items():
            path = getattr(task, name)
            if resolved is None and needed and not os.path.isfile(path):
                raise FieldFileNotFoundError("{%s}={0}: no such file" % name, path)

    def read_data(self) -> SquadData:
        """Both files, before the model is built: a bad file fails fast."""
        task, train, examples, features = self.task, None, [], []
        if task.do_train:
            train = features_to_arrays(self.windows(task.train_file, is_training=True)[1])
            del train["unique_ids"]
        if task.do_predict or task.do_eval:
            examples, features = self.windows(task.predict_file, is_training=False)
        return SquadData(train, examples, features, self.resolved.files.do_lower_case)

    def windows(self, path: str, is_training: bool
                ) -> tuple[list[SquadExample], list[InputFeatures]]:
        """(questions, windows) of one SQuAD file."""
        task, length = self.task, self.training.max_seq_length
        examples, report = read_squad_examples(path, is_training, task.version_2_with_negative)
        logging.info(report.summary())
        features = convert_examples_to_features(examples, self.resolved.tokenizer, length,
                                                task.doc_stride, task.max_query_length,
                                                is_training)
        logging.info("%s: %d questions in %d windows of %d tokens", path, len(examples),
                     len(features), length)
        for feature in features[:_LOGGED_WINDOWS] if task.verbose_logging else []:
            example = examples[feature.example_index]
            target = ("" if feature.start_position is None else
                      f" target {feature.start_position}-{feature.end_position}"
                      f"{' (impossible)' if feature.is_impossible else ''}")
            logging.info("%s window %d (unique_id %d)%s: %s", example.qas_id,
                         feature.doc_span_index, feature.unique_id, target,
                         " ".join(feature.tokens))
        return examples, features

    def build_model(self) -> keras.Model:
        return self.pretrained(lambda: BertSpanModel(
            self.resolved.config, bilstm_units=self.task.bilstm_units, causal=self.task.causal))

    def loss(self) -> loop.LossFunction:
        return span_loss

    def answers(self, model: keras.Model) -> Answers:
        """The model's answers to `predict_file`'s questions, n-best lists and null odds."""
        task, data = self.task, self.data
        arrays = features_to_arrays(data.features)
        outputs = predict(model, arrays, self.training.predict_batch_size)
        results = [RawResult(int(unique_id), start, end) for unique_id, start, end
                   in zip(arrays["unique_ids"], outputs["start_logits"], outputs["end_logits"])]
        return compute_predictions(
            data.examples, data.features, results, task.n_best_size, task.max_answer_length,
            data.do_lower_case, task.version_2_with_negative, task.null_score_diff_threshold)

    def score(self, model: keras.Model) -> DevScores:
        """The official metrics against `predict_file`; the sweep compares the F1 (as a
        fraction). v2.0 thresholds at the task's value, as predictions.json was written."""
        task, (predictions, nbest, null_odds) = self.task, self.answers(model)
        dataset = load_json(task.predict_file, "predict_file")
        if task.version_2_with_negative:
            scores = dict(evaluate_v2(dataset, predictions, null_odds,
                                      na_prob_thresh=task.null_score_diff_threshold))
        else:
            try:
                scores = evaluate_v1(dataset, predictions)
            except ValueError as error:  # a v2.0 file: unanswerable questions have no answers
                raise FieldError("{0}: {1}; for SQuAD 2.0 pass {version_2_with_negative}",
                                 task.predict_file, error) from None
        return DevScores(scores, scores["f1"] / 100, (predictions, nbest, null_odds))

    def export(self, model: keras.Model, path: str) -> str:
        return export_span_model(model, self.resolved.tokenizer, self.training.max_seq_length,
                                 self.task, path)

    def write_predictions(self, model: keras.Model, dev: DevScores | None
                          ) -> tuple[dict[str, float], list[str]]:
        """predictions.json, nbest_predictions.json and (v2.0) null_odds.json."""
        if not (self.task.do_predict or self.task.do_eval):
            return {}, []
        output_dir = self.training.output_dir
        predictions, nbest, null_odds = dev.predictions if dev else self.answers(model)
        written = write_prediction_files(output_dir, predictions, nbest, null_odds)
        logging.info("Wrote answers to %d questions (%d of them empty) in %s", len(predictions),
                     sum(1 for text in predictions.values() if not text), output_dir)
        return {}, written


TASK = FineTuningTask(Squad)
