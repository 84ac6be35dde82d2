"""Every kind's tf_serving export: its preprocess/ then model/1/ give what its raw_text/ gives.

One tiny model of each kind (classifier, tagger, span model, embedder) is
exported once for the class, from a model object or its `.keras` file;
each test reads the three SavedModels as a user would.
"""

import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer's ops preprocess/ uses)

from export.model_exports import export_model
from modeling import BertClassifier, BertSpanModel, BertTextEmbedder, BertTokenTagger
from modeling.preprocessor import load_preprocessor
from tasks.squad import SquadTask
from tests.fixtures import SAME_KERNELS, TestCase, tiny_config, write_tiny_config
from tests.modeling.tiny_folder import tiny_folder
from text import answer_spans

POSITIONS = 96  # room for SquadTask's 64 question pieces and a context
SHORT, LONG = 16, 80  # windows: a classifier's, tagger's and embedder's; a span model's
LABELS = ["negative", "neutral", "positive"]
TAGS = ["O", "B-PER", "B-LOC"]
TEXTS = ["the film was unbelievable", "a dull plot", "", "john lives in paris ! the cat sat"]
SECONDS = ["a fine film", "", "the acting", "boring"]
# The last sentence has more pieces than a window: it is read in several windows.
SENTENCES = ["john lives in paris", "the unbelievable cat  sat", "",
             "the cat sat on the mat , john lives in paris , the film was dull"]
QUESTIONS = ["who lives in paris ?", "what", "where is the cat ?"]
CONTEXTS = ["john  lives in paris .", "the cat sat unbelievable on the mat",
            "the film was dull , the plot boring"]
_ATOL = 1e-5

# Run by a fresh interpreter: each kind's numeric model alone, never tensorflow_text.
_NUMERIC_USER = """
import sys
import numpy as np
import tensorflow as tf

for folder, inputs, out in zip(*[iter(sys.argv[1:])] * 3):
    model = tf.saved_model.load(folder).signatures["serving_default"]
    ids = np.load(inputs)
    outputs = model(**{name: tf.constant(ids[name]) for name in ids.files})
    np.savez(out, **{name: value.numpy() for name, value in outputs.items()})
assert "tensorflow_text" not in sys.modules, "tensorflow_text was imported"
"""


def _numpy(outputs: dict) -> dict:
    return {name: value.numpy() for name, value in outputs.items()}


def _ids(packed: dict) -> dict:
    return {name: packed[name] for name in ("input_ids", "input_mask", "segment_ids")}


@pytest.mark.long
class EveryKindServingTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        folder = tiny_folder(cls.root)
        write_tiny_config(folder / "bert_config.json", max_position_embeddings=POSITIONS)
        config = tiny_config(max_position_embeddings=POSITIONS, initializer_range=0.5)
        keras.utils.set_random_seed(7)
        cls.models = {
            "classifier": BertClassifier(config, num_labels=len(LABELS), label_names=LABELS,
                                         preprocessor=load_preprocessor(folder, SHORT)),
            "tagger": BertTokenTagger(config, num_labels=len(TAGS), label_names=TAGS,
                                      preprocessor=load_preprocessor(folder, SHORT)),
            "span": BertSpanModel(config, preprocessor=load_preprocessor(folder, LONG)),
            "embedder": BertTextEmbedder(config, pooling=["mean", "max"], normalize=True,
                                         preprocessor=load_preprocessor(folder, SHORT)),
        }
        tagger_file = cls.root / "tagger.keras"
        cls.models["tagger"].save(tagger_file)
        cls.exports = {kind: export_model(tagger_file if kind == "tagger" else model,
                                          cls.root / kind, "tf_serving")
                       for kind, model in cls.models.items()}

    def _load(self, kind: str, part: str):
        loaded = tf.saved_model.load(str(self.exports[kind] / part))
        self.addCleanup(lambda: loaded)  # a signature needs its object alive
        return loaded.signatures

    def _numeric(self, kind: str, ids: dict) -> dict:
        return _numpy(self._load(kind, "model/1")["serving_default"](**_ids(ids)))

    def test_layout_is_tf_servings(self):
        for kind, folder in self.exports.items():
            labelled = ["labels.txt"] if kind in ("classifier", "tagger") else []
            self.assertEqual(sorted(path.name for path in folder.iterdir()),
                             sorted(["export_owner.json", "model", "preprocess", "raw_text",
                                     *labelled]), kind)
            self.assertEqual([path.name for path in (folder / "model").iterdir()], ["1"])
            self.assertTrue((folder / "model" / "1" / "saved_model.pb").is_file())
        self.assertEqual((self.exports["tagger"] / "labels.txt").read_text().split(), TAGS)

    def test_classifier_ids_give_the_raw_text_probabilities(self):
        raw, preprocess = self._load("classifier", "raw_text"), self._load("classifier",
                                                                           "preprocess")
        for name, texts in (("serve_single", {"text_a": TEXTS}),
                            ("serve_pair", {"text_a": TEXTS, "text_b": SECONDS})):
            texts = {key: tf.constant(value) for key, value in texts.items()}
            ids = preprocess[name](**texts)
            self.assertEqual(sorted(ids), ["input_ids", "input_mask", "segment_ids"])
            served = self._numeric("classifier", ids)
            self.assertEqual(sorted(served), ["logits", "probabilities"])
            self.assertAllClose(served["probabilities"], raw[name](**texts)["probabilities"],
                                atol=_ATOL, rtol=0)
        self.assertAllClose(self._numeric("classifier", preprocess["serve_single"](
            text_a=tf.constant(TEXTS)))["logits"], self.models["classifier"].predict(TEXTS),
            atol=_ATOL, rtol=0)

    def test_tagger_logits_at_first_pieces_give_the_raw_text_tags(self):
        raw, preprocess = self._load("tagger", "raw_text"), self._load("tagger", "preprocess")
        words = tf.constant([["john", "lives", "in", "paris"], ["the", "cat", "", ""]])
        for name, inputs in (("serving_default", {"sentence": tf.constant(SENTENCES)}),
                             ("tag_words", {"words": words})):
            packed = _numpy(preprocess[name](**inputs))
            self.assertEqual(sorted(packed), ["first_piece", "input_ids", "input_mask",
                                              "segment_ids", "word_window", "words"])
            served = self._numeric("tagger", packed)
            self.assertAllClose(served["logits"], self.models["tagger"](_ids(packed)),
                                atol=_ATOL, rtol=0)
            self.assertAllClose(served["probabilities"],
                                tf.nn.softmax(served["logits"], axis=-1), atol=_ATOL, rtol=0)
            window, first = packed["word_window"], packed["first_piece"]
            tag_ids = served["logits"][np.maximum(window, 0), np.maximum(first, 0)].argmax(-1)
            tags = np.where(first >= 0, np.array(TAGS, object)[tag_ids], "")
            expected = raw[name](**inputs)
            self.assertEqual(tags.tolist(), [[tag.decode() for tag in row]
                                             for row in expected["tags"].numpy()])
            self.assertAllEqual(packed["words"], expected["words"])
        self.assertIn(-1, packed["first_piece"][1])  # padding
        long_packed = self._load("tagger", "preprocess")["serving_default"](
            sentence=tf.constant(SENTENCES))
        # A sentence longer than one window is read in several: more windows than sentences,
        # and every word of it is read somewhere.
        self.assertGreater(long_packed["input_ids"].shape[0], len(SENTENCES))
        self.assertAllEqual(long_packed["first_piece"].numpy()[3] >= 0,
                            [bool(word) for word in long_packed["words"].numpy()[3]])

    def test_span_logits_and_word_map_give_the_raw_text_answers(self):
        inputs = {"question": tf.constant(QUESTIONS), "context": tf.constant(CONTEXTS)}
        packed = _numpy(self._load("span", "preprocess")["serving_default"](**inputs))
        served = self._numeric("span", packed)
        self.assertEqual(sorted(served), ["end_logits", "start_logits"])
        expected_logits = self.models["span"](_ids(packed))
        for name in served:
            self.assertAllClose(served[name], expected_logits[name], atol=_ATOL, rtol=0)
        tokenizer = self.models["span"].preprocessor.tokenizer
        self.assertAllEqual(packed["window_row"], range(len(CONTEXTS)))  # each fits one window
        for row, context in enumerate(CONTEXTS):
            words = [word.decode() for word in packed["words"][row] if word]
            self.assertEqual(words, context.split())
            for index, word in enumerate(words):
                self.assertEqual(context[packed["word_start"][row, index]:
                                         packed["word_end"][row, index]], word)
            token_word = packed["token_word"][row]
            read = token_word[token_word >= 0]
            pieces = [piece for index in dict.fromkeys(read.tolist())
                      for piece in tokenizer.convert_tokens_to_ids(
                          tokenizer.tokenize(words[index]))]
            self.assertEqual(packed["input_ids"][row][token_word >= 0].tolist(), pieces)
        # The raw-text model's answer is the best span of these logits, read through the map.
        task = SquadTask()
        start, end, score, has_span = (value.numpy() for value in answer_spans.best_spans(
            tf.constant(served["start_logits"]), tf.constant(served["end_logits"]),
            tf.constant(packed["max_context"] & (packed["token_word"] >= 0)),
            tf.constant(packed["token_word"] >= 0), task.n_best_size, task.max_answer_length))
        raw = _numpy(self._load("span", "raw_text")["serving_default"](**inputs))
        self.assertGreaterEqual(has_span.sum(), 1)
        self.assertAllEqual(raw["start"] >= 0, has_span)
        self.assertAllClose(score[has_span], raw["score"][has_span], atol=_ATOL, rtol=0)
        for row in np.flatnonzero(has_span):
            first = packed["token_word"][row, start[row]]
            last = packed["token_word"][row, end[row]]
            self.assertGreaterEqual(raw["start"][row], packed["word_start"][row, first])
            self.assertLessEqual(raw["end"][row], packed["word_end"][row, last])

    def test_embedder_ids_give_the_raw_text_vectors_pooled_under_the_mask(self):
        ids = _numpy(self._load("embedder", "preprocess")["serving_default"](
            text=tf.constant(TEXTS)))
        served = self._numeric("embedder", ids)
        self.assertEqual(sorted(served), ["embedding"])
        raw = self._load("embedder", "raw_text")["serving_default"](text=tf.constant(TEXTS))
        self.assertAllClose(served["embedding"], raw["embedding"], atol=_ATOL, rtol=0)
        self.assertAllClose(served["embedding"], self.models["embedder"].predict(TEXTS),
                            atol=_ATOL, rtol=0)
        self.assertAllClose(np.linalg.norm(served["embedding"], axis=-1), np.ones(len(TEXTS)))
        # Padding is outside every pooled vector: the rows cut to their longest give the same.
        longest = ids["input_mask"].sum(-1).max()
        self.assertLess(longest, SHORT)
        cut = self._numeric("embedder", {name: value[:, :longest] for name, value in ids.items()})
        self.assertAllClose(cut["embedding"], served["embedding"], atol=_ATOL, rtol=0)

    def _every_kinds_ids(self) -> dict:
        return {
            "classifier": self._load("classifier", "preprocess")["serving_default"](
                text_a=tf.constant(TEXTS)),
            "tagger": self._load("tagger", "preprocess")["serving_default"](
                sentence=tf.constant(SENTENCES)),
            "span": self._load("span", "preprocess")["serving_default"](
                question=tf.constant(QUESTIONS), context=tf.constant(CONTEXTS)),
            "embedder": self._load("embedder", "preprocess")["serving_default"](
                text=tf.constant(TEXTS)),
        }

    def test_xla_compiles_every_kinds_numeric_model(self):
        for kind, packed in self._every_kinds_ids().items():
            signature = self._load(kind, "model/1")["serving_default"]
            compiled = tf.function(lambda **ids: signature(**ids), jit_compile=True)
            plain = _numpy(signature(**_ids(packed)))
            for name, value in compiled(**_ids(packed)).items():
                # XLA reorders float32 sums: the error scales with the outputs' size.
                self.assertAllClose(value, plain[name], rtol=0, msg=f"{kind} {name}",
                                    atol=_ATOL * max(1.0, np.abs(plain[name]).max()))

    @pytest.mark.slow
    def test_every_kinds_numeric_model_runs_without_tensorflow_text(self):
        arguments, expected = [], {}
        for kind, packed in self._every_kinds_ids().items():
            ids = _numpy(_ids(packed))
            np.savez(self.root / f"{kind}_ids.npz", **ids)
            arguments += [str(self.exports[kind] / "model" / "1"),
                          str(self.root / f"{kind}_ids.npz"), str(self.root / f"{kind}.npz")]
            expected[kind] = self._numeric(kind, ids)
        subprocess.run([sys.executable, "-c", _NUMERIC_USER, *arguments], check=True,
                       cwd=self.root, env={"PATH": "/usr/bin:/bin", "TF_CPP_MIN_LOG_LEVEL": "2",
                                           **SAME_KERNELS})
        for kind, outputs in expected.items():
            served = np.load(self.root / f"{kind}.npz")
            self.assertEqual(sorted(served.files), sorted(outputs), kind)
            for name in served.files:
                self.assertAllClose(served[name], outputs[name], atol=1e-6, rtol=0, msg=kind)


if __name__ == "__main__":
    tf.test.main()
