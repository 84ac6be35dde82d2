"""Puts checkpoint tensors into a model's variables, by Google name, with shape checks.

Loading a pre-trained encoder into a fine-tuning model is the common case,
so tensors the model has no use for (the pre-training heads) and variables
the checkpoint lacks (a new classifier) are normal and only reported. What
is never normal is a tensor of the wrong shape: copying part of it, or
skipping it, would give a model that runs and quietly computes something
else, so that is an error naming the tensor and both shapes.
"""

from __future__ import annotations

import dataclasses
import os
import re

import numpy as np

from core.arguments import FieldError, FieldMessage
from network.checkpoints.readers import CheckpointError, read_checkpoint
from network.presets import resolve


@dataclasses.dataclass
class LoadReport:
    """Which Google names were loaded, which the model lacks in the file, and the rest."""

    source: str
    format: str
    loaded: list[str]
    missing: list[str]     # model variables the checkpoint does not hold
    unexpected: list[str]  # checkpoint tensors the model has no variable for
    skipped: list[str]     # optimizer state and buffers, ignored on purpose
    held_back: list[str] = dataclasses.field(default_factory=list)  # above `transfer_layers`

    def summary(self) -> str:
        lines = [f"loaded {len(self.loaded)} tensors from {self.source} ({self.format} format)"]
        for label, items in (("not in the checkpoint, left as initialized", self.missing),
                             ("in the checkpoint, not used by the model", self.unexpected)):
            if items:
                shown = ", ".join(items[:8]) + (f" and {len(items) - 8} more"
                                                if len(items) > 8 else "")
                lines.append(f"{len(items)} {label}: {shown}")
        if self.skipped:
            lines.append(f"{len(self.skipped)} optimizer/bookkeeping tensors skipped")
        if self.held_back:
            lines.append(f"{len(self.held_back)} tensors above the transferred blocks left "
                         "as initialized")
        return "\n".join(lines)


_BLOCK = re.compile(r"^bert/encoder/layer_(\d+)/")


def transferred(name: str, transfer_layers: int | None) -> bool:
    """Whether `transfer_layers` keeps `name`: the embeddings and blocks below it, not above.

    GPT's layers-transferred curve (its Figure 2) starts a model from the
    pre-trained embeddings and first N blocks. The pooler reads the last
    block, so it is transferred only with all of them; task heads are never
    in a pre-trained checkpoint's encoder.
    """
    if transfer_layers is None:
        return True
    block = _BLOCK.match(name)
    if block:
        return int(block.group(1)) < transfer_layers
    return not name.startswith("bert/pooler/")


def load_weights(model, path: str | os.PathLike,
                 transfer_layers: int | None = None) -> LoadReport:
    """Loads a Google, Hugging Face or own checkpoint into `model`.

    `model` is any model of this project (`checkpoint_variables()` lists its
    weights under Google's names). `transfer_layers=N` loads the embeddings
    and the first N blocks only (all N of the model's blocks: the pooler
    too). Raises CheckpointError when the file cannot be read, when a
    tensor's shape differs from the variable's, or when not a single weight
    of the model is in the file; ValueError when N exceeds the model's blocks.
    """
    # A model name (`uncased_L-12_H-768_A-12`) stands for its downloaded folder.
    checkpoint = read_checkpoint(path if "://" in os.fspath(path) else resolve(path))
    variables = model.checkpoint_variables()
    blocks = {int(match.group(1)) for name in variables if (match := _BLOCK.match(name))}
    if transfer_layers is not None and transfer_layers > len(blocks):
        raise FieldError("{transfer_layers}={0}, but the model has {1} Transformer blocks",
                         transfer_layers, len(blocks))
    if transfer_layers == len(blocks):
        transfer_layers = None  # every block: the pooler as well
    loaded, missing, held_back = [], [], []
    for name, variable in variables.items():
        if not transferred(name, transfer_layers):
            held_back.append(name)
            continue
        if name not in checkpoint.tensors:
            missing.append(name)
            continue
        value = checkpoint.tensors[name]
        if tuple(value.shape) != tuple(variable.shape):
            raise _shape_mismatch(checkpoint.source, name, value.shape, variable.shape)
        variable.assign(np.asarray(value, dtype=variable.dtype))
        loaded.append(name)
    if not loaded:
        raise CheckpointError(
            f"{checkpoint.source}: none of the model's {len(variables)} weights is in this "
            f"{checkpoint.format} checkpoint (it holds e.g. "
            f"{', '.join(sorted(checkpoint.tensors)[:3]) or 'nothing'}); is it a BERT checkpoint?")
    unexpected = sorted(set(checkpoint.tensors) - set(variables))
    return LoadReport(checkpoint.source, checkpoint.format, loaded, sorted(missing), unexpected,
                      checkpoint.skipped, sorted(held_back))


# The config field behind each axis of the tensors whose shapes the config sets directly.
_AXIS_FIELDS = {"bert/embeddings/word_embeddings": ("vocab_size", "hidden_size"),
                "bert/embeddings/position_embeddings": ("max_position_embeddings", "hidden_size"),
                "bert/embeddings/token_type_embeddings": ("type_vocab_size", "hidden_size"),
                "cls/predictions/output_bias": ("vocab_size",)}


class ConfigMismatch(FieldMessage, CheckpointError):
    """A tensor whose shape is not the one the model's config (`bert_config_file`) gives."""


def _shape_mismatch(source: str, name: str, found, expected) -> ConfigMismatch:
    """Names the tensor, both shapes, and where it can, the config field that differs.

    The word embeddings come first in a model, so a hidden-size mismatch
    surfaces there: the differing axis, not the tensor, tells which field.
    """
    found, expected = list(found), list(expected)
    message = "{0}: tensor {1} has shape {2}, the model expects {3}"
    fields = _AXIS_FIELDS.get(name)
    if fields and len(found) == len(expected) == len(fields):
        differing = [f"{field}={ours} in the config, {theirs} in the checkpoint"
                     for field, theirs, ours in zip(fields, found, expected) if theirs != ours]
        return ConfigMismatch(message + ": {4}; does {bert_config_file} describe it?", source,
                              name, found, expected, "; ".join(differing))
    return ConfigMismatch(message + "; does {bert_config_file} describe this checkpoint "
                          "(hidden_size, intermediate_size, num_hidden_layers)?", source, name,
                          found, expected)
