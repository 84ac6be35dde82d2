"""A SavedModel for a sentence embedder: texts in, one vector per text out.

`serving_default(text)` -> `embedding` [N, D]: the texts tokenized and
packed in the graph as the embedder's preprocessor does (`[CLS] text [SEP]`,
cut at the export's window), then the embedder's own pooling and
normalization, so the served vectors are `BertTextEmbedder.predict`'s. Load
it after `import tensorflow_text`, which registers the tokenizer's ops.
"""

from __future__ import annotations

import tensorflow as tf

from export.serving import TEXTS, RawTextServing, export
from text.sentence_pairs import pack_ragged


class EmbedderServing(RawTextServing):
    """`serve(text)` -> {"embedding": [N, D]}."""

    def __init__(self, model, tokenizer, max_seq_length: int):
        super().__init__(model, tokenizer, max_seq_length, None, name="embedder_serving")

    @tf.function(input_signature=[TEXTS])
    def serve(self, text):
        ids, _ = self.tokenizer.tokenize_batch(text)
        return self._outputs(pack_ragged(ids, None, *self._packing))

    def _outputs(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return {"embedding": self._model(features, training=False)}


def export_embedder(model, tokenizer, max_seq_length: int, path: str,
                    module_class: type[EmbedderServing] = EmbedderServing) -> str:
    """Writes the SavedModel of `model` (a BertTextEmbedder) to `path`, replacing it whole;
    `module_class` as in `export.serving.export_classifier`."""
    module = module_class(model, tokenizer, max_seq_length)
    return export(module, path, {"serving_default": module.serve})
