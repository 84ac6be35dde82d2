"""A model and its tokenizer from one folder, whoever wrote it.

Three kinds of folder hold a BERT: Google's releases (`bert_config.json`,
`vocab.txt`, `bert_model.ckpt`), Hugging Face's (`config.json`, `vocab.txt`,
`tokenizer_config.json`, `model.safetensors`) and this project's runs (a
pre-training or fine-tuning `--output_dir` with `bert_config.json` and
`vocab.txt`, or its `export/` folder, whose config and vocabulary sit one
level up). Which checkpoint a folder stands for is decided by
`network.checkpoints`, so these functions only find the config and the
vocabulary beside it and agree with the runners' `--init_checkpoint`. A
model name (`uncased_L-12_H-768_A-12`, `bert-base-uncased`, any Hugging
Face `org/name`) stands for its folder in the download cache
(`network.presets.resolve`); a local folder of that name comes first.

What a fine-tuned model's folder keeps besides (its label names, its
model's class and settings) is read and written by `network.model_folder`;
`load_task_model` builds the model it describes, so a left-to-right,
BiLSTM, windowed or multi-label model reloads as itself.

Casing matters as much as the weights: an uncased model fed cased pieces
sees mostly [UNK]. It comes from, in order, the caller, Hugging Face's
`tokenizer_config.json`, Google's folder names (`uncased_L-12_...`,
`cased_L-12_...`), and last the vocabulary itself, since lowercasing leaves
no capital letter in an uncased vocabulary.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
from pathlib import Path
from typing import Any, TypeVar

import keras

from network.checkpoints import CheckpointError, load_weights
from network.config import BertConfig, ConfigError
from network.model_folder import (CONFIG_FILES, SETTINGS_FILE, VOCAB_FILE, apply_model_record,
                                  candidate_folders, check_source, model_record)
from text.tokenization import FullTokenizer, load_vocab

_CONFIG_FIELDS = frozenset(field.name for field in dataclasses.fields(BertConfig))

ModelT = TypeVar("ModelT", bound=keras.Model)


def load_config(path: str | os.PathLike, **overrides: Any) -> BertConfig:
    """The BertConfig beside a checkpoint, with `overrides` (e.g. dropout) applied.

    Args:
      path: a model name, folder or checkpoint.
      **overrides: BertConfig fields to replace.

    Examples:

    >>> load_config("uncased_L-12_H-768_A-12", hidden_dropout_prob=0.2).hidden_size
    768
    """
    config = BertConfig.from_json_file(_find_beside(path, CONFIG_FILES, "config"))
    return config.replace(**overrides) if overrides else config


def load_task_model(model_class: type[ModelT], path: str | os.PathLike,
                    config: BertConfig | None = None, **kwargs: Any) -> ModelT:
    """Builds `model_class` (the encoder or any task model) and fills it from `path`.

    `kwargs` that name a BertConfig field override the folder's config
    (`hidden_dropout_prob=0.2`); the rest go to the model (`num_labels=2`,
    `dtype="mixed_bfloat16"`). Weights the checkpoint lacks, such as a new
    classifier, keep their initialization, as in fine-tuning; a checkpoint
    that fits none of the model's weights or whose shapes differ is an error.

    A fine-tuned folder's `labels.txt` gives `num_labels` when the caller
    gives none, and the model its `label_names`; its `model_settings.json`
    the saved model's settings (`causal`, `bilstm_units`, `multi_label`,
    ...; `network.model_folder.apply_model_record` says which a caller may
    override). A caller's other `num_labels` or class asks for a new head,
    which those names do not describe. A checkpoint lacking a weight of the
    model its folder says it holds is refused, naming the weights.

    Args:
      model_class: BertEncoder, BertPretrainer or a task model class.
      path: a model name, folder or checkpoint.
      config: the config to build with; None reads the one beside `path`.
      **kwargs: BertConfig fields to override and the model's arguments.

    Examples:

    >>> model = load_task_model(BertClassifier, "mrpc_output_dir")  # its labels.txt
    >>> model.label_names
    ['0', '1']
    """
    check_source(path)
    overrides = {key: kwargs.pop(key) for key in list(kwargs) if key in _CONFIG_FIELDS}
    if config is None:
        config = load_config(path, **overrides)
    elif overrides:
        config = config.replace(**overrides)
    saved = model_record(path)
    same_model = saved is not None and apply_model_record(model_class, saved, kwargs)
    labels = saved.labels if same_model else None
    parameters = inspect.signature(model_class.__init__).parameters
    if labels is not None and "label_names" in parameters:
        kwargs.setdefault("label_names", labels)
    model = model_class(config, **kwargs)
    report = load_weights(model, path)
    if same_model and saved.source.name == SETTINGS_FILE and report.missing:
        # The folder holds the whole model it was saved from; a weight left at its
        # initialization would give other outputs with no word.
        raise CheckpointError(f"{report.source}: {len(report.missing)} weights of the "
                              f"{saved.model} saved there are not in its checkpoint: "
                              f"{', '.join(report.missing)}")
    if labels is not None and "label_names" not in parameters:
        model.label_names = labels
    return model


class Pretrained:
    """`from_pretrained` for a model class: one loader for every source, as keras-hub's
    `from_preset`.

    The encoder, the pre-trainer and every task model load the same way, so
    each source works for all of them: a model name (Google's release or a
    Hugging Face id, downloaded once), a Google, Hugging Face or own folder,
    or a checkpoint path.
    """

    @classmethod
    def from_pretrained(cls: type[ModelT], source: str | os.PathLike, **kwargs: Any) -> ModelT:
        """This model built from the config in `source` and filled with its weights.

        Args:
          source: a model name, a folder or a checkpoint, as `--init_checkpoint`
            takes it.
          **kwargs: BertConfig fields to override (`hidden_dropout_prob=0.2`) and
            the model's own arguments (`dtype="mixed_bfloat16"`); see
            `load_task_model`.

        Examples:

        >>> encoder = BertEncoder.from_pretrained("uncased_L-12_H-768_A-12")
        >>> pretrainer = BertPretrainer.from_pretrained("bert-base-uncased")
        """
        return load_task_model(cls, source, **kwargs)


def load_tokenizer(path: str | os.PathLike, do_lower_case: bool | None = None) -> FullTokenizer:
    """The WordPiece tokenizer for the model in `path`, cased or uncased as it was trained.

    Args:
      path: a model name, folder or checkpoint.
      do_lower_case: True or False to override the folder's casing.

    Examples:

    >>> load_tokenizer("uncased_L-12_H-768_A-12").tokenize("A fine film!")
    ['a', 'fine', 'film', '!']
    """
    vocab_file = _find_beside(path, (VOCAB_FILE,), "vocabulary")
    if do_lower_case is None:
        do_lower_case = _casing(vocab_file)
    return FullTokenizer(str(vocab_file), do_lower_case=do_lower_case)


def model_files(path: str | os.PathLike) -> tuple[Path | None, Path | None, bool | None]:
    """(config file, vocabulary, lowercasing) of the model in `path`, None for what it lacks.

    The same files and casing `load_config` and `load_tokenizer` would use,
    for the runners, which take each from `--init_checkpoint` unless a flag
    names it.
    """
    vocab_file = _look_beside(path, (VOCAB_FILE,))
    return (_look_beside(path, CONFIG_FILES), vocab_file,
            None if vocab_file is None else _casing(vocab_file))


def _look_beside(path: str | os.PathLike, names: tuple[str, ...]) -> Path | None:
    for folder in candidate_folders(path):
        for name in names:
            if (folder / name).is_file():
                return folder / name
    return None


def _find_beside(path: str | os.PathLike, names: tuple[str, ...], what: str) -> Path:
    found = _look_beside(path, names)
    if found is None:
        folders = candidate_folders(path)
        raise ConfigError(f"{path}: no {what} file ({' or '.join(names)}) in "
                          f"{' or '.join(str(folder) for folder in folders)}")
    return found


def _casing(vocab_file: Path) -> bool:
    """Whether the model in `vocab_file`'s folder lowercases its input."""
    settings = vocab_file.parent / "tokenizer_config.json"
    if settings.is_file():
        try:
            values = json.loads(settings.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise ConfigError(f"{settings}: invalid JSON at line {error.lineno}: "
                              f"{error.msg}") from None
        if isinstance(values, dict) and isinstance(values.get("do_lower_case"), bool):
            return values["do_lower_case"]
    for folder in candidate_folders(vocab_file):
        name = folder.name.lower()
        if "uncased" in name:
            return True
        if "cased" in name:
            return False
    return not any(_has_capital(token) for token in load_vocab(str(vocab_file)))


def _has_capital(token: str) -> bool:
    """A capital letter outside the bracketed special tokens ([CLS], [unused0])."""
    if token.startswith("[") and token.endswith("]"):
        return False
    return any(character.isupper() for character in token)
