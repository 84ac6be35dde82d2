"""A task model without string ops: a SavedModel on token ids, its preprocessing beside it.

A SavedModel on raw text (`tasks.serving`) holds tensorflow-text's ops, so
whatever loads it must `import tensorflow_text` first, and neither XLA nor
the TFLite converter knows those ops. TF Hub's BERT solves this with two
SavedModels, and so do these exports:

- `preprocess/`: strings -> `input_ids`, `input_mask`, `segment_ids` (int32,
  [batch, seq]); `serving_default` / `serve_single` take `text_a`,
  `serve_pair` takes `text_a` and `text_b`. It is the raw-text model's own
  packing (`tasks.serving.ClassifierServing`), so the ids cannot differ from
  what the raw-text model computes, and it needs tensorflow-text.
- the numeric model: `serving_default(input_ids, input_mask, segment_ids)`
  -> the model's float32 outputs (a classifier: `logits`, and
  `probabilities` unless it is a regression). Only TensorFlow's own ops:
  it loads without tensorflow-text, compiles with XLA
  (`tf.function(jit_compile=True)` around the loaded signature) and
  converts to TFLite. Ids are int32 as TF Hub's; any sequence length up to
  the model's `max_position_embeddings`.

An int8-quantized model is traced with the plain int8 product
(`modeling.quantization.portable_tracing`): XLA compiles it to an int8 dot
and it needs no oneDNN where it loads, but outside XLA TensorFlow runs it on
a slow generic kernel, so serve it compiled (`jit_compile=True`).
"""

from __future__ import annotations

import os

import tensorflow as tf

from core.framework import frozen_function
from core.saved_models import KerasCall
from modeling.quantization import portable_tracing
from modeling.task_models import BertMultipleChoice
from tasks.serving import ClassifierServing

NUMERIC_INPUTS = ("input_ids", "input_mask", "segment_ids")


class NumericServing(tf.Module):
    """`serve(input_ids, input_mask, segment_ids)` -> the model's float32 outputs, by name."""

    def __init__(self, model):
        super().__init__(name="numeric_serving")
        self._model = KerasCall(model)
        self.model_weights = list(model.weights)
        self._probabilities = getattr(model, "num_labels", 1) > 1 and hasattr(model, "classifier")
        # A pair read in both orders, or a question's choices: [batch, rows, seq].
        rank = 3 if getattr(model, "both_orders", False) or isinstance(
            model, BertMultipleChoice) else 2
        specs = {name: tf.TensorSpec([None] * rank, tf.int32, name=name)
                 for name in NUMERIC_INPUTS}
        with portable_tracing(model):
            self.serve = tf.function(self._serve).get_concrete_function(**specs)

    def _serve(self, **features: tf.Tensor) -> dict[str, tf.Tensor]:
        outputs = self._model(features, training=False)
        if not isinstance(outputs, dict):
            outputs = {"logits": outputs}
        outputs = {name: tf.cast(value, tf.float32) for name, value in outputs.items()
                   if isinstance(value, tf.Tensor)}
        if self._probabilities:
            outputs["probabilities"] = tf.nn.softmax(outputs["logits"], axis=-1)
        return outputs


class TextPreprocess(ClassifierServing):
    """The raw-text classifier's signatures with the model cut off: strings -> the three ids."""

    def __init__(self, model, tokenizer, max_seq_length: int, labels: list[str] | None):
        super().__init__(model, tokenizer, max_seq_length, labels)
        self._model = None  # the weights stay in the numeric model
        self.model_weights = []

    def _outputs(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return {name: features[name] for name in NUMERIC_INPUTS}


def save_preprocess(model, tokenizer, max_seq_length: int, labels: list[str] | None,
                    folder: str) -> None:
    """Writes the preprocessing SavedModel to `folder` (inside an export's staging folder)."""
    module = TextPreprocess(model, tokenizer, max_seq_length, labels)
    signatures = {"serve_pair": module.serve_pair}
    if not module.both_orders:
        signatures["serve_single"] = module.serve_single
    signatures["serving_default"] = signatures.get("serve_single", module.serve_pair)
    tf.saved_model.save(module, folder, signatures=signatures)


def save_numeric(model, folder: str) -> NumericServing:
    """Writes the numeric SavedModel to `folder` (inside an export's staging folder)."""
    module = NumericServing(model)
    tf.saved_model.save(module, folder, signatures={"serving_default": module.serve})
    return module


def tflite_model(module: NumericServing) -> bytes:
    """The numeric signature as a TFLite flat buffer, TFLite's built-in ops only.

    The variables are frozen first (`core.framework.frozen_function`); the
    signature keeps the SavedModel's input and output names.
    """
    frozen = frozen_function(module.serve)
    names = [tensor.name.split(":")[0] for tensor in frozen.inputs]
    specs = {spec.name: spec for spec in module.serve.structured_input_signature[1].values()}

    def serve(**features: tf.Tensor) -> dict[str, tf.Tensor]:
        flat = frozen(*[features[name] for name in names])
        return tf.nest.pack_sequence_as(module.serve.structured_outputs, flat)

    holder = tf.Module()
    holder.serve = tf.function(serve).get_concrete_function(**specs)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([holder.serve], holder)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return converter.convert()


def write_tflite(module: NumericServing, path: str | os.PathLike) -> None:
    """Writes `tflite_model(module)` to `path` (inside an export's staging folder).

    A failed write is raised naming `path` (Python's own error names no
    file), so a full disk is reported by the file the user would have had.
    """
    content = tflite_model(module)
    try:
        with open(path, "wb") as writer:
            writer.write(content)
    except OSError as error:
        raise OSError(error.errno, error.strerror, os.fspath(path)) from error
