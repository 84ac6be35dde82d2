"""Reads any supported checkpoint into {Google name: array}.

Three formats reach `--init_checkpoint`:

- Google's TF1 checkpoints (`bert_model.ckpt` prefix, name-based, optimizer
  slots `adam_m`/`adam_v` beside the weights of training checkpoints);
- Hugging Face BERT: a folder with `model.safetensors` (or a sharded
  `model.safetensors.index.json`), or a `.safetensors` file;
- this project's own checkpoints, object-based `tf.train.Checkpoint`s whose
  model weights sit under `weights/` keyed by their Google names, so they
  translate back without knowing which model class wrote them.

PyTorch `.bin` files are refused with a hint rather than read: unpickling
them needs torch, which the runtime does not depend on.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import tensorflow as tf

from modeling.checkpoints import names

OWN_WEIGHTS_PREFIX = "weights/named/"
_OWN_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or does not fit the model; names the file."""


@dataclasses.dataclass
class CheckpointTensors:
    """Tensors by Google name and shape, with what was deliberately not read."""

    source: str
    format: str
    tensors: dict[str, np.ndarray]
    skipped: list[str]


def read_checkpoint(path: str | os.PathLike) -> CheckpointTensors:
    """Detects the format of `path` and reads its model weights."""
    path = str(path)
    if os.path.isdir(path):
        return _read_huggingface_folder(Path(path))
    if path.endswith(".safetensors"):
        if not os.path.exists(path):
            raise CheckpointError(f"{path}: no such file")
        return _read_safetensors([Path(path)], path)
    if path.endswith((".bin", ".pt", ".pth")):
        raise CheckpointError(f"{path}: PyTorch pickles are not read; save the model with "
                              "safe_serialization=True (model.safetensors) and pass that")
    if _is_tf_checkpoint(path):
        return _read_tf_checkpoint(path)
    latest = tf.train.latest_checkpoint(path) if tf.io.gfile.isdir(path) else None
    if latest:
        return _read_tf_checkpoint(latest)
    raise CheckpointError(
        f"{path}: not a checkpoint: expected a TF checkpoint prefix (PREFIX.index beside "
        "it), a Hugging Face folder, or a .safetensors file")


def _is_tf_checkpoint(prefix: str) -> bool:
    return tf.io.gfile.exists(prefix + ".index")


def _read_tf_checkpoint(prefix: str) -> CheckpointTensors:
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as error:
        raise CheckpointError(f"{prefix}: unreadable TF checkpoint: {error}") from None
    keys = reader.get_variable_to_shape_map()
    if _OBJECT_GRAPH_KEY in keys:
        return _read_own(prefix, reader, keys)
    tensors, skipped = {}, []
    for key in keys:
        if names.is_training_state(key):
            skipped.append(key)
        else:
            tensors[key] = reader.get_tensor(key)
    return CheckpointTensors(prefix, "google", tensors, sorted(skipped))


def _read_own(prefix: str, reader, keys) -> CheckpointTensors:
    tensors, skipped = {}, []
    for key in keys:
        if key.startswith(OWN_WEIGHTS_PREFIX) and key.endswith(_OWN_SUFFIX):
            escaped = key[len(OWN_WEIGHTS_PREFIX):-len(_OWN_SUFFIX)]
            tensors[names.unescape_object_name(escaped)] = reader.get_tensor(key)
        elif key != _OBJECT_GRAPH_KEY:
            skipped.append(key)  # optimizer slots, step counters, input position
    if not tensors:
        raise CheckpointError(f"{prefix}: an object-based checkpoint without model weights "
                              f"under {OWN_WEIGHTS_PREFIX!r}; it was not written by this project")
    return CheckpointTensors(prefix, "own", tensors, sorted(skipped))


def _read_huggingface_folder(folder: Path) -> CheckpointTensors:
    single = folder / "model.safetensors"
    index = folder / "model.safetensors.index.json"
    if single.exists():
        return _read_safetensors([single], str(folder))
    if index.exists():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (ValueError, KeyError) as error:
            raise CheckpointError(f"{index}: not a safetensors index ({error})") from None
        return _read_safetensors(sorted({folder / shard for shard in weight_map.values()}),
                                 str(folder))
    if (folder / "pytorch_model.bin").exists():
        raise CheckpointError(f"{folder}: holds only pytorch_model.bin; re-save it with "
                              "safe_serialization=True to get model.safetensors")
    if tf.train.latest_checkpoint(str(folder)):
        return _read_tf_checkpoint(tf.train.latest_checkpoint(str(folder)))
    raise CheckpointError(f"{folder}: a folder without model.safetensors or a TF checkpoint")


def _read_safetensors(files: list[Path], source: str) -> CheckpointTensors:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    by_hf_name: dict[str, np.ndarray] = {}
    for file in files:
        try:
            by_hf_name.update(load_file(str(file)))
        except (SafetensorError, OSError) as error:
            raise CheckpointError(f"{file}: unreadable safetensors file: {error}") from None
    tensors, skipped = {}, []
    for hf_name, array in by_hf_name.items():
        normalized = names.normalize_huggingface_name(hf_name)
        if names.HF_SKIPPED.search(normalized):
            skipped.append(hf_name)
            continue
        try:
            google_name, transposed = names.huggingface_to_google(normalized)
        except KeyError:
            google_name, transposed = hf_name, False  # reported as unexpected by the loader
        tensors[google_name] = array.T if transposed else array
    return CheckpointTensors(source, "huggingface", tensors, sorted(skipped))

