"""What an export reads: a model object, a `.keras` file or a model folder, as one thing.

A user who fine-tuned in Python holds a model object or the `.keras` file
it saved; a command-line run leaves a folder. Every export (Google, Hugging
Face, TF Hub, the SavedModels on raw text) starts from `export_source`,
which turns any of the three into the same `ExportSource`: the model, its
config, its vocabulary and casing. A folder whose checkpoint holds a
fine-tuned head (the original's `output_weights`, `ner/`, `cls/squad/`,
`multiple_choice/`, or a Hugging Face `BertFor...` class's) becomes that task
model, its `labels.txt` (or `id2label`) giving the label names and its
`model_settings.json` the rest (`causal`, `bilstm_units`, ...), so a run's
folder exports as the model object it was saved from does.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import keras
from absl import logging

from modeling.classifier import BertClassifier
from modeling.multiple_choice import BertMultipleChoice
from modeling.pretrainer import BertPretrainer
from modeling.span_model import BertSpanModel
from modeling.token_tagger import BertTokenTagger
from network.checkpoints import load_weights, read_checkpoint
from network.config import BertConfig
from network.model_folder import SETTINGS_FILE, check_source, model_record
from network.pretrained import load_config, load_task_model, load_tokenizer
from text.tokenization import FullTokenizer

# A fine-tuned head's weight, as the original scripts named it -> the model that has it, and
# whether the weight's rows are that model's `num_labels`.
_HEADS = {"output_weights": (BertClassifier, True), "ner/output_weights": (BertTokenTagger, True),
          "cls/squad/output_weights": (BertSpanModel, False),
          "multiple_choice/output_weights": (BertMultipleChoice, False)}


@dataclasses.dataclass
class ExportSource:
    """A model to export, whatever it came from."""

    model: keras.Model  # BertPretrainer, BertEncoder, a task model or a BertTextEmbedder
    config: BertConfig
    variables: dict  # Google name -> variable: what the model holds that the source filled
    vocabulary: Sequence[str] | None  # None: a model object or .keras file without a preprocessor
    do_lower_case: bool | None
    paths: list[str]  # files the export reads, which its output folder must not hold

    def tokenizer(self, vocab_file: str | os.PathLike) -> FullTokenizer:
        """The tokenizer, reading the vocabulary `write_vocabulary` wrote to `vocab_file`."""
        return FullTokenizer(os.fspath(vocab_file), do_lower_case=self.do_lower_case)

    def require_vocabulary(self, need: str) -> None:
        """Refuses a model that came without one; `need` names the export that requires it."""
        if self.vocabulary is None:
            raise ValueError(f"{type(self.model).__name__} has no preprocessor, so no "
                             f"vocabulary for {need}: build the model with "
                             "from_pretrained(..., sequence_length=N) before saving it")

    def write_vocabulary(self, path: str | os.PathLike, need: str) -> None:
        """Writes `vocab.txt`; `need` says which export requires it, for the refusal."""
        self.require_vocabulary(need)
        Path(path).write_text("".join(f"{token}\n" for token in self.vocabulary),
                              encoding="utf-8")


def source_paths(source: Any, argument: str = "source") -> list[str]:
    """The paths `source` reads from (none for a model object), for `check_export_folder`.

    Refuses, naming `argument`, a source that is neither a model nor a path.
    """
    if isinstance(source, keras.Model):
        return []
    check_source(source, argument)
    return [os.fspath(source)]


def is_model_or_file(source: Any) -> bool:
    """Whether `source` is a model object or the `.keras` file one was saved to, which keep
    the model's own settings, rather than a folder, checkpoint or name."""
    return isinstance(source, keras.Model) or (
        isinstance(source, (str, os.PathLike)) and os.fspath(source).endswith(".keras"))


def export_source(source: Any, do_lower_case: bool | None = None,
                  argument: str = "source") -> ExportSource:
    """`source` (a model object, a `.keras` file, or a folder, checkpoint or name) to export.

    Args:
      source: what the caller gave.
      do_lower_case: overrides the casing the source implies.
      argument: the argument's name, for messages.

    Raises:
      TypeError, ValueError: `source` names no model; each message names `argument`.
    """
    if do_lower_case is not None and not isinstance(do_lower_case, bool):
        raise ValueError(f"do_lower_case must be True, False or None, got {do_lower_case!r}")
    if isinstance(source, keras.Model):
        return _from_model(source, do_lower_case, [])
    check_source(source, argument)
    path = os.fspath(source)
    if path.endswith(".keras"):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{argument} {path!r}: no such .keras file")
        return _from_model(keras.saving.load_model(path), do_lower_case, [path])
    config = load_config(path)
    tokenizer = load_tokenizer(path, do_lower_case)
    vocabulary = [tokenizer.inv_vocab[index] for index in range(len(tokenizer.inv_vocab))]
    tensors = read_checkpoint(path).tensors
    saved = model_record(path)
    if any(name.startswith("bilstm/") for name in tensors) and (
            saved is None or "bilstm_units" not in saved.settings):
        raise ValueError(f"{argument} {path!r}: its model reads the encoder through a BiLSTM, "
                         f"but the folder does not say its bilstm_units ({SETTINGS_FILE}, "
                         "which folders written before it lack); export the model object or "
                         "its .keras file")
    head = next((name for name in _HEADS if name in tensors), None)
    if head is None:
        model = BertPretrainer(config)
        report = load_weights(model, path)
        logging.info("%s: %d tensors to export (%s format)", path, len(report.loaded),
                     report.format)
        if report.missing:  # a head the source lacks stays out rather than exported untrained
            logging.info("the source has no %s; they are not exported", ", ".join(report.missing))
        if report.unexpected:
            logging.warning("%d tensors of %s are not part of a pre-trained BERT and are not "
                            "exported: %s", len(report.unexpected), path,
                            ", ".join(report.unexpected))
        variables = {name: model.checkpoint_variables()[name] for name in report.loaded}
    else:
        task_class, counts_labels = _HEADS[head]
        kwargs = {"num_labels": int(tensors[head].shape[0])} if counts_labels else {}
        model = load_task_model(task_class, path, config=config, **kwargs)
        variables = model.checkpoint_variables()
    return ExportSource(model, config, variables, vocabulary, tokenizer.do_lower_case, [path])


def _from_model(model: keras.Model, do_lower_case: bool | None,
                paths: list[str]) -> ExportSource:
    serving_spec = getattr(model, "serving_spec", None)  # what each model of ours states
    if serving_spec is None:
        raise TypeError(f"source must be a model of this project (BertClassifier, "
                        f"BertTokenTagger, BertSpanModel, BertTextEmbedder, BertEncoder, ...), a "
                        f".keras file or a model folder, got {type(model).__name__}")
    spec = serving_spec()
    return ExportSource(model, model.config, model.checkpoint_variables(), spec.vocabulary,
                        spec.do_lower_case if do_lower_case is None else do_lower_case, paths)

