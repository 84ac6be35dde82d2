"""Where a task's model comes from, and the one rule for what each task needs of it.

A run names its model as the original runners did: `--init_checkpoint`
(a checkpoint, its folder or a model name), `--bert_config_file`,
`--vocab_file` and the casing. Any of the last three left unnamed is taken
from the checkpoint's folder, as `modeling.load_config` / `load_tokenizer`
would find it, so a Google, Hugging Face or own folder configures a run by
itself. `resolve_model_files` does that once for every task, then checks
what the task needs (`ModelNeeds`) before any work starts: a task that
tokenizes needs the vocabulary the model was trained with, one that reads a
frozen encoder needs its weights, and pre-training from scratch needs only
a config.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from absl import logging

from core.arguments import FieldError, FieldFileNotFoundError, FieldOSError, check_not_blank
from network import pretrained
from network.config import BertConfig, ConfigError
from text.tokenization import FullTokenizer, load_vocab


@dataclasses.dataclass(frozen=True)
class ModelFiles:
    """The model a run starts from, as named; unnamed files come from `init_checkpoint`'s folder."""

    bert_config_file: str | None = None  # Google bert_config.json or Hugging Face config.json
    vocab_file: str | None = None  # WordPiece vocabulary (needed to tokenize text)
    do_lower_case: bool | None = None  # None: as the checkpoint's model was trained, else True
    init_checkpoint: str | None = None  # Google, Hugging Face or own checkpoint; None: random
    # Fine-tuning: transfer the embeddings and only the first N blocks (None: all of them).
    transfer_layers: int | None = None

    def __post_init__(self) -> None:
        for name in ("bert_config_file", "vocab_file", "init_checkpoint"):
            check_not_blank(name, getattr(self, name))
        if self.transfer_layers is not None:
            if self.transfer_layers < 0:
                raise FieldError("{transfer_layers} must be 0 or more, got {0}",
                                 self.transfer_layers)
            if not self.init_checkpoint:
                raise FieldError("{transfer_layers} needs {init_checkpoint}: it picks which "
                                 "of its layers are transferred")


@dataclasses.dataclass(frozen=True)
class ModelNeeds:
    """What a task cannot start without, beyond the config every task reads."""

    vocabulary: bool  # it tokenizes: the vocabulary must fill the config's vocab_size exactly
    weights: bool  # it reads a frozen encoder: the whole of init_checkpoint


# Pre-training writes a given vocabulary beside its checkpoints; the table may be padded past it.
PRETRAINING = ModelNeeds(vocabulary=False, weights=False)
FINE_TUNING = ModelNeeds(vocabulary=True, weights=False)  # no checkpoint: random start, warned
FROZEN_ENCODER = ModelNeeds(vocabulary=True, weights=True)  # features of random weights: noise


@dataclasses.dataclass(frozen=True)
class ResolvedModel:
    """The model's files, every one found and checked, and its config."""

    files: ModelFiles  # each path filled in; do_lower_case decided
    config: BertConfig

    @functools.cached_property
    def tokenizer(self) -> FullTokenizer:
        """Built on first use: it is TensorFlow work, which must wait for the strategy."""
        if not self.files.vocab_file:
            raise FieldError("{vocab_file} is required to tokenize text")
        return FullTokenizer(self.files.vocab_file, do_lower_case=self.files.do_lower_case)


def resolve_model_files(model_files: ModelFiles, needs: ModelNeeds,
                        max_seq_length: int) -> ResolvedModel:
    """Fills in the files no flag named, then refuses a model the task cannot run on.

    Reads only the config and the vocabulary, no TensorFlow, so it runs
    before the strategy is made and before the output folder is claimed.
    """
    files = _filled_from_checkpoint_folder(model_files)
    beside = " (or an {init_checkpoint} whose folder holds it)"
    if not files.bert_config_file:
        raise FieldError("{bert_config_file} is required" + beside)
    if needs.vocabulary and not files.vocab_file:
        raise FieldError("{vocab_file} is required" + beside)
    if needs.weights and not files.init_checkpoint:
        raise FieldError("{init_checkpoint} is required: features of a random encoder are noise")
    if needs.weights and files.transfer_layers is not None:
        raise FieldError("{transfer_layers} picks the blocks a fine-tuned model starts from; a "
                         "frozen encoder is read whole")
    try:
        config = BertConfig.from_json_file(files.bert_config_file)
    except ConfigError as error:
        raise FieldError("{bert_config_file}: {0}", error) from None
    config.check_sequence_length(max_seq_length, "max_seq_length", files.bert_config_file)
    if files.vocab_file:
        _check_vocabulary_size(files, config, exact=needs.vocabulary)
    return ResolvedModel(files, config)


def _check_vocabulary_size(files: ModelFiles, config: BertConfig, exact: bool) -> None:
    """More tokens than embedding rows index past the table; fewer, for a task that
    tokenizes, mean the vocabulary of another model."""
    try:
        tokens = len(load_vocab(files.vocab_file))
    except FileNotFoundError as error:
        raise FieldFileNotFoundError("{vocab_file}: {0}", error) from None
    except OSError as error:  # a folder, a file that cannot be read
        raise FieldOSError("{vocab_file}: {0}", error) from None
    if exact and tokens != config.vocab_size:
        raise ValueError(f"{files.vocab_file} holds {tokens} tokens but "
                         f"{files.bert_config_file} says vocab_size={config.vocab_size}")
    if tokens > config.vocab_size:
        raise ValueError(f"{files.vocab_file} holds {tokens} tokens, more than "
                         f"vocab_size={config.vocab_size} of {files.bert_config_file}")


def _filled_from_checkpoint_folder(model_files: ModelFiles) -> ModelFiles:
    """The files and casing no flag named, from `init_checkpoint`'s folder; logged as taken."""
    files, source = model_files, model_files.init_checkpoint
    complete = files.bert_config_file and files.vocab_file and files.do_lower_case is not None
    if not source or complete:
        return dataclasses.replace(files, do_lower_case=files.do_lower_case is not False)
    found_config, found_vocab, found_casing = _files_in(source, needed=not files.bert_config_file)
    taken = {}
    if not files.bert_config_file and found_config:
        taken["bert_config_file"] = str(found_config)
    if not files.vocab_file and found_vocab:
        taken["vocab_file"] = str(found_vocab)
    if files.do_lower_case is None and found_casing is not None:
        taken["do_lower_case"] = found_casing
    if taken:
        logging.info("From init_checkpoint=%s: %s", source, " ".join(
            f"{name}={str(value).lower() if isinstance(value, bool) else value}"
            for name, value in taken.items()))
    files = dataclasses.replace(files, **taken)
    return dataclasses.replace(files, do_lower_case=files.do_lower_case is not False)


def _files_in(source: str, needed: bool) -> tuple[Path | None, Path | None, bool | None]:
    """The folder's files, or nothing when the config is named by a flag and the folder fails.

    With the config named by a flag, a checkpoint that is not there yet must
    not stop the run before its flags are checked: loading it reports that,
    naming the path, and a missing vocabulary is reported as a required flag.
    """
    try:
        return pretrained.model_files(source)
    except (ConfigError, OSError):
        if needed:
            raise
        return None, None, None
