"""Sentence(-pair) classification, regression and multiple choice: GLUE, SWAG, your own TSV.

The hooks of `tasks.driver`, which runs the paper's sweep (Section 4.1): dev
is predicted once per run, and the best run's dev scores are the evaluation
results; a run near a dev set's majority class is warned about. Test
predictions are GLUE's submission files (SWAG's `id<TAB>prediction`).
"""

from __future__ import annotations

import dataclasses
import os

import keras
import numpy as np
from absl import logging

from core.arguments import FieldError, check_integer, check_number, check_threshold
from core.atomic import write_atomically
from core.task_names import canonical_key
from data_prep.datasets import glue, swag
from evaluation import glue as glue_metrics
from evaluation.degenerate_runs import majority_accuracy
from evaluation.multi_label import multi_label_scores
from export.serving import export_classifier
from modeling.classifier import BertClassifier
from modeling.labels import label_sets
from modeling.losses import (classification_loss, multi_label_loss, regression_loss,
                             weighted_classification_loss)
from modeling.multiple_choice import BertMultipleChoice
from tasks.batch_prediction import predict
from tasks.driver import DevScores, FineTuningSettings, FineTuningTask, TaskHooks
from training import loop
from training.class_weights import parse_class_weights, resolve_class_weights


@dataclasses.dataclass(frozen=True)
class ClassificationTask(FineTuningSettings):
    """Which task, where its files are, and the model's variant (what to do: the base class)."""

    task_name: str  # a GLUE task, swag, or tsv
    data_dir: str  # the task's files in their distributed layout
    causal: bool = False  # left-to-right model: causal attention, last-token classifier
    lm_aux_weight: float = 0.0  # GPT's auxiliary LM loss weight (with causal)
    both_orders: bool = False  # GPT's similarity input: (a, b) and (b, a) added (with causal)
    bilstm_units: int = 0  # a BiLSTM over the sequence classifies from its final states
    wnli_majority_class: bool = False  # submit WNLI's majority class, as the paper
    tsv_text_a_column: str | None = None
    tsv_text_b_column: str | None = None
    tsv_label_column: str | None = None
    tsv_labels: tuple[str, ...] | None = None  # default: the training file's labels
    tsv_has_header: bool = True
    # "balanced" or label:weight pairs (`training.class_weights`); weighs the training loss
    class_weights: str | None = None
    multi_label: bool = False  # tsv: the label column holds label sets (`evaluation.multi_label`)
    threshold: float = 0.5  # multi_label: a label is predicted above this probability
    tsv_label_delimiter: str | None = None  # multi_label: between a set's labels (default |)

    def __post_init__(self) -> None:
        for name in ("task_name", "data_dir"):
            if not getattr(self, name):
                raise FieldError(f"{{{name}}} is required")
        super().__post_init__()
        check_number("lm_aux_weight", self.lm_aux_weight, minimum=0)
        check_integer("bilstm_units", self.bilstm_units, minimum=0)
        swag_task = self.task_name.lower() == "swag"
        if self.bilstm_units and swag_task:
            raise FieldError("{bilstm_units} is for classification; SWAG has no BiLSTM head")
        if self.both_orders and not self.causal:
            raise FieldError("{both_orders} is GPT's similarity input for the left-to-right "
                             "model; pass {causal} too")
        if self.both_orders and swag_task:
            raise FieldError("{both_orders} is for text pairs; SWAG is multiple choice")
        self._check_multi_label()
        if self.class_weights is not None:
            parse_class_weights(self.class_weights)
            if swag_task:
                raise FieldError("{class_weights} weighs classes; SWAG is multiple choice")
            if not self.do_train:
                raise FieldError("{class_weights} weighs the training loss: pass {do_train} "
                                 "too")

    def _check_multi_label(self) -> None:
        check_threshold(self.threshold)
        if not self.multi_label:
            if self.threshold != 0.5:
                raise FieldError("{threshold}={0} applies to {multi_label}; a single-label "
                                 "classifier predicts its most probable label", self.threshold)
            if self.tsv_label_delimiter is not None:
                raise FieldError("{tsv_label_delimiter} separates the labels of a label set: "
                                 "pass {multi_label} too")
            return
        glue.check_label_delimiter(self.label_delimiter)
        if canonical_key(self.task_name) != "tsv":
            raise FieldError("{multi_label} reads label sets from your own data: pass "
                             "{task_name}=tsv with {tsv_label_column}, not {0}", self.task_name)
        if self.class_weights is not None:
            raise FieldError("{class_weights} weighs the classes of a single-label "
                             "classifier; with {multi_label} each label is a yes/no of its own")

    @property
    def label_delimiter(self) -> str | None:
        """Between a label set's labels in the label column; None for single labels."""
        if not self.multi_label:
            return None
        return "|" if self.tsv_label_delimiter is None else self.tsv_label_delimiter

    def stamp(self) -> dict[str, str]:
        """The settings a resumed training must share with the run it continues (the output
        folder's stamp, `core.run_folder`); none when not training."""
        return {"class_weights": self.class_weights or "none"} if self.do_train else {}


@dataclasses.dataclass
class ClassificationData:
    """A task's arrays, and the examples they came from (for submissions)."""

    name: str  # the GLUE name, or SWAG
    kind: str  # classification, multi_label, regression or multiple_choice
    labels: list[str] | None  # None for regression and multiple choice
    pair: bool  # two texts per example
    train: dict[str, np.ndarray] | None
    train_examples: list
    dev: dict[str, tuple[dict, list]]  # dev set name -> (arrays, examples)
    test: dict[str, tuple[dict, list]]  # submission file stem -> (arrays, examples)
    class_weights: list[float] | None = None  # in label order; None: unweighted


def _result_prefix(data: ClassificationData, dev_name: str) -> str:
    return "eval" if len(data.dev) == 1 else dev_name


class Classification(TaskHooks):
    """The driver's hooks (`tasks.driver`) for `ClassificationTask`."""

    task: ClassificationTask
    data: ClassificationData

    def read_data(self) -> ClassificationData:
        """The splits the actions need, converted to arrays."""
        task, tokenizer, max_seq_length = (self.task, self.resolved.tokenizer,
                                           self.training.max_seq_length)
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
            tsv_has_header=task.tsv_has_header, tsv_label_delimiter=task.label_delimiter)
        train = processor.train_examples(task.data_dir) if task.do_train else []
        dev = processor.dev_sets(task.data_dir) if task.do_eval else {}
        test = processor.test_sets(task.data_dir) if task.do_predict else {}
        labels = processor.labels  # known once a split is read (tsv takes them from train)
        convert = glue.convert_both_orders if task.both_orders else glue.convert_examples

        def arrays(examples: list, what: str) -> dict:
            try:
                converted = convert(examples, tokenizer, max_seq_length, labels,
                                    task.multi_label)
            except ValueError as error:
                raise FieldError("{task_name}={0}, {1}: {2}", task.task_name, what,
                                 error) from None
            logging.info("%s: %d examples, %d of them truncated to %d tokens", what,
                         len(examples), converted.num_truncated, max_seq_length)
            return converted.features

        sample = next(iter([*train, *[e for v in dev.values() for e in v]]), None)
        train_arrays = arrays(train, "train") if train else None
        return ClassificationData(
            name=processor.name, kind=("regression" if labels is None else
                                       "multi_label" if task.multi_label else "classification"),
            labels=labels, pair=sample is not None and sample.text_b is not None,
            train=train_arrays, train_examples=train,
            class_weights=self._class_weights(labels, train_arrays),
            dev={k: (arrays(v, k), v) for k, v in dev.items()},
            test={k: (arrays(v, k), v) for k, v in test.items()})

    def _class_weights(self, labels: list[str] | None, train: dict | None
                       ) -> list[float] | None:
        """The task's `class_weights` in label order, logged; None when it gives none."""
        spec = self.task.class_weights
        if spec is None or train is None:
            return None
        if labels is None:
            raise FieldError("{class_weights} weighs classes; {task_name}={0} is a regression",
                             self.task.task_name)
        weights = resolve_class_weights(spec, labels, train["label_ids"])
        logging.info("Class weights (%s) over %d training examples: %s", spec,
                     len(train["label_ids"]), ", ".join(
                         f"{label}={weight:.4g}" for label, weight in zip(labels, weights)))
        return weights

    def build_model(self) -> keras.Model:
        task, data, config = self.task, self.data, self.resolved.config
        if data.kind == "multiple_choice":
            return self.pretrained(lambda: BertMultipleChoice(config, causal=task.causal))
        return self.pretrained(lambda: BertClassifier(
            config, num_labels=len(data.labels or [None]), causal=task.causal,
            lm_aux_weight=task.lm_aux_weight, both_orders=task.both_orders,
            bilstm_units=task.bilstm_units, multi_label=task.multi_label,
            threshold=task.threshold))

    def loss(self) -> loop.LossFunction:
        if self.data.kind == "regression":
            return regression_loss
        if self.data.kind == "multi_label":
            return multi_label_loss
        if self.data.class_weights is not None:
            return weighted_classification_loss(self.data.class_weights)
        return classification_loss

    def score(self, model: keras.Model) -> DevScores:
        """Dev metrics, prefixed by the dev set's name when there are several (MNLI); the
        sweep compares the mean of their GLUE scores."""
        data, results = self.data, {}
        for name, (arrays, _) in data.dev.items():
            predictions = predict(model, arrays, self.training.eval_batch_size)
            if data.kind == "multi_label":
                metrics = multi_label_scores(predictions, arrays["label_ids"], data.labels,
                                             self.task.threshold)
                results.update({f"{_result_prefix(data, name)}_{key}": value
                                for key, value in metrics.items()})
                continue
            results.update(glue_metrics.evaluation_results(
                "swag" if data.kind == "multiple_choice" else data.name, predictions,
                arrays["label_ids"], _result_prefix(data, name)))
        return DevScores(results, float(np.mean(
            [value for key, value in results.items() if key.endswith("_score")])))

    def majorities(self) -> dict[str, float]:
        data = self.data
        if data.kind in ("regression", "multi_label"):
            return {}
        return {f"{_result_prefix(data, name)}_accuracy": majority_accuracy(arrays["label_ids"])
                for name, (arrays, _) in data.dev.items()}

    def export(self, model: keras.Model, path: str) -> str | None:
        if self.data.kind == "multiple_choice":
            return None
        return export_classifier(model, self.resolved.tokenizer, self.training.max_seq_length,
                                 self.data.labels, self.data.pair, path)

    def write_predictions(self, model: keras.Model, dev: DevScores | None
                          ) -> tuple[dict[str, float], list[str]]:
        """`submission/<stem>.tsv`: GLUE's server layout, or SWAG's `id<TAB>prediction`."""
        data, folder, written = self.data, os.path.join(self.training.output_dir, "submission"), []
        for stem, (arrays, examples) in data.test.items():
            predictions = predict(model, arrays, self.training.predict_batch_size)
            if data.kind == "multi_label":
                sets = label_sets(1.0 / (1.0 + np.exp(-predictions)), self.task.threshold,
                                  data.labels)
                rows = ["index\tprediction"] + [
                    f"{example.guid}\t{self.task.label_delimiter.join(labels)}"
                    for example, labels in zip(examples, sets)]
                write_atomically(os.path.join(folder, f"{stem}.tsv"), "\n".join(rows) + "\n")
            elif data.kind == "multiple_choice":
                rows = ["id\tprediction"] + [f"{example.guid}\t{int(choice)}" for example, choice
                                             in zip(examples, predictions.argmax(-1))]
                write_atomically(os.path.join(folder, f"{stem}.tsv"), "\n".join(rows) + "\n")
            else:
                majority = (glue.majority_class(data.train_examples)
                            if stem == "WNLI" and self.task.wnli_majority_class else None)
                glue.write_submission(folder, stem, predictions, data.labels,
                                      indices=[example.guid for example in examples],
                                      majority_label=majority)
            logging.info("Wrote %s/%s.tsv (%d rows)", folder, stem, len(examples))
            written.append(os.path.join(folder, f"{stem}.tsv"))
        return {}, written


TASK = FineTuningTask(Classification)
