"""Every model of this project as a LiteRT (TFLite) flat buffer on ids, float32 or int8.

`export_model(..., format_name="tflite")` (`export.model_exports`) writes
`model.tflite` beside `preprocess/` (`export.serving_folders`). The flat
buffer is the numeric SavedModel's signature (`export.numeric`):
`serving_default(input_ids, input_mask, segment_ids)`, int32, any batch
size and any length up to the model's `max_position_embeddings`, in
TFLite's built-in ops only, so `ai_edge_litert`'s interpreter runs it with
no TensorFlow installed. What it returns is the numeric model's, by kind:

- a pre-trained network (a Google or Hugging Face folder, this project's
  pre-training folder, a `BertEncoder` or `BertPretrainer` object): its
  encoder's `sequence_output` [batch, seq, hidden] and `pooled_output`
  [batch, hidden], the pre-training heads left out;
- a classifier, tagger, span model, multiple-choice model or embedder:
  the numeric model's outputs (a multiple-choice model's inputs are
  [batch, choices, seq]).

A pre-trained network and a multiple-choice model have no raw-text
SavedModel of their own, so their `preprocess/` is a classifier's
(`serve_single`, `serve_pair`): the ids any fine-tuning reads (one row of a
multiple-choice question is the pair of its context and one choice).

`quantize="int8"` is LiteRT's own dynamic-range quantization
(`tf.lite.Optimize.DEFAULT`): weights stored as int8, activations
quantized per call. The Keras model is left as it is (unlike a SavedModel
export's `model.quantize`), so a model object can be given too.

The converter drops Assert ops, so the in-graph checks of the ids
(`network.layers.input_checks`) keep only their lookups: a bad id or mask
value fails the call in the `GATHER` kernel, naming no input. The three
inputs are stacked before the model reads them, so inputs of different
shapes fail in `PACK` rather than broadcast; more positions than the
model has fail when the position table is added. A row whose mask is all
0 is not an error: it gives what the Keras model gives (every position
attending to all).
"""

from __future__ import annotations

import os
from typing import Any, Callable

import keras
import tensorflow as tf

from core.framework import frozen_function
from export.numeric import NumericServing
from export.serving import export_classifier
from export.serving_preprocess import ClassifierPreprocess
from network.quantization import check_quantize
from network.serving_spec import ServingSpec

TFLITE_FILE = "model.tflite"
# What has no raw-text SavedModel of its own, so takes a classifier's preprocessing.
_IDS_ONLY = ("encoder", "pretrainer", "multiple_choice")


def ids_preprocess(model: keras.Model, spec: ServingSpec
                   ) -> Callable[[Any, int, str, bool], Any] | None:
    """For a pre-trained network or a multiple-choice model (`spec`): writes (tokenizer,
    length, path, preprocess) a classifier's preprocessing (see the module); None for
    other kinds."""
    if spec.kind not in _IDS_ONLY:
        return None
    return lambda tokenizer, length, path, preprocess: export_classifier(
        model, tokenizer, length, None, False, path, ClassifierPreprocess)


def tflite_model(module: NumericServing, quantize: str | None = None) -> bytes:
    """The numeric signature as a TFLite flat buffer, TFLite's built-in ops only.

    The variables are frozen first (`core.framework.frozen_function`); the
    signature keeps the SavedModel's input and output names.

    Args:
      module: the numeric model (`export.numeric.NumericServing`).
      quantize: "int8": LiteRT's dynamic-range quantization; None: float32.
    """
    check_quantize(quantize, "tflite", None)
    frozen = frozen_function(module.serve)
    names = [tensor.name.split(":")[0] for tensor in frozen.inputs]
    specs = {spec.name: spec for spec in module.serve.structured_input_signature[1].values()}

    def serve(**features: tf.Tensor) -> dict[str, tf.Tensor]:
        # Stacked, so that inputs of different shapes fail the call (TFLite's PACK requires
        # equal shapes; the model's own ops would broadcast a batch of one against the others).
        stacked = tf.stack([features[name] for name in names])
        flat = frozen(*[stacked[index] for index in range(len(names))])
        return tf.nest.pack_sequence_as(module.serve.structured_outputs, flat)

    holder = tf.Module()
    holder.serve = tf.function(serve).get_concrete_function(**specs)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([holder.serve], holder)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quantize:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    return converter.convert()


def write_tflite(model: keras.Model, path: str | os.PathLike,
                 quantize: str | None = None) -> None:
    """Writes `model` (see the module for what each kind gives) to `path`, an export's staging.

    A failed write is raised naming `path` (Python's own error names no
    file), so a full disk is reported by the file the user would have had.
    """
    check_quantize(quantize, "tflite", None)
    served = model.encoder if model.serving_spec().kind == "pretrainer" else model
    content = tflite_model(NumericServing(served), quantize)
    try:
        with open(path, "wb") as writer:
            writer.write(content)
    except OSError as error:
        raise OSError(error.errno, error.strerror, os.fspath(path)) from error
