"""Writes a model's weights: this project's checkpoints, Google TF1 and Hugging Face files.

Own checkpoints are object-based (`tf.train.Checkpoint`), so a training run
can put the optimizer, the step and the input position beside the model and
resume from one file. The weights are the children of a `weights/named`
object, each named by its Google name, which lets any model class read them
back (see `readers`: the saver may store a value under another path that
reaches the same variable, such as the optimizer's).

The Google export is name-based, as TF1's Saver wrote it, so the original
repository's scripts can load it with `--init_checkpoint`; the Hugging Face
export is a folder that `transformers.BertForPreTraining.from_pretrained`
(or `BertModel`) reads. Each file is written under a temporary name and
moved into place complete, and no other file is touched: replacing a whole
folder, when that is safe, is `export.layouts`' job.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import tensorflow as tf

from core import atomic
from network.checkpoints import names
from network.config import BertConfig


class NamedWeights(tf.Module):
    """A model's variables under their Google names, as one trackable object."""

    def __init__(self, variables: dict):
        super().__init__(name="weights")
        self.named = dict(variables)


def training_checkpoint(model, **extra) -> tf.train.Checkpoint:
    """A `tf.train.Checkpoint` with the model's named weights plus `extra` objects.

    Pass the optimizer, a step counter or a dataset iterator as `extra` to
    save and restore them with the weights.
    """
    return tf.train.Checkpoint(weights=NamedWeights(model.checkpoint_variables()), **extra)


def save_checkpoint(model, prefix: str | os.PathLike) -> str:
    """Writes the model's weights in this project's format; returns the checkpoint path."""
    return training_checkpoint(model).write(os.fspath(prefix))


def export_google_checkpoint(model, prefix: str | os.PathLike) -> str:
    """Writes a TF1 name-based checkpoint (`PREFIX.index`, `PREFIX.data-*`) with Google names."""
    prefix = os.fspath(prefix)
    folder = os.path.dirname(os.path.abspath(prefix))
    os.makedirs(folder, exist_ok=True)
    variables = model.checkpoint_variables()
    ordered = sorted(variables)
    with atomic.temporary_folder(prefix) as staging:
        staged = os.path.join(staging, os.path.basename(prefix))
        tf.raw_ops.SaveV2(prefix=staged, tensor_names=ordered,
                          shape_and_slices=[""] * len(ordered),
                          tensors=[tf.convert_to_tensor(variables[name]) for name in ordered])
        written = sorted(os.listdir(staging))
        # The index names the data files, so it goes into place last.
        for file in sorted(written, key=lambda name: name.endswith(".index")):
            os.replace(os.path.join(staging, file), os.path.join(folder, file))
    return prefix


def export_huggingface(model, folder: str | os.PathLike, config: BertConfig) -> Path:
    """Writes `model.safetensors` and `config.json`, which Hugging Face's BERT classes load.

    `folder` is created if missing; each file appears whole, and nothing
    else in the folder is touched (whole export folders: `export.layouts`).
    """
    tensors = huggingface_tensors(model.checkpoint_variables())
    if "cls.seq_relationship.weight" in tensors:
        architecture = "BertForPreTraining"
    elif "cls.predictions.bias" in tensors:
        architecture = "BertForMaskedLM"
    else:
        architecture = "BertModel"
    return write_huggingface_folder(tensors, huggingface_config(config, architecture), folder)


def huggingface_tensors(variables: dict) -> dict[str, np.ndarray]:
    """Variables by Google name -> float32 arrays by Hugging Face name, in its orientation."""
    tensors = {}
    for google_name, variable in variables.items():
        hf_name, transposed = names.google_to_huggingface(google_name)
        value = np.asarray(variable.numpy(), dtype=np.float32)
        tensors[hf_name] = np.ascontiguousarray(value.T if transposed else value)
    return tensors


def huggingface_config(config: BertConfig, architecture: str) -> dict:
    """`config.json` of a Hugging Face BERT of `architecture` (e.g. "BertModel")."""
    hf_config = config.to_dict()
    if hf_config["hidden_act"] == "gelu_approximate":
        hf_config["hidden_act"] = "gelu_new"
    hf_config.update(model_type="bert", architectures=[architecture])
    return hf_config


def write_huggingface_folder(tensors: dict[str, np.ndarray], hf_config: dict,
                             folder: str | os.PathLike) -> Path:
    """Writes `model.safetensors` and `config.json` into `folder`, each file whole."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _save_safetensors(tensors, folder / "model.safetensors")
    atomic.write_atomically(folder / "config.json", json.dumps(hf_config, indent=2) + "\n")
    return folder


# How Rust's `std::io::Error` ends its message: `... (os error 28)`.
_RUST_ERRNO = re.compile(r"\(os error (\d+)\)")


def _save_safetensors(tensors: dict[str, np.ndarray], path: Path) -> None:
    """`safetensors.numpy.save_file`, atomic, with a failed write raised as the OSError it was.

    safetensors' writer is Rust and reports a full disk or a file-size limit
    as its own `SafetensorError`; as an OSError naming `path`, it is the
    one-line error every other writer's is (`core.faults`).
    """
    from safetensors import SafetensorError
    from safetensors.numpy import save_file

    with atomic.atomic_path(path) as temporary:
        try:
            save_file(tensors, temporary, metadata={"format": "pt"})
        except SafetensorError as error:
            code = _RUST_ERRNO.search(str(error))
            if code is None:
                raise
            number = int(code.group(1))
            raise OSError(number, os.strerror(number), os.fspath(path)) from error
