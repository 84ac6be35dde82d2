"""A SavedModel for a fine-tuned classifier whose signature takes raw strings.

Serving systems hand the model text, not WordPiece ids; shipping the
tokenizer inside the graph means the deployed model cannot drift from the
tokenization it was trained with. The packing mirrors
`data_prep.text.sentence_pairs.pack`: `[CLS] a [SEP] (b [SEP])`, pairs shortened
longest-first (tensorflow-text's `ShrinkLongestTrimmer`), zero padding, and
a second text without tokens packed as a single text.
Whoever loads it must `import tensorflow_text` first, which registers the
tokenizer's ops.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import tensorflow as tf
import tensorflow_text as tf_text


class ClassifierServing(tf.Module):
    """`serve(text_a[, text_b])` -> {"probabilities" [N, K]} or {"score" [N]} for regression."""

    def __init__(self, model, tokenizer, max_seq_length: int, labels: list[str] | None):
        super().__init__(name="classifier_serving")
        # The Keras model is called through a plain holder, its weights tracked as a list:
        # tracked directly, Keras would add its own float-input serving signature.
        self._model = _Untracked(model)
        self.model_weights = list(model.weights)
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.labels = tf.constant(labels or [], tf.string)
        self.is_regression = labels is None

    def _pack(self, segments: list[tf.RaggedTensor]) -> dict[str, tf.Tensor]:
        budget = self.max_seq_length - 1 - len(segments)
        if len(segments) == 1:  # (the trimmer's loop cannot take a single segment)
            trimmed = [segments[0][:, :budget]]
        else:
            trimmed = tf_text.ShrinkLongestTrimmer(budget, axis=-1).trim(segments)
        ids, segment_ids = tf_text.combine_segments(
            trimmed, start_of_sequence_id=self.tokenizer.cls_id,
            end_of_segment_id=self.tokenizer.sep_id)
        input_ids, input_mask = tf_text.pad_model_inputs(ids, self.max_seq_length)
        segment_ids, _ = tf_text.pad_model_inputs(segment_ids, self.max_seq_length)
        return {"input_ids": tf.cast(input_ids, tf.int32),
                "input_mask": tf.cast(input_mask, tf.int32),
                "segment_ids": tf.cast(segment_ids, tf.int32)}

    def _outputs(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        logits = self._model.value(features, training=False)
        if self.is_regression:
            return {"score": logits}
        probabilities = tf.nn.softmax(logits, axis=-1)
        return {"probabilities": probabilities,
                "label": tf.gather(self.labels, tf.argmax(probabilities, axis=-1))}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve_single(self, text_a):
        ids_a, _ = self.tokenizer.tokenize_batch(text_a)
        return self._outputs(self._pack([ids_a]))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string),
                                  tf.TensorSpec([None], tf.string)])
    def serve_pair(self, text_a, text_b):
        ids_a, _ = self.tokenizer.tokenize_batch(text_a)
        ids_b, _ = self.tokenizer.tokenize_batch(text_b)
        pair, single = self._pack([ids_a, ids_b]), self._pack([ids_a])
        # Row by row: an empty or blank text_b gives the single-text layout, as in training.
        has_b = (ids_b.row_lengths() > 0)[:, None]
        return self._outputs({name: tf.where(has_b, pair[name], single[name]) for name in pair})


class _Untracked:
    def __init__(self, value):
        self.value = value


def export_classifier(model, tokenizer, max_seq_length: int, labels: list[str] | None,
                      pair: bool, path: str) -> str:
    """Writes the SavedModel to `path` (replacing it) with `serving_default` for the task.

    `pair` selects the default signature: two string inputs `text_a`,
    `text_b`, or one `text_a`; both signatures are present under their names.
    """
    module = ClassifierServing(model, tokenizer, max_seq_length, labels)
    signatures = {"serve_single": module.serve_single, "serve_pair": module.serve_pair}
    signatures["serving_default"] = signatures["serve_pair" if pair else "serve_single"]
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(dir=parent, prefix=".saved_model-")
    try:
        tf.saved_model.save(module, staging, signatures=signatures)
        if os.path.exists(path):
            shutil.rmtree(path)
        os.replace(staging, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path
