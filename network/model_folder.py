"""What a model's folder holds, written (`write_model_folder`) and read in this one module.

The config (`bert_config.json`, Google's and this project's; `config.json`,
Hugging Face's) and the vocabulary (`vocab.txt`) sit beside the checkpoint,
or one level up from a run's `export/` folder; a model name stands for its
folder in the download cache (`network.presets.resolve`), a local folder of
that name first.

A fine-tuned model's folder also keeps its label names (`labels.txt`, one
per line, beside the config): a reload needs no `num_labels` and gives names,
not bare class indices. What the weights compute also depends on the task
model's own settings: a left-to-right encoder (`causal`) read
bidirectionally, or a head read without its BiLSTM, gives other logits from
the same weights, and `long_texts`, `window_stride` or `both_orders` change
how a text reaches them. So a fine-tuned folder also holds
`model_settings.json`: the model's class and every constructor setting in
its Keras config except the BERT config, the preprocessor, the label names
(`labels.txt`) and Keras's own name, dtype and trainable; a new setting of
a task model is kept without a change here. Each file is written whole
(`core.atomic`); `network.pretrained.load_task_model` hands them back, to
the encoder as to every task model (a causal encoder reloads causal).

Older folders, without the settings, still load as they did: the class's
defaults. A Hugging Face `BertFor...` folder says the
same of its head in `config.json`: `architectures`, `id2label` (names, unless
they are Hugging Face's default `LABEL_0`, `LABEL_1`, ...) and `problem_type`.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from absl import logging

from core.arguments import check_flag, check_integer, check_number, check_threshold
from core.atomic import write_atomically
from network.checkpoints.writing import save_checkpoint
from network.checkpoints.names import HF_TASK_HEADS
from network.config import ConfigError
from network.presets import resolve
from text.text_windows import TRUNCATE, WINDOWS

GOOGLE_CONFIG_FILE, HF_CONFIG_FILE = "bert_config.json", "config.json"
CONFIG_FILES = (GOOGLE_CONFIG_FILE, HF_CONFIG_FILE)
VOCAB_FILE = "vocab.txt"
GOOGLE_CHECKPOINT = "bert_model.ckpt"  # weights under Google's names, as its release has them
TASK_CHECKPOINT = "model.ckpt"  # a fine-tuned task model's weights, this project's names
LABELS_FILE = "labels.txt"
SETTINGS_FILE = "model_settings.json"
MODEL_KEY = "model"
# Keras config entries that are no setting of the trained model, or live in files of their own.
_NOT_SETTINGS = frozenset({"name", "trainable", "dtype", "config", "preprocessor", "label_names"})
# What the encoder's (and BiLSTM's) weights were trained with: a model of any class built on
# the folder's weights takes them, not only the head that was saved.
_BODY = ("causal", "bilstm_units")
# What the saved head's weights were trained on: a reload of that head that contradicts one
# would compute other logits from them, so it is refused rather than obeyed.
_WEIGHT_BOUND = ("causal", "bilstm_units", "both_orders")
# A setting that means something only with another's saved value; not taken when the caller
# changes that one (multi_label=False has no threshold).
_DEPENDS_ON = {"threshold": "multi_label", "window_stride": "long_texts",
               "lm_aux_weight": "causal", "both_orders": "causal"}
_CHECKS = {
    "causal": lambda value: check_flag("causal", value, ValueError),
    "both_orders": lambda value: check_flag("both_orders", value, ValueError),
    "multi_label": lambda value: check_flag("multi_label", value, ValueError),
    "num_labels": lambda value: check_integer("num_labels", value, error=ValueError),
    "bilstm_units": lambda value: check_integer("bilstm_units", value, 0, ValueError),
    "lm_aux_weight": lambda value: check_number("lm_aux_weight", value, 0.0, error=ValueError),
    "threshold": check_threshold,
    "window_stride": lambda value: None if value is None else check_integer(
        "window_stride", value, error=ValueError),
}


@dataclasses.dataclass
class ModelRecord:
    """What a folder says about the fine-tuned model in it."""

    model: str | None  # the class it was saved from; None: not said (an older folder)
    labels: list[str] | None  # a name per output, when the folder names them
    settings: dict[str, Any]  # constructor settings, `num_labels` among them when known
    source: Path  # the file that said so, for messages


def check_source(path: Any, argument: str = "path") -> None:
    """Refuses what cannot name a model: not a str or path, or empty.

    An empty string would otherwise stand for the current folder, and None
    or a number fail inside `os.fspath` with no word of which argument.

    Args:
      path: what the caller gave as the model's folder, checkpoint or name.
      argument: the argument's name, for the message.
    """
    text = os.fspath(path) if isinstance(path, os.PathLike) else path
    if not isinstance(text, str):
        raise TypeError(f"{argument} must be a model folder, checkpoint or model name "
                        f"(a str or os.PathLike), got {path!r}")
    if not text.strip():
        raise ValueError(f"{argument} is empty ({path!r}): give a model folder, checkpoint or "
                         "model name")


def candidate_folders(path: str | os.PathLike) -> list[Path]:
    """The folder a checkpoint path or model name stands for, then its parent (`export/`'s)."""
    check_source(path)
    path = resolve(path)
    folder = path if path.is_dir() else path.parent
    return [folder, folder.parent]


def model_record(path: str | os.PathLike) -> ModelRecord | None:
    """What the folder of `path` keeps about its fine-tuned model: class, labels and settings
    (this module); None for a folder that says nothing of one (a pre-trained
    model's).

    Args:
      path: a model name, folder or checkpoint.
    """
    for folder in candidate_folders(path):
        if (folder / LABELS_FILE).is_file() or (folder / SETTINGS_FILE).is_file():
            saved = read_model_settings(folder) or ModelRecord(None, None, {},
                                                              folder / LABELS_FILE)
            saved.labels = _read_labels(folder / LABELS_FILE)
            return saved
        hf_config = folder / HF_CONFIG_FILE
        if hf_config.is_file() and not (folder / GOOGLE_CONFIG_FILE).is_file():
            head = read_huggingface_head(hf_config)
            if head is not None:
                return head
    return None


def load_labels(path: str | os.PathLike) -> list[str] | None:
    """The label names saved with a fine-tuned model, None when it has none.

    They are this project's `labels.txt` beside the checkpoint, or a Hugging
    Face `BertFor...` folder's `id2label` (none for its default `LABEL_0`, ...).

    Args:
      path: the model's folder or checkpoint.

    Examples:

    >>> load_labels("mnli_output_dir")
    ['contradiction', 'entailment', 'neutral']
    """
    saved = model_record(path)
    return None if saved is None else saved.labels


def _read_labels(file: Path) -> list[str] | None:
    if not file.is_file():
        return None
    labels = file.read_text(encoding="utf-8").splitlines()
    if not labels or not all(label.strip() for label in labels):
        raise ConfigError(f"{file}: expected one non-empty label per line")
    return labels


def write_model_folder(folder: str | os.PathLike, *, task_model: Any = None,
                       weights: tuple[str, Callable[[str], object]] | None = None,
                       config: Any = None, vocabulary: str | Callable[[str], object] | None = None,
                       labels: Sequence[str] | None = None) -> list[str]:
    """Writes the files of a model folder that are given; returns the paths written, in order.

    Every writer of a folder that `network.pretrained` reads back as a model
    goes through here, so its file names and what a fine-tuned folder must
    keep are written once. A fine-tuned `task_model` leaves its weights
    (`model.ckpt`, this project's names) and its class and settings
    (`model_settings.json`); without `labels`, an earlier run's `labels.txt`,
    which would describe another head, is removed.

    Args:
      folder: the model's folder.
      task_model: a fine-tuned task model (`BertClassifier`, ...), saved whole.
      weights: other weights than a task model's: (file name or checkpoint
        prefix, a function writing them at that path).
      config: the BERT config (`network.config.BertConfig`), as `bert_config.json`.
      vocabulary: a vocabulary file to copy to `vocab.txt`, or a function writing it there.
      labels: a name per output, as `labels.txt`.

    Examples:

    >>> write_model_folder("out", task_model=model, config=config, vocabulary="vocab.txt",
    ...                    labels=["negative", "positive"])
    """
    if task_model is not None:
        if weights is not None:
            raise ValueError("give task_model (saved whole) or weights, not both")
        weights = (TASK_CHECKPOINT, lambda path: save_checkpoint(task_model, path))
    written = []
    if weights is not None:
        written.append(os.path.join(folder, weights[0]))
        weights[1](written[-1])
    if config is not None:
        written.append(os.path.join(folder, GOOGLE_CONFIG_FILE))
        config.to_json_file(written[-1])
    if vocabulary is not None:
        written.append(os.path.join(folder, VOCAB_FILE))
        if callable(vocabulary):
            vocabulary(written[-1])
        else:
            shutil.copyfile(vocabulary, written[-1])
    if task_model is not None:
        written.append(str(_save_model_settings(folder, _model_settings(task_model))))
    if labels:
        written.append(str(_save_labels(folder, labels)))
    elif task_model is not None and os.path.exists(os.path.join(folder, LABELS_FILE)):
        os.remove(os.path.join(folder, LABELS_FILE))
    return written


def _save_labels(folder: str | os.PathLike, labels: Sequence[str]) -> Path:
    """Writes `labels.txt` (one per line, atomically) so that reloads get names back."""
    bad = [label for label in labels if not label.strip() or "\n" in label or "\r" in label]
    if not labels or bad:
        raise ValueError(f"label names must be non-empty single lines, got {labels!r}")
    path = Path(folder) / LABELS_FILE
    write_atomically(path, "".join(f"{label}\n" for label in labels))
    return path


def _model_settings(model: Any) -> dict[str, Any]:
    """`model`'s class and the settings its folder must keep (see the module), for a task
    model (`BertClassifier`, `BertTokenTagger`, ...)."""
    config = model.get_config()
    return {MODEL_KEY: type(model).__name__,
            **{name: value for name, value in config.items() if name not in _NOT_SETTINGS}}


def _save_model_settings(folder: str | os.PathLike, settings: dict[str, Any]) -> Path:
    """Writes `settings` (from `_model_settings`) to the folder's `model_settings.json`, whole."""
    path = Path(folder) / SETTINGS_FILE
    write_atomically(path, json.dumps(settings, indent=2, sort_keys=True) + "\n")
    return path


def read_model_settings(folder: Path) -> ModelRecord | None:
    """The settings `folder` keeps (`model_settings.json`), checked; None when it keeps none. Labels are left to the caller (`labels.txt`).

    Raises ConfigError naming the file for one that is not what this module writes.
    """
    path = folder / SETTINGS_FILE
    if not path.is_file():
        return None
    settings = _read_json(path)
    if not isinstance(settings, dict) or not isinstance(settings.get(MODEL_KEY), str):
        raise ConfigError(f"{path}: expected an object with the model's class under "
                          f"{MODEL_KEY!r} and its settings, got {settings!r}")
    model = settings.pop(MODEL_KEY)
    return ModelRecord(model, None, _checked(path, settings), path)


def read_huggingface_head(config_file: Path) -> ModelRecord | None:
    """What a Hugging Face `config.json` says of a `BertFor...` head; None for another class.

    `id2label` gives the outputs and their names (none for the default
    `LABEL_0`, `LABEL_1`, ...), `problem_type` a multi-label head; a
    regression has one output.
    """
    values = _read_json(config_file)
    architectures = values.get("architectures") if isinstance(values, dict) else None
    if not isinstance(architectures, list) or not architectures or (
            architectures[0] not in HF_TASK_HEADS):
        return None
    settings, labels = {}, None
    id2label = values.get("id2label")
    if id2label is not None:
        count = len(id2label) if isinstance(id2label, dict) else 0
        if not count or set(id2label) != {str(index) for index in range(count)} or not all(
                isinstance(name, str) and name.strip() for name in id2label.values()):
            raise ConfigError(f"{config_file}: id2label must map \"0\" .. \"N-1\" to non-empty "
                              f"names, got {id2label!r}")
        names = [id2label[str(index)] for index in range(count)]
        settings["num_labels"] = count
        if names != [f"LABEL_{index}" for index in range(count)]:
            labels = names
    problem = values.get("problem_type")
    if problem == "multi_label_classification":
        settings["multi_label"] = True
    elif problem == "regression" and settings.get("num_labels", 1) != 1:
        raise ConfigError(f"{config_file}: a regression (problem_type) with "
                          f"{settings['num_labels']} outputs; a BertClassifier's has one score")
    elif problem not in (None, "single_label_classification", "regression"):
        raise ConfigError(f"{config_file}: problem_type must be single_label_classification, "
                          f"multi_label_classification or regression, got {problem!r}")
    return ModelRecord(HF_TASK_HEADS[architectures[0]][2], labels, settings, config_file)


def apply_model_record(model_class: type, saved: ModelRecord, kwargs: dict) -> bool:
    """Fills `kwargs` (the caller's, for `model_class`) with what `saved` keeps; returns
    whether the model built is the saved one, head and all (its labels then describe it).

    The saved head is rebuilt when the caller asks for the class it was
    saved from (any class, for an older folder that does not say) with its
    number of outputs: `num_labels` comes from the folder unless given. A
    caller's value wins over a saved one, except one the head's weights
    were trained with (`causal`, `bilstm_units`, `both_orders`): that is
    refused naming both. Another class or `num_labels` is a new head, which
    takes only what the encoder was trained with (`causal`, `bilstm_units`).

    Raises:
      ValueError: a contradiction as above; a new head of a class that needs
        `num_labels` without one.
    """
    accepted = _parameters(model_class)
    settings = dict(saved.settings)
    count = settings.pop("num_labels", None)
    if saved.labels is not None:
        if count is not None and count != len(saved.labels):
            raise ConfigError(f"{saved.source}: num_labels={count}, but the folder names "
                              f"{len(saved.labels)} labels")
        count = len(saved.labels)
    same_class = saved.model in (None, model_class.__name__)
    if "num_labels" in accepted:
        if kwargs.get("num_labels") is None and count is not None:
            if not same_class:
                raise ValueError(f"{saved.source.parent} holds a {saved.model}; give num_labels "
                                 f"for a new {model_class.__name__} head on its encoder")
            kwargs["num_labels"] = count
        same_head = same_class and count is not None and kwargs.get("num_labels") == count
    else:
        same_head = saved.model == model_class.__name__
    for name, value in settings.items():
        if not (same_head or name in _BODY):
            continue
        if name not in accepted:
            if value:  # a body setting the class cannot take: its weights load, read otherwise
                logging.warning("%s: the model there was trained with %s=%r, which %s does not "
                                "take; only its weights are loaded", saved.source, name, value,
                                model_class.__name__)
            continue
        parent = _DEPENDS_ON.get(name)
        if parent in kwargs and kwargs[parent] != settings.get(parent):
            continue
        if name in kwargs and kwargs[name] != value:
            if same_head and name in _WEIGHT_BOUND:
                raise ValueError(
                    f"{name}={kwargs[name]!r} contradicts {saved.source}: {name}={value!r}, "
                    f"which the saved {saved.model or model_class.__name__}'s weights were "
                    f"trained with; leave {name} out to reload that model, or give another "
                    "num_labels for a new head")
            continue
        kwargs.setdefault(name, value)
    return same_head


def _parameters(model_class: type) -> set[str]:
    """The constructor arguments `model_class` takes, its bases' (through **kwargs) included."""
    names = set()
    for klass in model_class.__mro__:
        if "__init__" in vars(klass):
            names.update(inspect.signature(klass.__init__).parameters)
    return names


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: invalid JSON ({error})") from None


def _checked(path: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` with each value this module knows checked; ConfigError names the file."""
    try:
        for name, check in _CHECKS.items():
            if name in settings:
                settings[name] = check(settings[name])
        if "long_texts" in settings:
            check_window_settings(settings["long_texts"], settings.get("window_stride"))
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{path}: {error}") from None
    return settings


def check_window_settings(long_texts: str, window_stride: int | None) -> int | None:
    """Refuses a `long_texts` other than "truncate" or "windows", and a stride without windows."""
    if long_texts not in (TRUNCATE, WINDOWS):
        raise ValueError(f"long_texts must be {TRUNCATE!r} (keep each text's first "
                         f"sub-tokens) or {WINDOWS!r} (read it whole through overlapping "
                         f"windows), got {long_texts!r}")
    if window_stride is None:
        return None
    if long_texts != WINDOWS:
        raise ValueError(f"window_stride={window_stride!r} needs long_texts={WINDOWS!r}: "
                         f"with {long_texts!r} there are no windows")
    return check_integer("window_stride", window_stride)
