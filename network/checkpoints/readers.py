"""Reads any supported checkpoint into {Google name: array}.

Three formats reach `--init_checkpoint`:

- Google's TF1 checkpoints (`bert_model.ckpt` prefix, name-based, optimizer
  slots `adam_m`/`adam_v` beside the weights of training checkpoints);
- Hugging Face BERT: a folder with `model.safetensors` (or a sharded
  `model.safetensors.index.json`), or a `.safetensors` file; a fine-tuned
  `BertFor...` class's head (named by `architectures` in the `config.json`
  beside it) reads as our task model's head (`names.HF_TASK_HEADS`);
- this project's own checkpoints, object-based `tf.train.Checkpoint`s whose
  object graph names each model weight by its Google name under
  `weights/named`, so they translate back without knowing which model class
  wrote them. A training run's `--output_dir` stands for the newest
  checkpoint its `checkpoint` index file names; a `ckpt-N` prefix for itself.

A folder may also be a Google release (`bert_model.ckpt` inside) or a
fine-tuning `--output_dir` (`model.ckpt` inside).

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

from core.framework import OBJECT_GRAPH_KEY, saved_children
from network.checkpoints import names

# Where `writing.training_checkpoint` puts the weights in the object graph.
_OWN_WEIGHTS_PATH = ("weights", "named")


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
    path = os.fspath(path)
    if tf.io.gfile.isdir(path):
        return _read_folder(path)
    if path.endswith(".safetensors"):
        if not os.path.exists(path):
            raise CheckpointError(f"{path}: no such file")
        return _read_safetensors([Path(path)], path)
    if path.endswith((".bin", ".pt", ".pth")):
        raise CheckpointError(f"{path}: PyTorch pickles are not read; save the model with "
                              "safe_serialization=True (model.safetensors) and pass that")
    if _is_tf_checkpoint(path):
        return _read_tf_checkpoint(path)
    raise CheckpointError(
        f"{path}: not a checkpoint: expected a TF checkpoint prefix (PREFIX.index beside "
        "it), a folder holding one, a Hugging Face folder, or a .safetensors file")


def _is_tf_checkpoint(prefix: str) -> bool:
    return tf.io.gfile.exists(prefix + ".index")


def _read_folder(folder: str) -> CheckpointTensors:
    """Reads the checkpoint a folder stands for; an error lists what the folder holds.

    A training run's output folder (its `checkpoint` index file names the
    newest `ckpt-N`) comes before the exports that may sit beside it, so
    `--init_checkpoint=<output_dir>` always means the weights the run ended with.
    """
    def exists(name: str) -> bool:
        return tf.io.gfile.exists(os.path.join(folder, name))

    if exists("model.safetensors") or exists("model.safetensors.index.json"):
        return _read_huggingface_folder(Path(folder))
    if exists("checkpoint"):
        return _read_tf_checkpoint(_newest_checkpoint(folder))
    for prefix in ("bert_model.ckpt", "model.ckpt"):  # Google's release; a fine-tuned model
        if _is_tf_checkpoint(os.path.join(folder, prefix)):
            return _read_tf_checkpoint(os.path.join(folder, prefix))
    if exists("pytorch_model.bin"):
        raise CheckpointError(f"{folder}: holds only pytorch_model.bin; re-save it with "
                              "safe_serialization=True to get model.safetensors")
    held = sorted(tf.io.gfile.listdir(folder))
    shown = ", ".join(name.rstrip("/") for name in held[:6]) + (", ..." if len(held) > 6 else "")
    raise CheckpointError(
        f"{folder}: no checkpoint in this folder: neither a `checkpoint` index file (as a "
        "training run's output folder has), a Hugging Face model.safetensors, nor a "
        f"bert_model.ckpt or model.ckpt checkpoint; it holds {shown or 'nothing'}")


def _newest_checkpoint(folder: str) -> str:
    """The prefix that the folder's `checkpoint` index file names, checked to exist.

    TF1's Saver wrote absolute paths, so an output folder copied from where
    it was written (a bucket, another machine) names files elsewhere; the
    file of that name in this folder is the one meant.
    """
    index = os.path.join(folder, "checkpoint")
    try:
        state = tf.train.get_checkpoint_state(folder)
    except ValueError:
        state = None
    if state is None:
        raise CheckpointError(f"{index}: not a readable checkpoint index file (it should "
                              "name the newest checkpoint as model_checkpoint_path)")

    def here(prefix: str) -> str | None:
        for candidate in (prefix, os.path.join(folder, os.path.basename(prefix))):
            if _is_tf_checkpoint(candidate):
                return candidate
        return None

    newest = state.model_checkpoint_path
    if here(newest):
        return here(newest)
    present = [here(path) for path in state.all_model_checkpoint_paths if here(path)]
    hint = (f"; pass one that is there, e.g. {present[-1]}" if present
            else "; the folder was copied partly or its checkpoints were deleted")
    raise CheckpointError(f"{index}: names {newest} as the newest checkpoint, but "
                          f"{newest}.index is missing{hint}")


def damaged_checkpoint_error(prefix: str, error: Exception) -> CheckpointError:
    """Names the data files of `prefix` that TensorFlow's reader found damaged, and their sizes.

    Its own messages name no file (`IndexError: Read less bytes than
    requested`) or only the prefix (a checksum mismatch). A short read means
    the file ends before a tensor the index places in it: cut short at its
    size. A data file is the tensors' bytes one after another, so it should
    hold at least the bytes of the numeric tensors the index lists.
    """
    files = sorted(tf.io.gfile.glob(f"{prefix}.data-*"))
    sizes = {file: tf.io.gfile.stat(file).length for file in files}
    detail = (getattr(error, "message", None) or str(error)).strip()
    if isinstance(error, IndexError) and len(files) == 1:
        file, size = files[0], sizes[files[0]]
        needed = _numeric_bytes(prefix)
        at_least = f" (at least {needed} bytes)" if needed > size else ""
        where = (f"{file} is cut short: it ends at byte {size}, before the end of the tensors "
                 f"its index lists{at_least}")
    else:
        where = "damaged data in " + (", ".join(f"{file} ({size} bytes)"
                                                for file, size in sizes.items()) or prefix)
    return CheckpointError(f"{where}; TensorFlow: {detail}; the checkpoint cannot be read: "
                           "write it again, or use an older checkpoint")


def _numeric_bytes(prefix: str) -> int:
    """The bytes of the non-string tensors the index of `prefix` lists (0 if unreadable)."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    except (tf.errors.OpError, ValueError):
        return 0
    return sum(int(np.prod(shape)) * dtypes[key].size
               for key, shape in shapes.items() if dtypes[key] != tf.string)


def _read_tf_checkpoint(prefix: str) -> CheckpointTensors:
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as error:
        raise CheckpointError(f"{prefix}: unreadable TF checkpoint: {error}") from None
    try:
        return _read_tensors(prefix, reader)
    except (IndexError, tf.errors.OpError) as error:  # short reads, checksum mismatches
        raise damaged_checkpoint_error(prefix, error) from None


def _read_tensors(prefix: str, reader) -> CheckpointTensors:
    keys = reader.get_variable_to_shape_map()
    if OBJECT_GRAPH_KEY in keys:
        return _read_own(prefix, reader, keys)
    tensors, skipped = {}, []
    for key in keys:
        if names.is_training_state(key):
            skipped.append(key)
        else:
            tensors[key] = reader.get_tensor(key)
    return CheckpointTensors(prefix, "google", tensors, sorted(skipped))


def _read_own(prefix: str, reader, keys) -> CheckpointTensors:
    """Finds each weight through the object graph rather than by its key.

    The saver stores a variable once, under the first path it reaches it by;
    in a training checkpoint that is the optimizer's
    (`optimizer/_trainable_variables/N`), not `weights/named/...`. The graph
    still links `weights` -> `named` -> each Google name to the node that
    holds the value, whatever key it was stored under.
    """
    try:
        weights = saved_children(reader, _OWN_WEIGHTS_PATH)
    except KeyError:
        top = ", ".join(saved_children(reader, ()))
        raise CheckpointError(
            f"{prefix}: an object-based checkpoint without model weights under "
            f"{'/'.join(_OWN_WEIGHTS_PATH)!r} (it holds {top or 'nothing'}); it was not "
            "written by this project") from None
    tensors, used = {}, {OBJECT_GRAPH_KEY}
    for name, key in weights.items():
        if key not in keys:
            raise CheckpointError(f"{prefix}: weight {name} is listed but its value "
                                  "was not saved; the checkpoint is damaged")
        tensors[name] = reader.get_tensor(key)
        used.add(key)
    # Optimizer slots, step counters, input position and any other saved state.
    skipped = sorted(set(keys) - used)
    return CheckpointTensors(prefix, "own", tensors, skipped)


def _read_huggingface_folder(folder: Path) -> CheckpointTensors:
    single = folder / "model.safetensors"
    if single.exists():
        return _read_safetensors([single], str(folder))
    index = folder / "model.safetensors.index.json"
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
    except (ValueError, KeyError) as error:
        raise CheckpointError(f"{index}: not a safetensors index ({error})") from None
    return _read_safetensors(sorted({folder / shard for shard in weight_map.values()}),
                             str(folder))


def _read_safetensors(files: list[Path], source: str) -> CheckpointTensors:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    by_hf_name: dict[str, np.ndarray] = {}
    for file in files:
        try:
            by_hf_name.update(load_file(str(file)))
        except (SafetensorError, OSError) as error:
            raise CheckpointError(f"{file}: unreadable safetensors file: {error}") from None
    head_names = names.huggingface_head_names(_architecture(files[0].parent / "config.json"))
    tensors, skipped = {}, []
    for hf_name, array in by_hf_name.items():
        if hf_name in head_names:  # a BertFor... head: our task model's, already [out, in]
            tensors[head_names[hf_name]] = array
            continue
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



def _architecture(config_file: Path) -> str | None:
    """The class a Hugging Face `config.json` names (`architectures[0]`); None without one.

    It tells whose head `classifier.weight` is: a sequence classifier's, a
    token classifier's or a multiple-choice scorer's.
    """
    if not config_file.is_file():
        return None
    try:
        settings = json.loads(config_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{config_file}: not a JSON config ({error})") from None
    architectures = settings.get("architectures") if isinstance(settings, dict) else None
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        return architectures[0]
    return None
