"""GLUE task files -> examples -> fixed-length features, and test predictions -> submission files.

Every runner that fine-tunes a sentence or sentence-pair classifier goes
through this module: `get_processor` reads a task's files in the GLUE
distribution's own layout (`glue_tasks` holds the per-file table and the
row reader) or a user's TSV data, `convert_examples` packs examples for the
encoder, and `write_submission` writes test predictions as the GLUE server
expects them. The original repository copied four processor classes into
each script; here one table-driven processor serves every task and runner.

A few QQP training rows are broken across lines in the distribution; they
are skipped, as other tools skip them, listed in
`TaskProcessor.skipped_rows` and reported in a warning. Everywhere else a
malformed row is an error naming `file:line`, and so are a label outside
the task's label set, a missing file (with the layout expected) and a file
without examples: a fine-tuning run on silently partial data would report
numbers that cannot be compared with anyone else's.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
from typing import NamedTuple, Sequence

import numpy as np

from core.arguments import FieldError
from core.task_names import canonical_key
from data_prep.datasets import glue_tasks
from data_prep.datasets.glue_tasks import Column, InputExample, SplitFile, TaskSpec
from text.sentence_pairs import pack_ids

__all__ = ["ConvertedExamples", "InputExample", "TaskProcessor", "check_label_delimiter",
           "convert_both_orders", "convert_examples", "get_processor", "majority_class",
           "write_submission"]

class TaskProcessor:
    """Reads one task's splits from a data folder in its distribution layout."""

    def __init__(self, spec: TaskSpec, labels_from_train: bool = False):
        self.spec = spec
        self._labels = list(spec.labels) if spec.labels is not None else None
        self._labels_from_train = labels_from_train
        self.skipped_rows: dict[str, list[int]] = {}  # file -> line numbers of skipped rows

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def is_regression(self) -> bool:
        return self.spec.labels is None and not self._labels_from_train

    @property
    def labels(self) -> list[str] | None:
        """The label strings in id order; None for regression (STS-B)."""
        if self._labels is None and self._labels_from_train:
            raise RuntimeError(f"the {self.name} task takes its labels from its training data: "
                               "call train_examples(data_dir) first, or give the label list")
        return self._labels

    def train_examples(self, data_dir: str) -> list[InputExample]:
        examples = self._read(data_dir, "train", self.spec.train,
                              skip_short_rows=self.spec.skip_short_train_rows)
        if self._labels is None and self._labels_from_train:
            self._labels = sorted({label for example in examples
                                   for label in _label_set(example.label)})
        return examples

    def dev_sets(self, data_dir: str) -> dict[str, list[InputExample]]:
        """Labelled evaluation sets by name: "dev", or MNLI's "dev_matched" and "dev_mismatched"."""
        self._ensure_labels(data_dir)
        return {name: self._read(data_dir, name, split_file)
                for name, split_file in self.spec.dev.items()}

    def test_sets(self, data_dir: str) -> dict[str, list[InputExample]]:
        """Unlabelled test sets by submission file stem; guids are GLUE's `index` values.

        MNLI's include "AX" when the diagnostic set is found (next to MNLI's
        files or in GLUE's `diagnostic` folder), since GLUE scores it with the
        MNLI model's predictions.
        """
        self._ensure_labels(data_dir)
        sets = {stem: self._read(data_dir, "test", split_file)
                for stem, split_file in self.spec.test.items()}
        return {stem: examples for stem, examples in sets.items() if examples is not None}

    def _ensure_labels(self, data_dir: str) -> None:
        if self._labels is None and self._labels_from_train:
            self.train_examples(data_dir)

    def _read(self, data_dir: str, split: str, split_file: SplitFile,
              skip_short_rows: bool = False) -> list[InputExample] | None:
        opened = glue_tasks.open_first(data_dir, split_file)
        if opened is None:
            if split_file.optional:
                return None
            candidates = " or ".join(glue_tasks.join_path(data_dir, relative)
                                     for relative in split_file.paths)
            raise FileNotFoundError(f"{candidates}: no such file; expected "
                                    f"{glue_tasks.layout_description(self.spec)}")
        path, lines = opened
        examples, skipped = glue_tasks.parse_rows(path, lines, split, split_file, self._labels,
                                                  self.is_regression, skip_short_rows)
        if skipped:
            self.skipped_rows[path] = skipped
            logging.warning("%s: skipped %d rows with too few columns (lines %s%s)", path,
                            len(skipped), ", ".join(map(str, skipped[:10])),
                            ", ..." if len(skipped) > 10 else "")
        if not examples:
            raise ValueError(f"{path}: holds no examples")
        logging.info("%s: read %d examples, skipped %d rows", path, len(examples), len(skipped))
        return examples


def get_processor(task_name: str, *, tsv_text_a_column: Column | None = None,
                  tsv_text_b_column: Column | None = None,
                  tsv_label_column: Column | None = None,
                  tsv_labels: Sequence[str] | str | None = None,
                  tsv_has_header: bool = True,
                  tsv_label_delimiter: str | None = None) -> TaskProcessor:
    """The processor for a GLUE task (any case; "sst2", "stsb" accepted) or "tsv" (user data).

    For "tsv", `<data_dir>/train.tsv`, `dev.tsv` and `test.tsv` hold the text
    column(s) and, in train and dev, a label column; columns are header names
    or 0-based positions (digit strings count as positions when no header
    has that name). Without `tsv_text_b_column` the task is single-text.
    Without `tsv_labels` (a list or a comma-separated string), the labels are
    the distinct training labels, sorted. A `tsv_label_delimiter` makes the
    label column a label set (multi-label): labels separated by it, an
    empty cell for none.
    """
    key = canonical_key(task_name)
    if key == "tsv":
        return _tsv_processor(tsv_text_a_column, tsv_text_b_column, tsv_label_column,
                              tsv_labels, tsv_has_header, tsv_label_delimiter)
    if key not in glue_tasks.TASKS:
        known = ", ".join(spec.name for spec in glue_tasks.TASKS.values())
        raise ValueError(f"unknown task {task_name!r}; known tasks: {known}, tsv")
    return TaskProcessor(glue_tasks.TASKS[key])


def _tsv_processor(text_a: Column | None, text_b: Column | None, label: Column | None,
                   labels: Sequence[str] | str | None, has_header: bool,
                   label_delimiter: str | None) -> TaskProcessor:
    if text_a is None or label is None:
        raise ValueError("the tsv task needs the text column and the label column "
                         "(tsv_text_a_column, tsv_label_column)")
    columns = [text_a, text_b, label]
    if not has_header:
        try:
            columns = [None if column is None else int(column) for column in columns]
        except ValueError:
            raise ValueError(f"without a header, tsv columns are 0-based positions, got "
                             f"{[c for c in columns if c is not None]}") from None
    if isinstance(labels, str):
        labels = [name.strip() for name in labels.split(",") if name.strip()]
    if labels is not None and len(set(labels)) != len(labels):
        raise ValueError(f"the tsv label list repeats a label: {list(labels)}")
    text_a, text_b, label = columns
    if label_delimiter is not None:
        check_label_delimiter(label_delimiter)
    train = SplitFile(("train.tsv",), text_a, text_b, label, has_header=has_header,
                      label_delimiter=label_delimiter)
    spec = TaskSpec(
        name="TSV", labels=tuple(labels) if labels else None, train=train,
        dev={"dev": dataclasses.replace(train, paths=("dev.tsv",))},
        test={"test": dataclasses.replace(train, paths=("test.tsv",), label=None)})
    return TaskProcessor(spec, labels_from_train=not labels)


def check_label_delimiter(delimiter: str) -> str:
    """`delimiter` if it can separate a label set's labels in a TSV cell: visible, no tab."""
    if not isinstance(delimiter, str) or not delimiter or delimiter.isspace() or "\t" in delimiter:
        raise FieldError("{tsv_label_delimiter} must be visible characters other than a tab, "
                         "got {0!r}", delimiter)
    return delimiter


def _label_set(label: str | tuple[str, ...]) -> tuple[str, ...]:
    """A multi-label example's labels, or a single-label example's one."""
    return label if isinstance(label, tuple) else (label,)


class ConvertedExamples(NamedTuple):
    """`features`: int32 `input_ids`, `input_mask`, `segment_ids` [N, S] and `label_ids` [N]
    (int32, float32 for regression, or float32 multi-hot [N, K] for label sets);
    `num_truncated`: examples that lost tokens."""

    features: dict[str, np.ndarray]
    num_truncated: int


def convert_examples(examples: Sequence[InputExample], tokenizer, max_seq_length: int,
                     labels: Sequence[str] | None,
                     multi_label: bool = False) -> ConvertedExamples:
    """Packs examples as `[CLS] a [SEP] (b [SEP])`, pairs truncated longest-first.

    `labels` None means regression (float labels); `multi_label` reads each
    example's label set as a multi-hot row over `labels`. Test examples
    (label None) get label id 0 / 0.0 (an empty set). Unpack as `features,
    num_truncated = ...`.
    """
    if not examples:
        raise ValueError("no examples to convert")
    tokens_a = tokenizer.tokenize_many([example.text_a for example in examples])
    paired = [index for index, example in enumerate(examples) if example.text_b is not None]
    tokens_b: list[list[str] | None] = [None] * len(examples)
    for index, tokens in zip(paired, tokenizer.tokenize_many([examples[i].text_b
                                                              for i in paired])):
        tokens_b[index] = tokens
    label_index = None if labels is None else {label: i for i, label in enumerate(labels)}
    features = pack_ids([tokenizer.convert_tokens_to_ids(tokens) for tokens in tokens_a],
                        [None if tokens is None else tokenizer.convert_tokens_to_ids(tokens)
                         for tokens in tokens_b],
                        max_seq_length, tokenizer.cls_id, tokenizer.sep_id)
    features["label_ids"] = (np.zeros((len(examples), len(labels)), np.float32) if multi_label
                             else np.zeros(len(examples),
                                           np.float32 if labels is None else np.int32))
    num_truncated = 0
    for i, example in enumerate(examples):
        wanted = len(tokens_a[i]) + 2 + (len(tokens_b[i]) + 1 if tokens_b[i] else 0)
        num_truncated += wanted > max_seq_length
        if example.label is None:
            continue
        if multi_label:
            unknown = [label for label in example.label if label not in label_index]
            if unknown:
                raise ValueError(f"example {example.guid}: label {unknown[0]!r} is not one of "
                                 f"{list(labels)}")
            features["label_ids"][i, [label_index[label] for label in example.label]] = 1.0
        elif label_index is None:
            features["label_ids"][i] = float(example.label)
        elif example.label in label_index:
            features["label_ids"][i] = label_index[example.label]
        else:
            raise ValueError(f"example {example.guid}: label {example.label!r} is not one of "
                             f"{list(labels)}")
    return ConvertedExamples(features, num_truncated)


def convert_both_orders(examples: Sequence[InputExample], tokenizer, max_seq_length: int,
                        labels: Sequence[str] | None,
                        multi_label: bool = False) -> ConvertedExamples:
    """Each pair packed as (a, b) and as (b, a): encoder inputs [N, 2, S], `label_ids` [N].

    GPT's input for similarity tasks: a left-to-right model reads a pair in
    one order only, and similarity has none, so both are encoded and their
    last-token vectors added. `num_truncated` counts examples, not orders.
    """
    single = [example.guid for example in examples if example.text_b is None]
    if single:
        raise ValueError(f"both orders need text pairs; {len(single)} example(s) have one "
                         f"text, the first {single[0]!r}")
    forward = convert_examples(examples, tokenizer, max_seq_length, labels, multi_label)
    backward = convert_examples([dataclasses.replace(example, text_a=example.text_b,
                                                     text_b=example.text_a)
                                 for example in examples], tokenizer, max_seq_length, labels,
                                multi_label)
    features = {key: np.stack([values, backward.features[key]], axis=1)
                for key, values in forward.features.items() if key != "label_ids"}
    features["label_ids"] = forward.features["label_ids"]
    return ConvertedExamples(features, forward.num_truncated)


def majority_class(examples: Sequence[InputExample]) -> str:
    """The most frequent label (ties: the first in sorted order).

    WNLI's train and dev sets are adversarial (GLUE's FAQ: the same sentence
    recurs with the opposite label), and the GLUE paper found no model above
    the most-frequent-class baseline (65.1 on test), so the BERT paper
    submitted the majority class for WNLI instead of a fine-tuned model.
    """
    counts = collections.Counter(example.label for example in examples
                                 if example.label is not None)
    if not counts:
        raise ValueError("no labelled examples to take the majority class from")
    return max(sorted(counts), key=counts.__getitem__)


def write_submission(path: str, task_file_stem: str, predictions: Sequence,
                     labels: Sequence[str] | None, *, indices: Sequence[str] | None = None,
                     majority_label: str | None = None) -> str:
    """Writes `index<TAB>prediction` rows as the GLUE server reads them; returns the file path.

    `path` is the file when it ends in ".tsv", else a folder receiving
    `<task_file_stem>.tsv`. `predictions` are label ids [N] or scores
    [N, K] (argmax taken) for classification, written as label strings;
    for regression (`labels` None) floats clipped to STS-B's [0, 5] range.
    `indices` (default 0..N-1) should be the test examples' guids.
    `majority_label` writes that label on every row (WNLI, see
    `majority_class`). The file is written under a temporary name and
    renamed, so an interrupted run never leaves a truncated submission.
    """
    import tensorflow as tf  # tf.io.gfile also writes to gs:// output folders

    predictions = np.asarray(predictions)
    if predictions.ndim == 2 and (labels is not None or predictions.shape[1] == 1):
        predictions = predictions.argmax(-1) if labels is not None else predictions[:, 0]
    if predictions.ndim != 1 or len(predictions) == 0:
        raise ValueError(f"{task_file_stem}: predictions must be a non-empty [N] or [N, K] "
                         f"array, got shape {predictions.shape}")
    indices = [str(i) for i in (range(len(predictions)) if indices is None else indices)]
    if len(indices) != len(predictions):
        raise ValueError(f"{task_file_stem}: {len(predictions)} predictions for "
                         f"{len(indices)} indices")
    if labels is None:
        values = [f"{value:.3f}" for value in np.clip(predictions.astype(np.float64), 0.0, 5.0)]
    elif majority_label is not None:
        if majority_label not in labels:
            raise ValueError(f"majority label {majority_label!r} is not one of {list(labels)}")
        values = [majority_label] * len(predictions)
    else:
        ids = predictions.astype(np.int64)
        if ids.min() < 0 or ids.max() >= len(labels):
            raise ValueError(f"{task_file_stem}: label ids outside 0..{len(labels) - 1}")
        values = [labels[i] for i in ids]
    target = str(path)
    if not target.endswith(".tsv"):
        target = os.path.join(target, f"{task_file_stem}.tsv")
    tf.io.gfile.makedirs(os.path.dirname(target) or ".")
    temporary = f"{target}.tmp-{os.getpid()}"
    with tf.io.gfile.GFile(temporary, "w") as handle:
        handle.write("".join(["index\tprediction\n",
                              *(f"{index}\t{value}\n" for index, value in zip(indices, values))]))
    tf.io.gfile.rename(temporary, target, overwrite=True)
    return target
