"""A SavedModel for a fine-tuned classifier whose signature takes raw strings.

Serving systems hand the model text, not WordPiece ids; shipping the
tokenizer inside the graph means the deployed model cannot drift from the
tokenization it was trained with. Packing is
`text.sentence_pairs.pack_ragged`, the in-graph twin of the packer
that built the training inputs, so the layout and truncation cannot drift.
Whoever loads it must `import tensorflow_text` first, which registers the
tokenizer's ops. A classifier trained on both orders of each pair (GPT's
similarity input) is served the same way: the signature packs both.
"""

from __future__ import annotations

import tensorflow as tf

from core.atomic import atomic_folder
from text.sentence_pairs import pack_ragged


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
        self._packing = (max_seq_length, tokenizer.cls_id, tokenizer.sep_id)
        self.labels = tf.constant(labels or [], tf.string)
        self.is_regression = labels is None
        self.both_orders = getattr(model, "both_orders", False)

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
        return self._outputs(pack_ragged(ids_a, None, *self._packing))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string),
                                  tf.TensorSpec([None], tf.string)])
    def serve_pair(self, text_a, text_b):
        ids_a, _ = self.tokenizer.tokenize_batch(text_a)
        ids_b, _ = self.tokenizer.tokenize_batch(text_b)
        features = pack_ragged(ids_a, ids_b, *self._packing)
        if self.both_orders:
            backward = pack_ragged(ids_b, ids_a, *self._packing)
            features = {key: tf.stack([value, backward[key]], axis=1)
                        for key, value in features.items()}
        return self._outputs(features)


class _Untracked:
    def __init__(self, value):
        self.value = value


def export_classifier(model, tokenizer, max_seq_length: int, labels: list[str] | None,
                      pair: bool, path: str) -> str:
    """Writes the SavedModel to `path` (replacing it) with `serving_default` for the task.

    `pair` selects the default signature: two string inputs `text_a`,
    `text_b`, or one `text_a`; both signatures are present under their names,
    except for a model that reads both orders of a pair, which has no single.
    """
    module = ClassifierServing(model, tokenizer, max_seq_length, labels)
    signatures = {"serve_pair": module.serve_pair}
    if not module.both_orders:
        signatures["serve_single"] = module.serve_single
    signatures["serving_default"] = signatures["serve_pair" if pair else "serve_single"]
    # Staged by core.atomic, whose folders follow the umask (tempfile.mkdtemp's are 0700).
    with atomic_folder(path) as staging:
        tf.saved_model.save(module, staging, signatures=signatures)
    return path
