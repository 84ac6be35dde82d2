"""BERT model configuration, read from Google's or Hugging Face's JSON files.

Google's `bert_config.json` and Hugging Face's `config.json` name the same
hyperparameters the same way, with three differences handled here: Hugging
Face adds `layer_norm_eps` and bookkeeping keys, and spells the tanh GELU
`gelu_new` / `gelu_pytorch_tanh`. Both spell the exact (erf) GELU `gelu`;
note that the original TensorFlow code computed the tanh approximation even
for `gelu`, so use `gelu_approximate` to reproduce its numbers bit for bit.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
from typing import Any

from core.arguments import FieldError, check_integer, check_number, is_integer
from core.atomic import atomic_open

ACTIVATIONS = ("gelu", "gelu_approximate", "relu")
# Hugging Face's names for the tanh approximation.
_ACTIVATION_ALIASES = {"gelu_new": "gelu_approximate", "gelu_pytorch_tanh": "gelu_approximate",
                       "gelu_fast": "gelu_approximate"}
_REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "intermediate_size")
_POSITIVE_INTS = _REQUIRED + ("max_position_embeddings", "type_vocab_size")
# Keys in Google's multilingual/Chinese configs that describe nothing we build;
# named so that the near-miss check below does not take them for typos.
_GOOGLE_EXTRA_KEYS = {"directionality", "pooler_fc_size", "pooler_num_attention_heads",
                      "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type"}


class ConfigError(ValueError):
    """A configuration that cannot describe a BERT model; the message says why."""


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """Hyperparameters of a BERT encoder, with Google's field names.

    Args:
      vocab_size: WordPiece vocabulary size.
      hidden_size: width of every hidden vector (H).
      num_hidden_layers: Transformer blocks (L).
      num_attention_heads: heads per block (A); must divide `hidden_size`.
      intermediate_size: width of the feed-forward layer (4H in the paper).
      hidden_act: the feed-forward activation ("gelu" is the exact erf GELU).
      hidden_dropout_prob: dropout on embeddings and block outputs.
      attention_probs_dropout_prob: dropout on attention probabilities.
      max_position_embeddings: the longest sequence the model can read.
      type_vocab_size: segment types (2: sentence A and B).
      initializer_range: standard deviation of the truncated-normal init.
      layer_norm_eps: LayerNorm's epsilon.

    Examples:

    >>> config = BertConfig(vocab_size=30522, hidden_size=256, num_hidden_layers=4,
    ...                     num_attention_heads=4, intermediate_size=1024)
    >>> config.replace(hidden_dropout_prob=0.2).hidden_dropout_prob
    0.2
    """

    vocab_size: int
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12

    def __post_init__(self):
        for name in _POSITIVE_INTS:
            check_integer(name, getattr(self, name), error=ConfigError)
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size ({self.hidden_size}) is not divisible by num_attention_heads "
                f"({self.num_attention_heads})")
        if self.hidden_act not in ACTIVATIONS:
            raise ConfigError(f"unknown hidden_act {self.hidden_act!r}; expected one of "
                              f"{', '.join(ACTIVATIONS + tuple(_ACTIVATION_ALIASES))}")
        # NaN and infinity fail too: a JSON file may spell them, and NaN compares false.
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            check_number(name, getattr(self, name), 0.0, 1.0, below=True, error=ConfigError)
        for name in ("initializer_range", "layer_norm_eps"):
            check_number(name, getattr(self, name), 0.0, above=True, error=ConfigError)

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, values: dict[str, Any], source: str = "config") -> "BertConfig":
        """Builds a config from Google or Hugging Face keys; `source` names it in errors.

        Keys that are not BERT hyperparameters (Hugging Face's `architectures`,
        `pad_token_id`, ...) are ignored, since both libraries add bookkeeping
        that changes nothing we build. A key that is a near-miss of a field name
        (`layer_norm_epsilon`) is an error: silently keeping the default there
        would build a different network than the file describes.
        """
        values = dict(values)
        missing = [key for key in _REQUIRED if key not in values]
        if missing:
            raise ConfigError(f"{source}: missing required field(s) {', '.join(missing)}")
        model_type = values.get("model_type", "bert")
        if model_type != "bert":
            raise ConfigError(f"{source}: model_type={model_type!r} is not a BERT model")
        position_type = values.get("position_embedding_type", "absolute")
        if position_type != "absolute":
            raise ConfigError(f"{source}: position_embedding_type={position_type!r} is not "
                              "supported; BERT uses absolute position embeddings")
        activation = values.get("hidden_act", "gelu")
        if isinstance(activation, str):
            values["hidden_act"] = _ACTIVATION_ALIASES.get(activation, activation)
        fields = [field.name for field in dataclasses.fields(cls)]
        for key in sorted(set(values) - set(fields) - _GOOGLE_EXTRA_KEYS):
            near = difflib.get_close_matches(key, fields, n=1, cutoff=0.8)
            if near:
                raise ConfigError(f"{source}: unknown field {key!r}; did you mean {near[0]!r}?")
        try:
            return cls(**{key: value for key, value in values.items() if key in fields})
        except ConfigError as error:
            raise ConfigError(f"{source}: {error}") from None

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> "BertConfig":
        """Reads Google's `bert_config.json` or Hugging Face's `config.json`."""
        path = os.fspath(path)
        try:
            with open(path, encoding="utf-8") as reader:
                values = json.load(reader)
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {path}") from None
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(f"cannot read config file {path}: {error}") from None
        except json.JSONDecodeError as error:
            raise ConfigError(f"{path}: invalid JSON at line {error.lineno}: {error.msg}") from None
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: expected a JSON object, got {type(values).__name__}")
        return cls.from_dict(values, source=path)

    def check_sequence_length(self, length: Any, argument: str = "sequence_length",
                              source: str | None = None) -> int:
        """`length` as an int, if packed rows of that many positions fit this model.

        A row needs 3 positions at least ([CLS], a token, [SEP]) and at most
        `max_position_embeddings`: past it, positions have no embedding. Every
        reader of a length (runners, preprocessors, exports) checks it here,
        before anything is allocated for it.

        Args:
          length: positions per packed row.
          argument: the argument or settings field that gave `length`, named in the
            error (a FieldError: a command line whose flag it is shows `--argument`).
          source: where this config was read from, named in the error when given.
        """
        if not is_integer(length) or not 3 <= length <= self.max_position_embeddings:
            place = " of {1}" if source else ""
            raise FieldError(f"{{{argument}}} must be an integer from 3 to the model's "
                             f"max_position_embeddings ({self.max_position_embeddings}){place}, "
                             "got {0!r}", length, source)
        return int(length)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json_file(self, path: str | os.PathLike) -> None:
        """Writes Google's field names (plus `layer_norm_eps`), atomically."""
        with atomic_open(path) as writer:
            json.dump(self.to_dict(), writer, indent=2, sort_keys=True)
            writer.write("\n")

    def replace(self, **changes: Any) -> "BertConfig":
        return dataclasses.replace(self, **changes)

    @classmethod
    def preset(cls, name: str, vocab_size: int = 30522) -> "BertConfig":
        """The paper's sizes: `base` (L12/H768), `large` (L24/H1024) and the small
        family `L{2,4,6,8,10,12}_H{128,256,512,768}` with A = H/64 and 4H feed-forward."""
        sizes = {"base": (12, 768), "large": (24, 1024)}
        match = re.fullmatch(r"L(\d+)_H(\d+)", name)
        if name in sizes:
            layers, hidden = sizes[name]
        elif match and int(match[1]) in (2, 4, 6, 8, 10, 12) and \
                int(match[2]) in (128, 256, 512, 768):
            layers, hidden = int(match[1]), int(match[2])
        else:
            raise ConfigError(f"unknown preset {name!r}; expected base, large or "
                              "L{2,4,6,8,10,12}_H{128,256,512,768}")
        return cls(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                   num_attention_heads=hidden // 64, intermediate_size=4 * hidden)
