"""What a sentence-transformers folder says about turning token vectors into one vector.

A sentence-transformers model is a folder of modules run in order
(`modules.json`): a Transformer (here, a BERT whose files sit at the
module's `path`, usually the folder itself), a Pooling module
(`1_Pooling/config.json`: which of [CLS], max, mean and mean/sqrt(length)
pooling to concatenate), and often a Normalize module (L2 normalization,
no config). `sentence_bert_config.json` gives the Transformer's
`max_seq_length` and whether it lowercases text first.

This module reads those files only (no TensorFlow) and refuses what it
cannot reproduce exactly, a Dense module or a weighted-mean pooling, rather
than give vectors that differ from sentence-transformers' own without a word.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from network.config import ConfigError

# Pooling modes under sentence-transformers' names, in the order it concatenates them, with
# the boolean keys older configs give them by (newer ones list `pooling_mode`).
POOLING_KEYS = {"cls": "pooling_mode_cls_token", "max": "pooling_mode_max_tokens",
                "mean": "pooling_mode_mean_tokens",
                "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens"}
_UNSUPPORTED_POOLING = {"weightedmean": "pooling_mode_weightedmean_tokens",
                        "lasttoken": "pooling_mode_lasttoken"}
_MODULE_PREFIX = "sentence_transformers.models."


@dataclasses.dataclass(frozen=True)
class SentenceSettings:
    """The pooling, normalization and window of a sentence-transformers folder."""

    model_folder: Path  # where the Transformer module's BERT files are
    pooling: tuple[str, ...]  # modes of POOLING_KEYS, in the order their vectors are joined
    normalize: bool
    max_seq_length: int | None
    lowercases_text: bool  # the Transformer lowercases text before its tokenizer


def read_sentence_settings(folder: Path) -> SentenceSettings | None:
    """The settings of the sentence-transformers model in `folder`; None without `modules.json`.

    Args:
      folder: a local model folder.

    Raises:
      ConfigError: a file that is not valid JSON, a module order or module this
        project does not reproduce, or a pooling mode it does not implement.
    """
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return None
    modules = _json(modules_file)
    if not isinstance(modules, list) or not all(
            isinstance(module, dict) and isinstance(module.get("type"), str)
            for module in modules):
        raise ConfigError(f"{modules_file}: expected a list of modules, each with a \"type\"")
    kinds = [module["type"].removeprefix(_MODULE_PREFIX) for module in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise ConfigError(f"{modules_file}: modules {', '.join(kinds)}; BertTextEmbedder "
                          "reproduces Transformer, Pooling and an optional Normalize, in that "
                          "order")
    model_folder = folder / modules[0].get("path", "")
    pooling_file = folder / modules[1].get("path", "") / "config.json"
    if not pooling_file.is_file():
        raise ConfigError(f"{modules_file}: the Pooling module has no {pooling_file}")
    pooling = _pooling_modes(pooling_file, _json(pooling_file))
    transformer = _transformer_settings(model_folder)
    return SentenceSettings(model_folder=model_folder, pooling=pooling,
                            normalize=len(kinds) == 3,
                            max_seq_length=transformer.get("max_seq_length"),
                            lowercases_text=bool(transformer.get("do_lower_case", False)))


def _pooling_modes(path: Path, config: dict) -> tuple[str, ...]:
    """The modes a Pooling config turns on, as sentence-transformers reads it (old or new keys)."""
    if "pooling_mode" in config:
        listed = config["pooling_mode"]
        modes = (listed,) if isinstance(listed, str) else tuple(listed)
    else:
        every = {**POOLING_KEYS, **_UNSUPPORTED_POOLING}
        modes = tuple(mode for mode, key in every.items() if config.get(key)) or ("mean",)
    unknown = [mode for mode in modes if mode not in POOLING_KEYS]
    if unknown:
        raise ConfigError(f"{path}: pooling {', '.join(map(str, unknown))} is not implemented; "
                          f"BertTextEmbedder pools by {', '.join(POOLING_KEYS)}")
    return modes  # concatenated in this order, as sentence-transformers does


def _transformer_settings(model_folder: Path) -> dict:
    path = model_folder / "sentence_bert_config.json"
    if not path.is_file():
        return {}
    settings = _json(path)
    length = settings.get("max_seq_length")
    if length is not None and (not isinstance(length, int) or isinstance(length, bool)
                               or length < 3):
        raise ConfigError(f"{path}: max_seq_length must be an integer >= 3, got {length!r}")
    return settings


def _json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}: invalid JSON at line {error.lineno}: {error.msg}") from None
