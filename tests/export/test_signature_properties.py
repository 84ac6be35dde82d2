"""What the exported signatures do with drawn inputs, hostile ones included (Hypothesis).

The property, for every call of a served model: it answers with finite
outputs, one row per input row, when every input is what the signature
declares (int32 ids inside their tables, a mask of 0s and 1s, the same
shape for all three, a length the model has positions for); anything else
is refused, never answered. A SavedModel's refusal (the numeric model in
float and int8, the TF Hub encoder, the raw-text models) is a
`tf.errors.InvalidArgumentError` naming the input, or the binding error of
a wrong dtype naming it; LiteRT's interpreter, whose converter drops Assert
ops, refuses in its lookup (a RuntimeError) or its input binding (a
ValueError). No id is ever read as another word.

Each format is exported once per class, from the tiny classifier: with
`export_model` where the test reads the whole folder (tf_serving), with the
functions it calls where one file is enough (the int8 numeric model, the
TFLite flat buffer, the TF Hub encoder without its preprocessing).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer's ops the raw-text models use)
from hypothesis import event, example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from export.model_exports import export_model
from export.numeric import save_numeric
from export.tf_hub import HubEncoder
from export.tflite import write_tflite
from modeling import BertClassifier, load_encoder, load_tokenizer
from tests.fixtures import TINY_CONFIG, TestCase
from tests.modeling.property_strategies import budget
from tests.modeling.tiny_folder import tiny_folder

LABELS = ["neg", "pos"]
VOCAB_SIZE, POSITIONS = TINY_CONFIG["vocab_size"], TINY_CONFIG["max_position_embeddings"]
INT32 = (-2**31, 2**31 - 1)
INPUTS = ("input_ids", "input_mask", "segment_ids")
# The TF Hub encoder's names for the same inputs.
HUB_NAMES = {"input_ids": "input_word_ids", "input_mask": "input_mask",
             "segment_ids": "input_type_ids"}
ODD_TEXT = st.one_of(st.text(max_size=30), st.sampled_from(
    ["", " ", "\x00", "\u200b", "\U0001F600" * 40, "e\u0301", "\ufeffbom", "a\x00b", "x" * 3000,
     "\u0627\u0644\u0641\u064a\u0644\u0645", "great film", "the plot is dull"]))
ODD_BYTES = st.one_of(ODD_TEXT.map(lambda text: text.encode("utf-8", "surrogatepass")),
                      st.sampled_from([b"\xff\xfe", b"caf\xe9", b"\xc0\x80", b"\xed\xa0\x80"]))


TABLES = {"input_ids": VOCAB_SIZE, "input_mask": 2, "segment_ids": 2}
HOSTILE_VALUES = {"input_ids": [-1, -7, VOCAB_SIZE, *INT32], "input_mask": [2, -1, *INT32],
                  "segment_ids": [2, -1, *INT32]}
FAULTS = ["none"] * 4 + ["value", "value", "shape", "dtype", "length"]


@st.composite
def packed_inputs(draw) -> dict[str, np.ndarray]:
    """input_ids, input_mask, segment_ids: well formed, or with one kind of fault drawn in:
    values outside their tables, another shape, another dtype, a length with no room."""
    fault = draw(st.sampled_from(FAULTS))
    batch = draw(st.sampled_from([0, 1, 1, 2, 3]))
    lengths = [0, POSITIONS + 1, POSITIONS + 9] if fault == "length" else [1, 3, 8, 16,
                                                                           POSITIONS]
    length = draw(st.sampled_from(lengths))
    arrays = {name: draw(hnp.arrays(np.int32, (batch, length), elements=st.integers(
        min_value=0, max_value=TABLES[name] - 1))) for name in INPUTS}
    name = draw(st.sampled_from(INPUTS))
    if fault == "value" and batch:
        for _ in range(draw(st.integers(min_value=1, max_value=3))):
            row = draw(st.integers(min_value=0, max_value=batch - 1))
            column = draw(st.integers(min_value=0, max_value=length - 1))
            arrays[name][row, column] = draw(st.sampled_from(HOSTILE_VALUES[name]))
    elif fault == "shape":
        other = draw(st.sampled_from([length - 1, length + 1]))
        arrays[name] = np.resize(arrays[name], (batch, other)).astype(np.int32)
    elif fault == "dtype":
        arrays[name] = arrays[name].astype(draw(st.sampled_from([np.int64, np.float32,
                                                                 np.uint8])))
    return arrays


def well_formed(inputs: dict[str, np.ndarray]) -> bool:
    """What the signature must answer: int32, one shape, values in their tables, a length
    the model has positions for (an empty batch included)."""
    shapes = {value.shape for value in inputs.values()}
    if len(shapes) != 1 or any(value.dtype != np.int32 for value in inputs.values()):
        return False
    batch, length = shapes.pop()
    if not 1 <= length <= POSITIONS:
        return False
    ids, mask, segments = (inputs[name] for name in INPUTS)
    return bool(((ids >= 0) & (ids < VOCAB_SIZE)).all() and np.isin(mask, [0, 1]).all()
                and np.isin(segments, [0, 1]).all())


def _classifier_file(root) -> str:
    model = BertClassifier.from_pretrained(tiny_folder(root), num_labels=2, sequence_length=16,
                                           label_names=LABELS)
    path = root / "classifier.keras"
    model.save(path)
    return str(path)


class _SignatureProperty(TestCase):
    """The property's checks, shared by every served format."""

    def check_answer_or_refusal(self, call, inputs: dict[str, np.ndarray], output: str,
                                width: tuple[int, ...], refusals: tuple[type, ...],
                                names: tuple[str, ...] = INPUTS) -> None:
        """`call(inputs)` answers `output` [batch, *width] finite when the inputs are well
        formed; otherwise it raises one of `refusals` naming one of `names`."""
        expected = well_formed(inputs)
        try:
            outputs = call(inputs)
        except Exception as error:  # noqa: BLE001 - the property is about which errors
            event(f"refused: {type(error).__name__}")
            self.assertFalse(expected, f"well-formed inputs refused: {error}")
            self.assertIsInstance(error, refusals, repr(error))
            if not isinstance(error, RuntimeError):  # LiteRT's failed lookup names no input
                # A loaded signature reports a wrong dtype by input number; the binding
                # error it comes from (its context) names the input.
                told = f"{error} {error.__context__}"
                self.assertTrue(any(name in told for name in names), told[:2000])
            return
        event("answered")
        self.assertTrue(expected, f"answered {sorted(inputs)} that are not well formed: "
                                  f"{ {name: (value.dtype, value.shape) for name, value in inputs.items()} }")
        value = np.asarray(outputs[output])
        self.assertEqual(value.shape, (len(inputs["input_ids"]), *width))
        self.assertTrue(np.isfinite(value).all())


class NumericSignaturePropertiesTest(_SignatureProperty):
    """`model/1` of a tf_serving export, float and int8, and its raw-text and preprocess models."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        root = cls.class_folder()
        source = _classifier_file(root)
        cls.float = export_model(source, root / "float", "tf_serving", sequence_length=16)
        # int8: the numeric model alone, as the tf_serving export writes it after quantizing.
        quantized = keras.saving.load_model(source)
        quantized.quantize("int8")
        save_numeric(quantized, str(root / "int8"))
        cls.loaded = {"float": tf.saved_model.load(str(cls.float / "model" / "1")),
                      "int8": tf.saved_model.load(str(root / "int8"))}
        cls.raw_text = tf.saved_model.load(str(cls.float / "raw_text"))
        cls.preprocess = tf.saved_model.load(str(cls.float / "preprocess"))

    def _numeric(self, kind: str, inputs: dict[str, np.ndarray]) -> None:
        serve = self.loaded[kind].signatures["serving_default"]
        self.check_answer_or_refusal(
            lambda arrays: serve(**{name: tf.constant(value) for name, value in arrays.items()}),
            inputs, "probabilities", (len(LABELS),),
            (tf.errors.InvalidArgumentError, TypeError, ValueError))

    @example(inputs={name: np.zeros((0, 8), np.int32) for name in INPUTS})
    @given(inputs=packed_inputs())
    def test_float_model_answers_or_refuses_naming_the_input(self, inputs):
        self._numeric("float", inputs)

    @given(inputs=packed_inputs())
    def test_int8_model_answers_or_refuses_naming_the_input(self, inputs):
        self._numeric("int8", inputs)

    @budget(quick=6)
    @example(texts=[b""], seconds=[])  # an empty second column is a mismatch, not no column
    @given(texts=st.lists(ODD_BYTES, max_size=4), seconds=st.none() | st.lists(ODD_BYTES,
                                                                            max_size=4))
    def test_raw_text_models_give_one_row_per_text_or_name_the_mismatch(self, texts, seconds):
        """Any bytes, invalid UTF-8 included, are text to the raw-text models; only pairs of
        different batch sizes are refused."""
        arguments = {"text_a": tf.constant(texts, tf.string, shape=[len(texts)])}
        if seconds is not None:
            arguments["text_b"] = tf.constant(seconds, tf.string, shape=[len(seconds)])
        name = "serve_single" if seconds is None else "serve_pair"
        for model, output in ((self.raw_text, "probabilities"), (self.preprocess, "input_ids")):
            try:
                served = model.signatures[name](**arguments)
            except tf.errors.InvalidArgumentError as error:
                event("refused: different batch sizes")
                self.assertNotEqual(len(texts), len(texts if seconds is None else seconds))
                self.assertIn("text_a", str(error))
                continue
            event(f"answered {name}")
            self.assertEqual(len(served[output]), len(texts))
            if output == "probabilities":
                self.assertTrue(np.isfinite(served[output]).all())
                self.assertAllClose(np.sum(served[output], axis=-1), np.ones(len(texts)))


class HubEncoderSignaturePropertiesTest(_SignatureProperty):
    """The TF Hub encoder, on its own input names."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        root = cls.class_folder()
        # The encoder alone, saved as the tf_hub export saves it beside its preprocessing.
        folder = tiny_folder(root)
        hub = HubEncoder(load_encoder(folder, output_hidden_states=True), load_tokenizer(folder))
        tf.saved_model.save(hub, str(root / "encoder"), signatures={"serving_default": hub.serve})
        cls.encoder = tf.saved_model.load(str(root / "encoder"))

    @given(inputs=packed_inputs())
    def test_encoder_answers_or_refuses_naming_the_input(self, inputs):
        serve = self.encoder.signatures["serving_default"]
        self.check_answer_or_refusal(
            lambda arrays: serve(**{HUB_NAMES[name]: tf.constant(value)
                                    for name, value in arrays.items()}),
            inputs, "pooled_output", (TINY_CONFIG["hidden_size"],),
            (tf.errors.InvalidArgumentError, TypeError, ValueError),
            names=(*INPUTS, *HUB_NAMES.values()))


class LiteRtSignaturePropertiesTest(_SignatureProperty):
    """`model.tflite` of a tflite export, in LiteRT's interpreter (TensorFlow's without it)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        root = cls.class_folder()
        # The flat buffer alone, as the tflite export writes it beside its preprocessing.
        write_tflite(keras.saving.load_model(_classifier_file(root)), root / "model.tflite")
        try:
            from ai_edge_litert.interpreter import Interpreter
        except ImportError:
            Interpreter = tf.lite.Interpreter
        cls.interpreter = Interpreter(model_path=str(root / "model.tflite"))

    # An empty batch whose inputs differ in length: once answered as if well formed.
    @example(inputs={"input_ids": np.zeros((0, 2), np.int32),
                     "input_mask": np.zeros((0, 1), np.int32),
                     "segment_ids": np.zeros((0, 1), np.int32)})
    @given(inputs=packed_inputs())
    def test_interpreter_answers_or_fails_its_lookup(self, inputs):
        runner = self.interpreter.get_signature_runner("serving_default")
        self.check_answer_or_refusal(lambda arrays: runner(**arrays), inputs, "logits",
                                     (len(LABELS),), (RuntimeError, ValueError))


if __name__ == "__main__":
    tf.test.main()
