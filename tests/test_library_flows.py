"""The library's first five minutes, end to end: raw text in, predictions and exports out.

Each flow a new user meets runs here on one model folder: the tiny
in-repository model by default, or a real Hugging Face BERT folder named by
`BERT_TEST_MODEL` (MiniLM's folder, `data_prep.corpora.assets.minilm_dir()`,
also checks ids and outputs against the Hugging Face reference in
tests/golden). The reloads run in fresh processes from a temporary working
folder, so they exercise whatever installation is on the path (a
`pip install` of the checkout, run from outside it, tests the package).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import modeling
from network.presets import DownloadError
from tests.fixtures import GOLDEN, TestCase
from tests.modeling.tiny_folder import tiny_folder
from text.sentence_pairs import pack_ids
from text.tokenization import FullTokenizer

REAL_FOLDER = os.environ.get("BERT_TEST_MODEL")
TEXTS = ["a great film", "the plot was dull", "fine acting", "boring , boring film",
         "a great cat", "dull plot", "great acting", "the film was boring"]
LABELS = [1, 0, 1, 0, 1, 0, 1, 0]
_RELOAD = """
import json, sys
import keras, numpy as np
import modeling  # registers the serializable classes
model = keras.saving.load_model(sys.argv[1])
print(json.dumps(np.asarray(model.predict(json.loads(sys.argv[2]), verbose=0)).tolist()))
"""
_TF_HUB_USER = """
import json, sys
import numpy as np, tensorflow as tf
import tensorflow_text  # registers the preprocessor's ops
preprocess = tf.saved_model.load(sys.argv[1] + "/preprocess")
encoder = tf.saved_model.load(sys.argv[1] + "/encoder")
outputs = encoder(preprocess(tf.constant(json.loads(sys.argv[2]))))
print(json.dumps({key: np.asarray(outputs[key]).tolist()
                  for key in ("pooled_output", "sequence_output")}))
"""


def fresh_process(script: str, *arguments: str) -> object:
    """Runs `script` in a new interpreter outside the checkout; returns its JSON output."""
    with tempfile.TemporaryDirectory() as folder:
        result = subprocess.run([sys.executable, "-c", script, *arguments], cwd=folder,
                                capture_output=True, text=True, timeout=600,
                                env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    if result.returncode:
        raise AssertionError(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


class LibraryFlowsTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        cls.folder = Path(REAL_FOLDER) if REAL_FOLDER else tiny_folder(cls.root)
        reference = json.loads((GOLDEN / "minilm_reference.json").read_text())
        cls.golden = np.load(GOLDEN / "minilm_reference.npz") if REAL_FOLDER else None
        cls.reference_texts = list(zip(reference["text_a"], reference["text_b"]))
        cls.reference_length = reference["max_length"]

    def _reference_inputs(self):
        singles = [a for a, b in self.reference_texts if b is None]
        pairs = [(a, b) for a, b in self.reference_texts if b is not None]
        return singles, pairs

    def test_preprocessor_gives_the_reference_ids_for_singles_and_pairs(self):
        preprocessor = modeling.load_preprocessor(self.folder,
                                                  sequence_length=self.reference_length)
        singles, pairs = self._reference_inputs()
        packed = [preprocessor(tf.constant(singles))]
        if pairs:
            packed.append(preprocessor((tf.constant([a for a, _ in pairs]),
                                        tf.constant([b for _, b in pairs]))))
        got = {key: np.concatenate([part[key].numpy() for part in packed]) for key in packed[0]}
        if self.golden is not None:
            for key in ("input_ids", "input_mask", "segment_ids"):
                self.assertAllEqual(got[key], self.golden[key], msg=key)
            return
        tokenizer = FullTokenizer(str(self.folder / "vocab.txt"))

        def ids(text):
            return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)) if text else None

        rows = [(a, None) for a in singles] + pairs
        want = pack_ids([ids(a) for a, _ in rows], [ids(b) for _, b in rows],
                        self.reference_length, tokenizer.cls_id, tokenizer.sep_id)
        for key in ("input_ids", "input_mask", "segment_ids"):
            self.assertAllEqual(got[key], want[key], msg=key)

    def test_encoder_on_those_inputs_matches_the_reference(self):
        if self.golden is None:
            self.skipTest("the reference outputs in tests/golden are MiniLM's: set "
                          "BERT_TEST_MODEL to its folder")
        encoder = modeling.load_encoder(self.folder, output_hidden_states=True)
        inputs = {key: tf.constant(self.golden[key]) for key in
                  ("input_ids", "input_mask", "segment_ids")}
        outputs = encoder(inputs, training=False)
        self.assertAllClose(outputs["pooled_output"], self.golden["pooled_output"], atol=1e-4)
        for layer, want in zip(self.golden["hidden_state_layers"], self.golden["hidden_states"]):
            self.assertAllClose(outputs["hidden_states"][layer], want, atol=1e-4, msg=layer)

    @pytest.mark.long
    @pytest.mark.slow
    def test_classifier_fits_strings_predicts_them_and_reloads_in_a_fresh_process(self):
        keras.utils.set_random_seed(1)
        model = modeling.BertClassifier.from_pretrained(self.folder, num_labels=2,
                                                        sequence_length=32)
        self.assertGreater(model.count_params(), 0)
        model.compile()  # the paper's defaults: the original AdamW at 5e-5, warm-up, decay
        before = model.evaluate(TEXTS, LABELS, verbose=0, return_dict=True)["loss"]
        model.fit(TEXTS, LABELS, batch_size=4, epochs=10, verbose=0)
        # Measured without dropout on the training texts: at 5e-5 a random tiny model moves
        # little, and the epochs' own losses, under dropout, are noisier than that.
        self.assertLess(model.evaluate(TEXTS, LABELS, verbose=0, return_dict=True)["loss"],
                        before)
        predictions = model.predict(TEXTS[:3], verbose=0)
        self.assertEqual(predictions.shape, (3, 2))
        path = self.root / "classifier.keras"
        model.save(path)
        reloaded = fresh_process(_RELOAD, str(path), json.dumps(TEXTS[:3]))
        self.assertAllClose(reloaded, predictions, atol=1e-5)

    @pytest.mark.long
    @pytest.mark.slow
    def test_tf_hub_export_reloads_in_a_fresh_process_and_equals_the_encoder(self):
        exported = self.root / "hub"
        modeling.export_tf_hub(self.folder, exported, sequence_length=32)
        texts = ["a great film", "the plot was dull ."]
        outputs = fresh_process(_TF_HUB_USER, str(exported), json.dumps(texts))
        inputs = modeling.load_preprocessor(self.folder, sequence_length=32)(tf.constant(texts))
        expected = modeling.load_encoder(self.folder)(inputs, training=False)
        for key in ("pooled_output", "sequence_output"):
            self.assertAllClose(outputs[key], expected[key], atol=1e-4, msg=key)

    def test_a_name_that_cannot_be_downloaded_fails_fast_naming_the_url_and_a_folder(self):
        with tempfile.TemporaryDirectory() as cache:
            environment = {"BERT_CACHE_DIR": cache,
                           "BERT_GOOGLE_MODELS_URL": "http://127.0.0.1:9/bert_models"}
            with tf.compat.v1.test.mock.patch.dict(os.environ, environment):
                start = time.monotonic()
                with self.assertRaisesRegex(DownloadError, r"(?s)http://127\.0\.0\.1:9/bert_models"
                                            r"/2020_02_20/uncased_L-2_H-128_A-2\.zip.*folder"):
                    modeling.load_encoder("uncased_L-2_H-128_A-2")
                self.assertLess(time.monotonic() - start, 10)


if __name__ == "__main__":
    tf.test.main()
