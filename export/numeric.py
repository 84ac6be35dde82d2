"""A task model without string ops: a SavedModel on token ids, its preprocessing beside it.

A SavedModel on raw text (`export.serving`) holds tensorflow-text's ops, so
whatever loads it must `import tensorflow_text` first, and neither XLA nor
the TFLite converter knows those ops. TF Hub's BERT solves this with two
SavedModels, and so do these exports:

- `preprocess/`: strings -> `input_ids`, `input_mask`, `segment_ids` (int32,
  [batch, seq]) and what maps the outputs back onto the text; the raw-text
  model's own packing (`export.serving_preprocess`), so it needs tensorflow-text.
- the numeric model (here): `serving_default(input_ids, input_mask,
  segment_ids)` -> the model's float32 outputs: a classifier's `logits`
  [batch, labels] and `probabilities` (none for a regression: `logits`
  [batch]; a multi-label classifier's are a sigmoid each, with `predicted`
  [batch, labels], bool, those above its threshold, as on raw text); a tagger's `logits` and `probabilities` [batch, seq, labels];
  a span model's `start_logits` and `end_logits` [batch, seq]; an
  embedder's `embedding` [batch, size] (pooled over `input_mask`, normalized
  if the embedder normalizes); an encoder's `sequence_output` and
  `pooled_output`. Only TensorFlow's own ops:
  it loads without tensorflow-text, compiles with XLA
  (`tf.function(jit_compile=True)` around the loaded signature) and
  converts to TFLite (`export.tflite`). Ids are int32 as TF Hub's; any sequence length up to
  the model's `max_position_embeddings`.

An int8-quantized model is traced with the plain int8 product
(`network.quantization.portable_tracing`): XLA compiles it to an int8 dot
and it needs no oneDNN where it loads, but outside XLA TensorFlow runs it on
a slow generic kernel, so serve it compiled (`jit_compile=True`).
"""

from __future__ import annotations

import tensorflow as tf

from core.record_schema import ENCODER_INPUTS
from core.saved_models import KerasCall
from network.quantization import portable_tracing


class NumericServing(tf.Module):
    """`serve(input_ids, input_mask, segment_ids)` -> the model's float32 outputs, by name."""

    def __init__(self, model):
        super().__init__(name="numeric_serving")
        self._model = KerasCall(model)
        self.model_weights = list(model.weights)
        self._spec = model.serving_spec()
        # A pair read in both orders, or a question's choices: [batch, rows, seq].
        specs = {name: tf.TensorSpec([None] * self._spec.input_rank, tf.int32, name=name)
                 for name in ENCODER_INPUTS}
        with portable_tracing(model):
            self.serve = tf.function(self._serve).get_concrete_function(**specs)

    def _serve(self, **features: tf.Tensor) -> dict[str, tf.Tensor]:
        spec = self._spec
        outputs = self._model(features, training=False)
        if not spec.returns_dict:
            outputs = {spec.outputs[0]: outputs}
        outputs = {name: tf.cast(outputs[name], tf.float32) for name in spec.outputs}
        if spec.activation == "sigmoid":  # multi-label: the labels above its threshold
            outputs["probabilities"] = tf.sigmoid(outputs["logits"])
            outputs["predicted"] = outputs["probabilities"] > spec.threshold
        elif spec.activation == "softmax":
            outputs["probabilities"] = tf.nn.softmax(outputs["logits"], axis=-1)
        return outputs


def save_numeric(model, folder: str) -> NumericServing:
    """Writes the numeric SavedModel to `folder` (inside an export's staging folder)."""
    module = NumericServing(model)
    tf.saved_model.save(module, folder, signatures={"serving_default": module.serve})
    return module
