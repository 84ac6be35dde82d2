"""export_model.py's serving formats from a runner's folder: a fine-tuned classifier on ids, in
TF Serving's layout, compiled by XLA, in TFLite, in int8; and every bad request refused before
anything is written (every kind's tf_serving export: test_serving_preprocess.py).

One tiny classifier folder is exported once per format for the class; each
test reads those exports as a user would.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.classifier import BertClassifier
from network.checkpoints import export_google_checkpoint
from network.config import BertConfig
from tests.export.exported_models import without_graph_rewrites
from tests.export.lite_runner import RUNTIME, lite_runner
from tests.fixtures import REPO, SAME_KERNELS, TINY_CONFIG, TestCase, launched, run_main
from tests.modeling.tiny_folder import tiny_folder
from tests.network.test_input_checks import BAD_INPUTS, with_bad_value

TEXTS = ["the film was unbelievable", "a dull plot", "", "john lives in paris ! the cat sat"]
SECONDS = ["a fine film", "", "the acting", "boring"]
SEQUENCE_LENGTH = 16
LABELS = ["negative", "neutral", "positive"]
# int8 against float32, as tests/network/test_quantization.py measured it on the tiny model:
# every output within 3% of the largest.
_INT8_RTOL = 0.03
_XLA_ATOL = 1e-5  # XLA fuses and reorders float32 sums
_TFLITE_ATOL = 1e-4  # the bar for TFLite against the SavedModel

# Run by a fresh interpreter: the numeric model alone, never tensorflow_text.
_NUMERIC_USER = """
import sys
import numpy as np
import tensorflow as tf

folder, inputs, out = sys.argv[1:4]
model = tf.saved_model.load(folder).signatures["serving_default"]
ids = np.load(inputs)
outputs = model(**{name: tf.constant(ids[name]) for name in ids.files})
assert "tensorflow_text" not in sys.modules, "tensorflow_text was imported"
np.savez(out, **{name: value.numpy() for name, value in outputs.items()})
"""


def _export(source: Path, out: Path, *flags: str) -> Path:
    run_main("export_model.py", {"source": source, "output_dir": out,
                                 "sequence_length": SEQUENCE_LENGTH,
                                 **dict(flag.split("=", 1) for flag in flags)})
    return out


class _Numeric:
    """The numeric SavedModel's signature, its loaded object kept alive beside it."""

    def __init__(self, folder: Path):
        self.loaded = tf.saved_model.load(str(folder))
        self.signature = self.loaded.signatures["serving_default"]

    def __call__(self, **ids) -> dict:
        return self.signature(**ids)


class ClassifierExportTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        cls.source = tiny_folder(cls.root, "sentiment")
        keras.utils.set_random_seed(3)
        # Large weights, so logits are of order 1 and the tolerances below mean something.
        model = BertClassifier(BertConfig.from_dict({**TINY_CONFIG, "initializer_range": 0.5}),
                               num_labels=len(LABELS))
        export_google_checkpoint(model, cls.source / "bert_model.ckpt")
        (cls.source / "labels.txt").write_text("".join(f"{label}\n" for label in LABELS))
        cls.float = _export(cls.source, cls.root / "float", "format=tf_serving")
        cls.int8 = _export(cls.source, cls.root / "int8", "format=tf_serving", "quantize=int8")
        cls.lite = _export(cls.source, cls.root / "lite", "format=tflite")
        # Each SavedModel loaded once: a load's signatures are set up anew on their first call.
        without_graph_rewrites(cls)
        cls.preprocess = tf.saved_model.load(str(cls.float / "preprocess"))
        cls.numeric = {folder: _Numeric(folder / "model" / "1")
                       for folder in (cls.float, cls.int8)}
        cls.ids = {name: value.numpy() for name, value in
                   cls.preprocess.signatures["serving_default"](text_a=tf.constant(TEXTS)).items()}
        cls.float_outputs = {name: value.numpy() for name, value in
                             cls.numeric[cls.float](**cls.ids).items()}

    def test_saved_model_layout_is_tf_servings(self):
        self.assertEqual(sorted(path.name for path in self.float.iterdir()),
                         ["export_owner.json", "labels.txt", "model", "preprocess", "raw_text"])
        self.assertEqual([path.name for path in (self.float / "model").iterdir()], ["1"])
        self.assertTrue((self.float / "model" / "1" / "saved_model.pb").is_file())
        self.assertTrue((self.float / "model" / "1" / "variables" / "variables.index").is_file())
        self.assertEqual((self.float / "labels.txt").read_text().split(), LABELS)

    def test_preprocess_then_numeric_is_the_raw_text_model(self):
        raw = tf.saved_model.load(str(self.float / "raw_text"))
        preprocess, numeric = self.preprocess, self.numeric[self.float]
        for name, texts in (("serve_single", {"text_a": TEXTS}),
                            ("serve_pair", {"text_a": TEXTS, "text_b": SECONDS})):
            texts = {key: tf.constant(value) for key, value in texts.items()}
            ids = preprocess.signatures[name](**texts)
            self.assertEqual(sorted(ids), ["input_ids", "input_mask", "segment_ids"])
            self.assertEqual(ids["input_ids"].dtype, tf.int32)
            expected = raw.signatures[name](**texts)["probabilities"]
            self.assertAllClose(numeric(**ids)["probabilities"], expected, atol=1e-6, rtol=0)
        self.assertEqual(self.ids["input_ids"].shape[0], len(TEXTS))

    def test_ids_outside_their_tables_are_refused_by_every_served_model(self):
        """The numeric SavedModel (float and int8) fails naming the input; LiteRT, whose
        converter drops Assert ops, fails its gather: none answers for another id."""
        served = list(self.numeric.values())
        for case, name, value, message in BAD_INPUTS:
            bad = with_bad_value(self.ids, name, value)
            for numeric in served:
                with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message, msg=case):
                    numeric(**bad)
            with self.assertRaisesRegex(RuntimeError, r"\(GATHER\) failed to invoke",
                                        msg=f"{case}, {RUNTIME}"):
                lite_runner(self.lite / "model.tflite")(**bad)
        self.assertEqual(lite_runner(self.lite / "model.tflite")(**self.ids)["logits"].shape,
                         (len(TEXTS), len(LABELS)))

    @pytest.mark.slow
    def test_numeric_model_runs_without_tensorflow_text(self):
        inputs, out = self.root / "ids.npz", self.root / "served.npz"
        np.savez(inputs, **self.ids)
        subprocess.run([sys.executable, "-c", _NUMERIC_USER, str(self.float / "model" / "1"),
                        str(inputs), str(out)], check=True, cwd=self.root,
                       env={"PATH": "/usr/bin:/bin", "TF_CPP_MIN_LOG_LEVEL": "2",
                            **SAME_KERNELS})
        served, expected = np.load(out), self.float_outputs
        self.assertEqual(sorted(served.files), ["logits", "probabilities"])
        for name in served.files:
            self.assertAllClose(served[name], expected[name], atol=1e-6, rtol=0)

    def test_xla_compiles_the_numeric_signature(self):
        for folder in (self.float, self.int8):
            signature = self.numeric[folder]
            compiled = tf.function(lambda **ids: signature(**ids), jit_compile=True)
            plain = signature(**self.ids)["logits"]
            self.assertAllClose(compiled(**self.ids)["logits"], plain, atol=_XLA_ATOL, rtol=0)

    def test_tflite_gives_the_saved_models_logits(self):
        runner = lite_runner(self.lite / "model.tflite")
        served = runner(**self.ids)
        expected = self.float_outputs
        self.assertEqual(sorted(served), ["logits", "probabilities"])
        self.assertGreater(np.abs(expected["logits"]).max(), 0.5)  # the tolerance is tight
        self.assertAllClose(served["logits"], expected["logits"], atol=_TFLITE_ATOL, rtol=0)
        self.assertEqual(sorted(path.name for path in self.lite.iterdir()),
                         ["export_owner.json", "labels.txt", "model.tflite", "preprocess"])

    @pytest.mark.long
    @pytest.mark.slow
    def test_a_file_size_limit_ends_in_one_line_naming_the_file(self):
        out = self.root / "limited"
        limited = subprocess.run(
            launched([sys.executable, str(REPO / "export_model.py"), f"--source={self.source}",
                      "--format=tflite", f"--output_dir={out}",
                      f"--sequence_length={SEQUENCE_LENGTH}"], file_size_limit=20_000),
            capture_output=True, text=True, timeout=300,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        self.assertEqual(limited.returncode, 1, limited.stderr)
        self.assertNotIn("Traceback", limited.stderr)
        self.assertRegex(limited.stderr.strip().splitlines()[-1],
                         rf"^export_model\.py: error: cannot write {re.escape(str(out))}/"
                         r"model\.tflite: the file would exceed this process' file-size limit")
        self.assertFalse(out.exists())
        self.assertEqual([path.name for path in self.root.iterdir() if path.name.startswith(".")],
                         [])

    def test_int8_export_holds_int8_kernels_and_stays_close(self):
        dtypes = tf.train.load_checkpoint(
            str(self.int8 / "model" / "1" / "variables" / "variables")
        ).get_variable_to_dtype_map()
        int8_kernels = [name for name, dtype in dtypes.items() if dtype == tf.int8]
        # Two blocks of six projections, the pooler and the classifier.
        self.assertLen(int8_kernels, 2 * 6 + 2)
        float_dtypes = {dtype for name, dtype in
                        tf.train.load_checkpoint(str(self.float / "model" / "1" / "variables" /
                                                     "variables")).get_variable_to_dtype_map()
                        .items()}
        self.assertNotIn(tf.int8, float_dtypes)
        quantized = self.numeric[self.int8](**self.ids)["logits"].numpy()
        expected = self.float_outputs["logits"]
        self.assertLessEqual(np.abs(quantized - expected).max(),
                             _INT8_RTOL * np.abs(expected).max())
        self.assertFalse(np.array_equal(quantized, expected))  # int8 really ran


class ClassifierExportRefusalTest(TestCase):
    """Each refusal is one line naming the flag, and leaves no output."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        cls.encoder_only = tiny_folder(cls.root, "pretrained")

    def _refused(self, pattern: str, **flags) -> None:
        out = self.root / "out"
        with self.assertRaisesRegex(ValueError, pattern) as caught:
            run_main("export_model.py", {"source": self.encoder_only, "output_dir": out,
                                         "sequence_length": SEQUENCE_LENGTH, **flags})
        self.assertNotIn("\n", str(caught.exception))
        self.assertFalse(out.exists())

    def test_int8_is_refused_by_the_checkpoint_formats(self):
        for format_name in ("google", "huggingface"):
            self._refused(rf"^--quantize='int8' exports int8 SavedModels; the '{format_name}' "
                          r"format writes .*, so leave --quantize unset for it$",
                          format=format_name, quantize="int8")

    def test_unknown_quantization_mode(self):
        self._refused(r"^--quantize must be 'int8' \(or unset\), got 'int4'$",
                      format="tf_serving", quantize="int4")

    def test_serving_version(self):
        self._refused(r"^--serving_version must be a positive integer, got 0",
                      format="tf_serving", serving_version=0)
        self._refused(r"^--serving_version applies to --format=tf_serving, not --format=tflite$",
                      format="tflite", serving_version=2)

    def test_a_pretrained_encoder_has_no_serving_export(self):
        # (tflite takes it: tests/export/test_tflite.py)
        self._refused(r"^a BertPretrainer has no SavedModel on raw text: export a "
                      r"fine-tuned classifier, tagger or span model, or an embedder",
                      format="tf_serving")

    def test_a_folder_of_the_users_is_kept(self):
        out = self.root / "mine"
        out.mkdir()
        (out / "notes.txt").write_text("mine")
        with self.assertRaisesRegex(ValueError, r"^--output_dir .* holds files no export wrote"):
            run_main("export_model.py", {"source": self.encoder_only, "output_dir": out,
                                         "format": "tf_serving"})
        self.assertEqual([path.name for path in out.iterdir()], ["notes.txt"])


if __name__ == "__main__":
    tf.test.main()
