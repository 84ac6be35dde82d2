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

import numpy as np

from modeling.checkpoints.readers import CheckpointError, read_checkpoint


@dataclasses.dataclass
class LoadReport:
    """Which Google names were loaded, which the model lacks in the file, and the rest."""

    source: str
    format: str
    loaded: list[str]
    missing: list[str]     # model variables the checkpoint does not hold
    unexpected: list[str]  # checkpoint tensors the model has no variable for
    skipped: list[str]     # optimizer state and buffers, ignored on purpose

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
        return "\n".join(lines)


def load_weights(model, path: str | os.PathLike) -> LoadReport:
    """Loads a Google, Hugging Face or own checkpoint into `model`.

    `model` is any model of this project (`checkpoint_variables()` lists its
    weights under Google's names). Raises CheckpointError when the file
    cannot be read, when a tensor's shape differs from the variable's, or
    when not a single weight of the model is in the file.
    """
    checkpoint = read_checkpoint(path)
    variables = model.checkpoint_variables()
    loaded, missing = [], []
    for name, variable in variables.items():
        if name not in checkpoint.tensors:
            missing.append(name)
            continue
        value = checkpoint.tensors[name]
        if tuple(value.shape) != tuple(variable.shape):
            raise CheckpointError(_shape_message(checkpoint.source, name, value.shape,
                                                 variable.shape))
        variable.assign(np.asarray(value, dtype=variable.dtype))
        loaded.append(name)
    if not loaded:
        raise CheckpointError(
            f"{checkpoint.source}: none of the model's {len(variables)} weights is in this "
            f"{checkpoint.format} checkpoint (it holds e.g. "
            f"{', '.join(sorted(checkpoint.tensors)[:3]) or 'nothing'}); is it a BERT checkpoint?")
    unexpected = sorted(set(checkpoint.tensors) - set(variables))
    return LoadReport(checkpoint.source, checkpoint.format, loaded, sorted(missing), unexpected,
                      checkpoint.skipped)


def _shape_message(source: str, name: str, found, expected) -> str:
    message = (f"{source}: tensor {name} has shape {list(found)}, the model expects "
               f"{list(expected)}")
    if name.endswith("word_embeddings") or name.endswith("output_bias"):
        message += "; does the config's vocab_size match the checkpoint's vocabulary?"
    elif name.endswith("position_embeddings"):
        message += "; max_position_embeddings differs from the checkpoint's"
    else:
        message += "; does --bert_config_file describe this checkpoint?"
    return message
