"""SavedModels for fine-tuned models whose signatures take raw strings; here the classifier.

Serving systems hand the model text, not WordPiece ids; shipping the
tokenizer inside the graph means the deployed model cannot drift from the
tokenization it was trained with. Packing is
`text.sentence_pairs.pack_ragged`, the in-graph twin of the packer
that built the training inputs, so the layout and truncation cannot drift.
Whoever loads it must `import tensorflow_text` first, which registers the
tokenizer's ops. A classifier trained on both orders of each pair (GPT's
similarity input) is served the same way: the signature packs both. One
built to read long texts whole (`long_texts="windows"`) is served through
the same windows as its `predict`, so nothing is cut.

`RawTextServing` and `export` are what every raw-text export shares (span
QA: `export.serving_span`, tagging: `export.serving_tagging`): the model and
tokenizer held for tracing, the label names kept in the folder as
`labels.txt` and in the graph, the folder written whole.
"""

from __future__ import annotations

import tensorflow as tf

from core.record_schema import ENCODER_INPUTS
from core.saved_models import KerasCall, write_saved_model
from network.layers import fast_paths
from network.model_folder import LABELS_FILE
from text.sentence_pairs import pack_ragged
from text.text_windows import (EXAMPLE_WINDOWS, WINDOWS, mean_over_windows, stride_for,
                               text_windows)

TEXTS = tf.TensorSpec([None], tf.string)


class RawTextServing(tf.Module):
    """A Keras model, its tokenizer and label names, ready for `tf.function`s on strings."""

    def __init__(self, model, tokenizer, max_seq_length: int, labels: list[str] | None,
                 name: str):
        super().__init__(name=name)
        # The Keras model is called through a plain holder, its weights tracked as a list:
        # tracked directly, Keras would add its own float-input serving signature.
        self._model = KerasCall(model)
        self.model_weights = list(model.weights)
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self._packing = (max_seq_length, tokenizer.cls_id, tokenizer.sep_id)
        self.labels = tf.constant(list(labels or []), tf.string)

    def word_pieces(self, words: tf.RaggedTensor) -> tf.RaggedTensor:
        """[batch, (words)] strings -> ids [batch, (words), (pieces)]; [UNK] for a word of none.

        Each word is tokenized on its own, as the CoNLL reader tokenizes the
        words of its files.
        """
        pieces, _ = self.tokenizer.tokenize_batch(words.flat_values)
        unknown = tf.fill([pieces.nrows()], tf.constant(self.tokenizer.unk_id, tf.int32))
        return tf.RaggedTensor.from_row_splits(fill_empty_rows(pieces, unknown),
                                               words.row_splits)


def fill_empty_rows(rows: tf.RaggedTensor, fill: tf.Tensor) -> tf.RaggedTensor:
    """`rows` [N, (items)] with each empty row holding `fill[row]` alone."""
    lengths = rows.row_lengths()
    padded = tf.concat([rows, tf.RaggedTensor.from_tensor(
        tf.cast(fill, rows.dtype)[:, None])], axis=1)
    keep = tf.ragged.range(lengths + 1) < tf.maximum(lengths, 1)[:, None]
    return tf.ragged.boolean_mask(padded, keep)


def trim_padding(features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """Packed features without the trailing positions that are padding in every row.

    A classifier's outputs do not depend on padded positions (their keys are
    masked out of every attention), but each costs as much as a real one:
    one sentence of 20 pieces packed to 128 is 6 times the work. Packing keeps
    the training layout; the model is then run on the longest row's length.
    An empty batch keeps its packed length (it has no longest row).
    """
    lengths = tf.reduce_sum(features["input_mask"], axis=-1)
    longest = tf.where(tf.size(lengths) > 0, tf.reduce_max(lengths),
                       tf.shape(features["input_mask"])[-1])
    return {name: value[..., :longest] for name, value in features.items()}


def export(module: RawTextServing, path: str, signatures: dict) -> str:
    """Writes the SavedModel to `path` (replacing it, whole) with `labels.txt` inside."""
    labels = [label.decode("utf-8") for label in module.labels.numpy().tolist()]
    files = {LABELS_FILE: "".join(f"{label}\n" for label in labels)} if labels else {}
    with fast_paths.serving():
        return write_saved_model(module, path, signatures, extra_files=files)


class ClassifierServing(RawTextServing):
    """`serve(text_a[, text_b])` -> {"probabilities" [N, K], "label" [N]}, {"score" [N]} for
    regression, or for a multi-label model {"probabilities" [N, K] (a sigmoid each),
    "predicted" [N, K] (above its threshold)}, labels.txt naming the K columns.

    A model built with `long_texts="windows"` reads each text as its `predict`
    does: through windows `window_stride` pieces apart
    (`text.text_windows`), a text's logits the mean of its windows'. It
    reads single texts only, so has no `serve_pair`.
    """

    def __init__(self, model, tokenizer, max_seq_length: int, labels: list[str] | None):
        super().__init__(model, tokenizer, max_seq_length, labels, name="classifier_serving")
        spec = model.serving_spec()
        self.is_regression = labels is None
        self.both_orders = spec.both_orders
        self.threshold = spec.threshold  # multi-label: a sigmoid per label, above it a yes
        self.window_stride = (stride_for(spec.window_stride, max_seq_length) if spec.windows
                              else None)

    def _outputs(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        ids = trim_padding({name: features[name] for name in ENCODER_INPUTS})
        logits = self._model(ids, training=False)
        if EXAMPLE_WINDOWS in features:  # one row per window: each text's mean
            logits = mean_over_windows(logits, features[EXAMPLE_WINDOWS])
        if self.is_regression:
            return {"score": logits}
        if self.threshold is not None:  # multi-label: a yes/no per label
            probabilities = tf.sigmoid(tf.cast(logits, tf.float32))
            return {"probabilities": probabilities, "predicted": probabilities > self.threshold}
        probabilities = tf.nn.softmax(logits, axis=-1)
        return {"probabilities": probabilities,
                "label": tf.gather(self.labels, tf.argmax(probabilities, axis=-1))}

    @tf.function(input_signature=[TEXTS])
    def serve_single(self, text_a):
        ids_a, _ = self.tokenizer.tokenize_batch(text_a)
        if self.window_stride is not None:
            return self._outputs(text_windows(ids_a, self.max_seq_length, self.window_stride,
                                              self.tokenizer.cls_id, self.tokenizer.sep_id))
        return self._outputs(pack_ragged(ids_a, None, *self._packing))

    @tf.function(input_signature=[TEXTS, TEXTS])
    def serve_pair(self, text_a, text_b):
        ids_a, _ = self.tokenizer.tokenize_batch(text_a)
        ids_b, _ = self.tokenizer.tokenize_batch(text_b)
        features = pack_ragged(ids_a, ids_b, *self._packing, names=("text_a", "text_b"))
        if self.both_orders:
            backward = pack_ragged(ids_b, ids_a, *self._packing, names=("text_b", "text_a"))
            features = {key: tf.stack([value, backward[key]], axis=1)
                        for key, value in features.items()}
        return self._outputs(features)


def export_classifier(model, tokenizer, max_seq_length: int, labels: list[str] | None,
                      pair: bool, path: str,
                      module_class: type[ClassifierServing] = ClassifierServing) -> str:
    """Writes the SavedModel to `path` (replacing it) with `serving_default` for the task.

    `pair` selects the default signature: two string inputs `text_a`,
    `text_b`, or one `text_a`; both signatures are present under their names,
    except for a model that reads both orders of a pair, which has no single,
    and one that reads long texts through windows, which has no pair.
    `module_class` is what is written: the model on raw text, or its
    preprocessing alone (`export.serving_preprocess`), whose signatures are the same.
    """
    if pair and model.serving_spec().windows:
        raise ValueError(f"the model reads single texts through windows (long_texts="
                         f"{WINDOWS!r}), so its export has no pair signature: export it with "
                         "pair=False")
    module = module_class(model, tokenizer, max_seq_length, labels)
    signatures = {} if module.window_stride is not None else {"serve_pair": module.serve_pair}
    if not module.both_orders:
        signatures["serve_single"] = module.serve_single
    signatures["serving_default"] = signatures["serve_pair" if pair else "serve_single"]
    return export(module, path, signatures)
