"""SavedModels written whole, around Keras models that must not bring their own signatures.

Every export of this project (the classifier, span QA and tagging on raw
text, TF Hub's preprocess and encoder) is a `tf.Module` that calls a Keras
model from its own `tf.function`s. Two things are the same for all of them,
so they live here once: the Keras model is held through `KerasCall`, so that
it is not tracked as a child (Keras would add a serving signature of its own
on float inputs) while its weights are tracked as a plain list; and the
folder is written under a temporary name and renamed into place, so a
server watching the path never loads half a model. `write_saved_model`
replaces its path whole, so it is for folders a run owns (a runner's
`output_dir/saved_model`); an export into a folder a user names goes
through `core.export_folder`, which refuses one holding anything else.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import tensorflow as tf

from core.atomic import atomic_folder


class KerasCall:
    """Holds a callable out of `tf.Module`'s attribute tracking; `call(...)` runs it."""

    def __init__(self, model: Any):
        self._model = model

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._model(*args, **kwargs)


def write_saved_model(module: tf.Module, path: str | os.PathLike,
                      signatures: Mapping[str, Any] | None = None,
                      extra_files: Mapping[str, str] | None = None) -> str:
    """`tf.saved_model.save(module, path)`, replacing `path` only once the export is complete.

    `extra_files` (name -> UTF-8 text) are written into the folder beside
    `saved_model.pb`, for readers that are not TensorFlow (label names).
    """
    path = os.path.abspath(os.fspath(path))
    with atomic_folder(path) as staging:
        tf.saved_model.save(module, staging, signatures=dict(signatures or {}) or None)
        for name, text in (extra_files or {}).items():
            with open(os.path.join(staging, name), "w", encoding="utf-8") as writer:
                writer.write(text)
    return path
