"""Every kind of model in LiteRT: the bare encoder from a Google and a Hugging Face folder, the
task models, LiteRT's int8, and what hostile ids do in the interpreter.

Each flat buffer runs in `ai_edge_litert`'s interpreter (`tests.export.lite_runner`;
TensorFlow's where LiteRT is absent, and the messages say which) and is
compared with the Keras model on the same ids. Each export is written once
per class; the tests only read it.
"""

import shutil

import keras
import numpy as np
import tensorflow as tf

from export.model_exports import export_model
from export.numeric import NumericServing
from export.sources import export_source
from export.tflite import write_tflite
from modeling.multiple_choice import BertMultipleChoice
from modeling.span_model import BertSpanModel
from modeling.text_embedder import BertTextEmbedder
from modeling.token_tagger import BertTokenTagger
from network.checkpoints import export_google_checkpoint, export_huggingface
from network.config import BertConfig
from network.encoder import load_encoder
from tests.export.lite_runner import RUNTIME, lite_runner
from tests.fixtures import TINY_CONFIG, TestCase
from tests.modeling.tiny_folder import tiny_folder
from tests.network.test_input_checks import BAD_INPUTS, packed, with_bad_value

SEQUENCE_LENGTH = 16
# float32 TFLite against the Keras model: the same sums in another order. Measured on these
# tiny models: at most 5e-7 (encoder) and 7e-6 (span logits of size 5, weights of range 0.5).
_FLOAT_ATOL = _FLOAT_RTOL = 1e-5
# LiteRT's dynamic-range int8 against float32, relative to the largest output. Measured on
# the tiny encoder: 0.0025 (sequence_output), 0.0087 (pooled_output).
_INT8_RTOL = 0.03
# int8 file size against float32: measured 0.65 on the tiny encoder, whose tables under
# 1024 values and whose flat buffer's own overhead stay as they were.
_INT8_SIZE = 0.75
ENCODER_OUTPUTS = ["pooled_output", "sequence_output"]


def _outputs(runner, ids: dict) -> dict:
    return {name: np.asarray(value) for name, value in runner(**ids).items()}


class EncoderTfliteTest(TestCase):
    """The bare encoder from a Google (TF1 checkpoint) folder in float32, and from the same
    weights in a Hugging Face folder in int8."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        keras.utils.set_random_seed(0)
        cls.google = tiny_folder(cls.root, "google")
        cls.hugging_face = cls.root / "hugging_face"
        export_huggingface(export_source(cls.google).model, cls.hugging_face,
                           BertConfig.from_dict(TINY_CONFIG))
        shutil.copyfile(cls.google / "vocab.txt", cls.hugging_face / "vocab.txt")
        cls.float = export_model(cls.google, cls.root / "float", "tflite", SEQUENCE_LENGTH)
        cls.int8 = export_model(cls.hugging_face, cls.root / "int8", "tflite", SEQUENCE_LENGTH,
                                quantize="int8")
        cls.encoder = load_encoder(str(cls.google))
        cls.ids = packed(batch=3, length=SEQUENCE_LENGTH)

    def _expected(self, ids: dict) -> dict:
        return {name: self.encoder(ids)[name].numpy() for name in ENCODER_OUTPUTS}

    def test_the_folder_holds_the_model_and_its_preprocessing(self):
        for folder in (self.float, self.int8):
            self.assertEqual(sorted(path.name for path in folder.iterdir()),
                             ["export_owner.json", "model.tflite", "preprocess"])

    def test_float_gives_the_keras_encoders_outputs(self):
        served = _outputs(lite_runner(self.float / "model.tflite"), self.ids)
        self.assertEqual(sorted(served), ENCODER_OUTPUTS, RUNTIME)
        for name, expected in self._expected(self.ids).items():
            self.assertAllClose(served[name], expected, atol=_FLOAT_ATOL, rtol=_FLOAT_RTOL,
                                msg=RUNTIME)

    def test_int8_is_smaller_and_close_to_float(self):
        self.assertLess((self.int8 / "model.tflite").stat().st_size,
                        _INT8_SIZE * (self.float / "model.tflite").stat().st_size)
        served = _outputs(lite_runner(self.int8 / "model.tflite"), self.ids)
        for name, expected in self._expected(self.ids).items():
            error = np.abs(served[name] - expected).max()
            self.assertLessEqual(error, _INT8_RTOL * np.abs(expected).max(), f"{name}, {RUNTIME}")
            self.assertGreater(error, _FLOAT_ATOL, f"{name}: int8 really ran")

    def test_preprocess_packs_the_ids_the_model_reads(self):
        import tensorflow_text  # noqa: F401  (the preprocessing's ops)

        preprocess = tf.saved_model.load(str(self.float / "preprocess"))
        ids = preprocess.signatures["serve_pair"](text_a=tf.constant(["the film", "a cat"]),
                                                 text_b=tf.constant(["was dull", ""]))
        ids = {name: value.numpy() for name, value in ids.items()}
        self.assertEqual(ids["input_ids"].shape, (2, SEQUENCE_LENGTH))
        served = _outputs(lite_runner(self.float / "model.tflite"), ids)
        self.assertAllClose(served["pooled_output"], self._expected(ids)["pooled_output"],
                            atol=_FLOAT_ATOL, rtol=_FLOAT_RTOL, msg=RUNTIME)

    def test_ids_outside_their_tables_fail_the_call(self):
        """The converter drops Assert ops: the lookups refuse the value (never read another
        word's row)."""
        for case, name, value, _ in BAD_INPUTS:
            for folder in (self.float, self.int8):
                with self.assertRaisesRegex(RuntimeError, r"\(GATHER\) failed to invoke",
                                            msg=f"{case}, {RUNTIME}"):
                    lite_runner(folder / "model.tflite")(**with_bad_value(self.ids, name, value))

    def test_an_all_padding_row_gives_the_keras_models_outputs(self):
        ids = {**self.ids, "input_mask": np.zeros_like(self.ids["input_mask"])}
        served = _outputs(lite_runner(self.float / "model.tflite"), ids)
        for name, expected in self._expected(ids).items():
            self.assertTrue(np.isfinite(served[name]).all(), name)
            self.assertAllClose(served[name], expected, atol=_FLOAT_ATOL, rtol=_FLOAT_RTOL,
                                msg=RUNTIME)

    def test_wrong_shapes_and_types_fail_the_call(self):
        path = self.float / "model.tflite"
        too_long = TINY_CONFIG["max_position_embeddings"] + 1
        cases = {
            "longer than max_position_embeddings":
                {name: np.zeros((1, too_long), np.int32) for name in self.ids},
            "a mask shorter than the ids": {**self.ids,
                                            "input_mask": self.ids["input_mask"][:, :-1]},
            "segment ids of another batch": {**self.ids,
                                              "segment_ids": self.ids["segment_ids"][:1]},
            "one row without its batch": {name: value[0] for name, value in self.ids.items()},
        }
        for case, ids in cases.items():
            with self.assertRaisesRegex(RuntimeError, "failed to prepare",
                                        msg=f"{case}, {RUNTIME}"):
                lite_runner(path)(**ids)
        with self.assertRaisesRegex(ValueError, "Got value of type INT64 but expected type INT32"):
            lite_runner(path)(**{name: value.astype(np.int64) for name, value in self.ids.items()})
        with self.assertRaisesRegex(ValueError, "expected 3 vs provided 2"):
            lite_runner(path)(input_ids=self.ids["input_ids"], input_mask=self.ids["input_mask"])

    def test_an_empty_batch_gives_empty_outputs(self):
        ids = {name: value[:0] for name, value in self.ids.items()}
        served = _outputs(lite_runner(self.float / "model.tflite"), ids)
        self.assertEqual(served["sequence_output"].shape, (0, SEQUENCE_LENGTH, 32))
        self.assertEqual(served["pooled_output"].shape, (0, 32))


class TaskModelTfliteTest(TestCase):
    """A tagger, a span model and an embedder written as the export writes them, and a
    multiple-choice model exported from its folder; each against its numeric model."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        keras.utils.set_random_seed(1)
        # Large weights, so outputs are of order 1 and the tolerance means something.
        config = BertConfig.from_dict({**TINY_CONFIG, "initializer_range": 0.5})
        cls.models = {"tagger": BertTokenTagger(config, num_labels=3),
                      "span": BertSpanModel(config),
                      "embedder": BertTextEmbedder(config, pooling="mean", normalize=True)}
        for kind, model in cls.models.items():
            write_tflite(model, cls.root / f"{kind}.tflite")
        choice_folder = tiny_folder(cls.root, "choice")
        cls.models["choice"] = BertMultipleChoice(config)
        export_google_checkpoint(cls.models["choice"], choice_folder / "bert_model.ckpt")
        cls.choice = export_model(choice_folder, cls.root / "choice_lite", "tflite",
                                  SEQUENCE_LENGTH)
        cls.ids = packed(batch=2, length=SEQUENCE_LENGTH)

    def _check(self, kind: str, path, ids: dict, names: list[str]) -> dict:
        served = _outputs(lite_runner(path), ids)
        self.assertEqual(sorted(served), names, RUNTIME)
        expected = NumericServing(self.models[kind]).serve(**ids)
        for name in names:
            self.assertAllClose(served[name], expected[name], atol=_FLOAT_ATOL, rtol=_FLOAT_RTOL,
                                msg=f"{kind} {name}, {RUNTIME}")
        return served

    def test_tagger(self):
        served = self._check("tagger", self.root / "tagger.tflite", self.ids,
                             ["logits", "probabilities"])
        self.assertEqual(served["logits"].shape, (2, SEQUENCE_LENGTH, 3))

    def test_span_model(self):
        self._check("span", self.root / "span.tflite", self.ids, ["end_logits", "start_logits"])

    def test_embedder_pools_and_normalizes(self):
        served = self._check("embedder", self.root / "embedder.tflite", self.ids, ["embedding"])
        self.assertAllClose(np.linalg.norm(served["embedding"], axis=-1), [1.0, 1.0])

    def test_multiple_choice_from_its_folder(self):
        self.assertEqual(sorted(path.name for path in self.choice.iterdir()),
                         ["export_owner.json", "model.tflite", "preprocess"])
        choices = {name: np.stack([value, value[::-1]], axis=1)  # [batch, 2 choices, seq]
                   for name, value in self.ids.items()}
        served = self._check("choice", self.choice / "model.tflite", choices, ["logits"])
        self.assertEqual(served["logits"].shape, (2, 2))

    def test_another_quantization_is_refused_before_writing(self):
        path = self.root / "int4.tflite"
        with self.assertRaisesRegex(ValueError, r"^quantize must be 'int8' \(or unset\), "
                                                r"got 'int4'$"):
            write_tflite(self.models["span"], path, "int4")
        self.assertFalse(path.exists())


if __name__ == "__main__":
    tf.test.main()
