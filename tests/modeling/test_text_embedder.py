"""BertTextEmbedder: sentence-transformers' pooling rule, its folder's settings, and its vectors."""

import json
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

import modeling
from modeling.text_embedder import BertTextEmbedder, cosine_similarity
from network.config import ConfigError
from tests.fixtures import GOLDEN, TestCase
from tests.modeling.tiny_folder import tiny_folder
from tests.reference_python import minilm_or_skip

TEXTS = ["the film was dull", "a great cat sat on the mat , the plot is fine", "who ?", ""]
MINILM_GOLDEN = GOLDEN / "minilm_sentence_embeddings.npz"


def sentence_transformers_folder(root: Path, pooling: dict, normalize: bool = True,
                                 max_seq_length: int | None = 16, extra_module: str | None = None
                                 ) -> Path:
    """The tiny model as a sentence-transformers folder: modules.json, 1_Pooling, settings."""
    folder = tiny_folder(root)
    modules = [{"idx": 0, "name": "0", "path": "",
                "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    if extra_module:
        modules.append({"idx": 3, "name": "3", "path": "3", "type": extra_module})
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 32, **pooling}))
    if max_seq_length is not None:
        (folder / "sentence_bert_config.json").write_text(json.dumps(
            {"max_seq_length": max_seq_length, "do_lower_case": False}))
    return folder


def reference_pooling(mode: str, tokens: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' Pooling rule, in NumPy (its `_forward_padded`)."""
    mask = mask[:, :, None].astype(np.float64)
    if mode == "cls":
        return tokens[:, 0]
    if mode == "max":
        return np.where(mask == 0, -np.inf, tokens).max(axis=1)
    count = np.clip(mask.sum(axis=1), 1e-9, None)
    total = (tokens * mask).sum(axis=1)
    return total / (count if mode == "mean" else np.sqrt(count))


def reference_vectors(embedder: BertTextEmbedder, texts: list[str]) -> np.ndarray:
    """The embedder's token vectors, pooled and normalized by the NumPy rule."""
    packed = embedder.preprocessor(tf.constant(texts))
    tokens = embedder.encoder(packed, training=False)["sequence_output"].numpy()
    mask = packed["input_mask"].numpy()
    vectors = np.concatenate([reference_pooling(mode, tokens, mask)
                              for mode in embedder.pooling], axis=-1)
    if embedder.normalize:
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return vectors


class TinyEmbedderTest(TestCase, parameterized.TestCase):

    @parameterized.parameters(
        ({"pooling_mode_mean_tokens": True}, ["mean"]),
        ({"pooling_mode_cls_token": True}, ["cls"]),
        ({"pooling_mode_max_tokens": True}, ["max"]),
        ({"pooling_mode_mean_sqrt_len_tokens": True}, ["mean_sqrt_len_tokens"]),
        # Old keys join in sentence-transformers' fixed order; `pooling_mode` in its own.
        ({"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": True}, ["cls", "mean"]),
        ({"pooling_mode": ["mean", "max"]}, ["mean", "max"]),
    )
    @pytest.mark.long
    def test_pooling_follows_the_folder_and_sentence_transformers_rule(self, pooling, modes):
        for normalize in (True, False):
            folder = sentence_transformers_folder(self.tmp_path(), pooling, normalize)
            embedder = BertTextEmbedder.from_pretrained(folder)
            self.assertEqual(embedder.pooling, modes)
            self.assertEqual(embedder.normalize, normalize)
            vectors = embedder.predict(TEXTS)
            self.assertEqual(vectors.shape, (len(TEXTS), 32 * len(modes)))
            self.assertAllClose(vectors, reference_vectors(embedder, TEXTS), atol=1e-6, rtol=0)
            if normalize:
                self.assertAllClose(np.linalg.norm(vectors, axis=1), np.ones(len(TEXTS)))

    def test_padding_never_reaches_a_vector(self):
        folder = sentence_transformers_folder(self.tmp_path(), {"pooling_mode": ["mean", "max"]})
        embedder = BertTextEmbedder.from_pretrained(folder, sequence_length=64)
        together = embedder.predict(TEXTS)
        alone = np.concatenate([embedder.predict([text]) for text in TEXTS])
        self.assertAllClose(together, alone, atol=1e-6, rtol=0)
        shorter = BertTextEmbedder.from_pretrained(folder, sequence_length=20)
        self.assertAllClose(shorter.predict(TEXTS[:1]), together[:1], atol=1e-6, rtol=0)

    def test_window_and_overrides(self):
        folder = sentence_transformers_folder(self.tmp_path(), {"pooling_mode_mean_tokens": True},
                                              max_seq_length=12)
        self.assertEqual(BertTextEmbedder.from_pretrained(folder).preprocessor.sequence_length, 12)
        embedder = BertTextEmbedder.from_pretrained(folder, sequence_length=20, pooling="cls",
                                                    normalize=False)
        self.assertEqual((embedder.preprocessor.sequence_length, embedder.pooling,
                          embedder.normalize), (20, ["cls"], False))
        plain = BertTextEmbedder.from_pretrained(tiny_folder(self.tmp_path()))
        self.assertEqual((plain.pooling, plain.normalize, plain.preprocessor.sequence_length),
                         (["mean"], False, 64))  # 128 capped at the tiny model's positions

    def test_similarity_is_the_cosine(self):
        folder = sentence_transformers_folder(self.tmp_path(), {"pooling_mode_cls_token": True},
                                              normalize=False)
        embedder = BertTextEmbedder.from_pretrained(folder)
        vectors = embedder.predict(TEXTS)
        expected = np.array([[np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b)
                              for b in vectors[2:]] for a in vectors[:2]])
        self.assertAllClose(embedder.similarity(TEXTS[:2], TEXTS[2:]), expected, atol=1e-6)
        self.assertAllClose(embedder.similarity(vectors[:2], TEXTS[2:]), expected, atol=1e-6)
        self.assertAllClose(cosine_similarity(vectors, vectors).diagonal(), np.ones(4),
                            atol=1e-6)

    def test_keras_file_keeps_the_embedder(self):
        folder = sentence_transformers_folder(self.tmp_path(), {"pooling_mode": ["cls", "max"]})
        embedder = modeling.BertTextEmbedder.from_pretrained(folder)
        path = self.tmp_path() / "embedder.keras"
        embedder.save(path)
        reloaded = keras.saving.load_model(path)
        self.assertEqual((reloaded.pooling, reloaded.normalize), (["cls", "max"], True))
        self.assertAllClose(reloaded.predict(TEXTS), embedder.predict(TEXTS), atol=1e-6)
        self.assertEqual(reloaded.predict([]).shape, (0, 64))

    def test_folders_it_cannot_reproduce_are_refused(self):
        cases = [
            ({"pooling_mode_weightedmean_tokens": True}, None, "weightedmean is not implemented"),
            ({"pooling_mode": "lasttoken"}, None, "lasttoken is not implemented"),
            ({"pooling_mode_mean_tokens": True}, "sentence_transformers.models.Dense",
             "Transformer, Pooling, Normalize, Dense"),
        ]
        for pooling, extra, message in cases:
            folder = sentence_transformers_folder(self.tmp_path(), pooling, extra_module=extra)
            with self.assertRaisesRegex(ConfigError, message):
                BertTextEmbedder.from_pretrained(folder)
        folder = sentence_transformers_folder(self.tmp_path(), {})
        (folder / "modules.json").write_text("[{")
        with self.assertRaisesRegex(ConfigError, "modules.json: invalid JSON at line 1"):
            BertTextEmbedder.from_pretrained(folder)

    def test_bad_arguments_are_refused_by_name(self):
        folder = sentence_transformers_folder(self.tmp_path(), {"pooling_mode_mean_tokens": True})
        refusals = [
            (lambda: BertTextEmbedder.from_pretrained(None), TypeError, "source must be"),
            (lambda: BertTextEmbedder.from_pretrained(folder, pooling="sum"), ValueError,
             "pooling must be one of cls, max, mean, mean_sqrt_len_tokens.*'sum'"),
            (lambda: BertTextEmbedder.from_pretrained(folder, pooling=["cls", "cls"]),
             ValueError, "pooling must be"),
            (lambda: BertTextEmbedder.from_pretrained(folder, normalize="yes"), TypeError,
             "normalize must be True, False or None"),
            (lambda: BertTextEmbedder.from_pretrained(folder, sequence_length=2), ValueError,
             "sequence_length must be an integer >= 3"),
            (lambda: BertTextEmbedder.from_pretrained(folder, sequence_length=65), ValueError,
             "sequence_length"),
        ]
        embedder = BertTextEmbedder.from_pretrained(folder)
        refusals += [
            (lambda: embedder.predict("a film"), TypeError, "x must be a list of texts, got one "
             "str: wrap it as \\[x\\]"),
            (lambda: embedder.predict(["a film", 3]), TypeError, "x\\[1\\] must be a str"),
            (lambda: embedder.predict(["a film"], batch_size=0), ValueError,
             "batch_size must be a positive integer"),
            (lambda: embedder.similarity(["a"], "b"), TypeError, "b must be a list of texts"),
            (lambda: cosine_similarity(np.ones((2, 3)), np.ones((2, 4))), ValueError,
             "a and b must be vectors"),
        ]
        for call, error, message in refusals:
            with self.assertRaisesRegex(error, message):
                call()


@pytest.mark.long
@pytest.mark.assets
class RealMiniLMEmbedderTest(TestCase):
    """Against sentence-transformers 6.2's own vectors (tools/record_sentence_embeddings.py)."""

    def test_vectors_equal_sentence_transformers(self):
        folder = minilm_or_skip(self)
        golden = np.load(MINILM_GOLDEN)
        texts = json.loads(str(golden["texts"]))
        embedder = BertTextEmbedder.from_pretrained(folder)
        self.assertEqual((embedder.pooling, embedder.normalize,
                          embedder.preprocessor.sequence_length), (["mean"], True, 256))
        self.assertAllClose(embedder.predict(texts, batch_size=4), golden["folder"],
                            atol=1e-5, rtol=0)
        for mode in ("cls", "max", "mean_sqrt_len_tokens"):
            unnormalized = BertTextEmbedder.from_pretrained(folder, pooling=mode,
                                                            normalize=False)
            self.assertAllClose(unnormalized.predict(texts), golden[mode], atol=1e-5, rtol=0,
                                msg=mode)
