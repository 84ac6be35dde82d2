"""export_model.py: one source, three layouts, each read back by its own ecosystem's loader path."""

import json
import os
import re
import shutil
import subprocess
import sys

import keras
import pytest
import tensorflow as tf
from absl import flags
from absl.testing import parameterized

import export_model
from modeling import (BertClassifier, BertConfig, BertPretrainer, BertTextEmbedder, load_encoder,
                      load_tokenizer)
from network.checkpoints import export_google_checkpoint, save_checkpoint
from tests.fixtures import REPO, TINY_CONFIG, TestCase, launched

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s", "sat", "on", "mat"]
INPUTS = {"input_ids": tf.constant([[2, 5, 6, 7, 8, 3, 0]]),
          "input_mask": tf.constant([[1, 1, 1, 1, 1, 1, 0]]),
          "segment_ids": tf.zeros([1, 7], tf.int32)}


def _run(*arguments: str) -> None:
    values = flags.FlagValues()
    export_model.define_flags(values)
    values(["export_model.py", *arguments])
    export_model.main(["export_model.py"], values)


class ExportModelTest(TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        cls.config = BertConfig.from_dict({**TINY_CONFIG, "vocab_size": len(VOCAB)})
        cls.source = cls.root / "uncased_tiny"
        cls.source.mkdir()
        (cls.source / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
        cls.config.to_json_file(cls.source / "bert_config.json")
        keras.utils.set_random_seed(2)
        cls.pretrainer = BertPretrainer(cls.config)
        export_google_checkpoint(cls.pretrainer, cls.source / "bert_model.ckpt")

    def _assert_same_encoder(self, folder):
        expected = self.pretrainer.encoder(INPUTS, training=False)
        loaded = load_encoder(folder)(INPUTS, training=False)
        for key in ("pooled_output", "sequence_output"):
            self.assertAllClose(loaded[key], expected[key], atol=1e-6, rtol=0)

    def test_google_layout_keeps_the_pretraining_heads(self):
        out = self.root / "google"
        _run(f"--source={self.source}", "--format=google", f"--output_dir={out}")
        self.assertEqual(sorted(path.name for path in out.iterdir() if "data" not in path.name),
                         ["bert_config.json", "bert_model.ckpt.index", "export_owner.json",
                          "vocab.txt"])
        self._assert_same_encoder(out / "bert_model.ckpt")
        names = {name for name, _ in tf.train.list_variables(str(out / "bert_model.ckpt"))}
        self.assertEqual(names, set(self.pretrainer.checkpoint_variables()))

    def test_huggingface_layout_with_its_casing(self):
        out = self.root / "hf"
        _run(f"--source={self.source}", "--format=huggingface", f"--output_dir={out}",
             "--nodo_lower_case")
        self._assert_same_encoder(out)
        self.assertEqual(json.loads((out / "config.json").read_text())["architectures"],
                         ["BertForPreTraining"])
        self.assertFalse(json.loads((out / "tokenizer_config.json").read_text())["do_lower_case"])
        self.assertFalse(load_tokenizer(out).do_lower_case)

    @pytest.mark.long
    def test_tf_hub_layout(self):
        out = self.root / "hub"
        _run(f"--source={self.source}", "--format=tf_hub", f"--output_dir={out}",
             "--sequence_length=16")
        preprocess = tf.saved_model.load(str(out / "preprocess"))
        encoder = tf.saved_model.load(str(out / "encoder"))
        inputs = preprocess(tf.constant(["the cats sat on the mat"]))
        self.assertEqual(inputs["input_word_ids"].shape, (1, 16))
        expected = self.pretrainer.encoder(
            {"input_ids": inputs["input_word_ids"], "input_mask": inputs["input_mask"],
             "segment_ids": inputs["input_type_ids"]}, training=False)
        self.assertAllClose(encoder(inputs)["pooled_output"], expected["pooled_output"],
                            atol=1e-5, rtol=0)

    @pytest.mark.long
    def test_tf_hub_int8_encoder_is_int8_close_and_compiles_with_xla(self):
        out = self.root / "hub_int8"
        _run(f"--source={self.source}", "--format=tf_hub", f"--output_dir={out}",
             "--sequence_length=16", "--quantize=int8")
        dtypes = tf.train.load_checkpoint(str(out / "encoder" / "variables" / "variables")
                                          ).get_variable_to_dtype_map()
        # Six projections in each block and the pooler.
        self.assertLen([name for name, dtype in dtypes.items() if dtype == tf.int8],
                       6 * TINY_CONFIG["num_hidden_layers"] + 1)
        encoder = tf.saved_model.load(str(out / "encoder"))
        hub_inputs = {"input_word_ids": INPUTS["input_ids"], "input_mask": INPUTS["input_mask"],
                      "input_type_ids": INPUTS["segment_ids"]}
        pooled = encoder(hub_inputs)["pooled_output"].numpy()
        expected = self.pretrainer.encoder(INPUTS, training=False)["pooled_output"].numpy()
        # Within 3% of the largest output, as tests/network/test_quantization.py measured.
        self.assertLessEqual(abs(pooled - expected).max(), 0.03 * abs(expected).max())
        self.assertNotAllClose(pooled, expected, atol=1e-7, rtol=0)
        compiled = tf.function(lambda inputs: encoder(inputs), jit_compile=True)
        self.assertAllClose(compiled(hub_inputs)["pooled_output"], pooled, atol=1e-5, rtol=0)

    def test_a_fine_tuned_folder_exports_its_head(self):
        source = self.root / "fine_tuned"
        source.mkdir()
        classifier = BertClassifier(self.config, num_labels=3)
        save_checkpoint(classifier, source / "model.ckpt")
        self.config.to_json_file(source / "bert_config.json")
        (source / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
        (source / "labels.txt").write_text("bad\nfair\ngood\n")
        out = self.root / "from_fine_tuned"
        _run(f"--source={source}", "--format=huggingface", f"--output_dir={out}")
        config = json.loads((out / "config.json").read_text())
        self.assertEqual(config["architectures"], ["BertForSequenceClassification"])
        self.assertEqual(config["id2label"], {"0": "bad", "1": "fair", "2": "good"})
        encoder = load_encoder(out)
        self.assertAllClose(encoder(INPUTS)["pooled_output"],
                            classifier.encoder(INPUTS)["pooled_output"], atol=1e-6, rtol=0)
        google = self.root / "google_from_fine_tuned"
        _run(f"--source={source}", "--format=google", f"--output_dir={google}")
        names = dict(tf.train.list_variables(str(google / "bert_model.ckpt")))
        self.assertEqual(names["output_weights"], [3, self.config.hidden_size])

    @pytest.mark.long
    def test_a_keras_file_exports_as_a_sentence_embedder(self):
        folder = self.root / "embedder_source"
        shutil.copytree(self.source, folder)
        model = BertTextEmbedder.from_pretrained(folder, sequence_length=12, pooling="max",
                                                 normalize=True)
        model.save(self.root / "embedder.keras")
        out = self.root / "embedder_export"
        _run(f"--source={self.root / 'embedder.keras'}", "--format=embedder",
             f"--output_dir={out}")
        served = tf.saved_model.load(str(out)).signatures["serving_default"](
            text=tf.constant(["the cats sat", "on the mat the mat"]))["embedding"]
        self.assertAllClose(served, model.predict(["the cats sat", "on the mat the mat"]),
                            atol=1e-5, rtol=0)
        refused = self.root / "encoder_as_embedder"
        with self.assertRaisesRegex(ValueError, "source holds a BertClassifier, not a "
                                                "BertTextEmbedder"):
            classifier = BertClassifier.from_pretrained(folder, num_labels=2,
                                                        sequence_length=12)
            classifier.save(self.root / "classifier.keras")
            _run(f"--source={self.root / 'classifier.keras'}", "--format=embedder",
                 f"--output_dir={refused}")
        self.assertFalse(refused.exists())

    @parameterized.named_parameters(
        ("bad_format", "--format=onnx", "--format must be one of google, huggingface, tf_hub, "
                                        "saved_model, embedder, tf_serving, tflite, got 'onnx'"),
        ("missing_source", "--source={root}/nowhere", r"nowhere: no config file"),
        ("no_output_dir", "--output_dir=", "--output_dir is required"))
    def test_bad_flags_are_one_clear_error_and_write_nothing(self, change, message):
        out = self.root / "refused"
        arguments = {"source": f"--source={self.source}", "format": "--format=google",
                     "output_dir": f"--output_dir={out}"}
        name = change.split("=")[0].lstrip("-")
        arguments[name] = change.format(root=self.root)
        with self.assertRaisesRegex(ValueError, message):
            _run(*arguments.values())
        self.assertFalse(out.exists())
        self.assertEmpty([path for path in self.root.iterdir() if path.name.startswith(".")])

    def _tree(self, folder):
        return {path: path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}

    @parameterized.named_parameters(
        ("the_source", "{work}/model", "{work}/model", "is the source; an export replaces its "
                                                      "folder whole, so pass a new or empty "
                                                      "folder"),
        ("holds_the_source", "{work}/model", "{work}",
         "holds the source '{work}/model'; an export replaces its folder whole"),
        ("other_files", "{source}", "{work}",
         r"holds files no export wrote \(model, notes\.txt\); an export replaces its folder "
         "whole"),
        ("a_file", "{source}", "{work}/notes.txt", "is an existing file, not a folder"))
    def test_an_output_dir_holding_anything_else_is_refused_and_kept(self, source, out,
                                                                     message):
        work = self.create_tempdir().full_path
        shutil.copytree(self.source, os.path.join(work, "model"))
        with open(os.path.join(work, "notes.txt"), "w") as writer:
            writer.write("mine")
        before = self._tree(self.root)
        names = {"work": work, "source": self.source}
        out = out.format(**names)
        expected = (f"^--output_dir {re.escape(repr(out))} "
                    + message.format(**{key: re.escape(str(value))
                                        for key, value in names.items()}))
        with self.assertRaisesRegex(ValueError, expected):
            _run(f"--source={source.format(**names)}", "--format=huggingface",
                 f"--output_dir={out}")
        self.assertEqual(self._tree(self.root), before)
        self.assertEqual(sorted(os.listdir(work)), ["model", "notes.txt"])
        self.assertEqual(sorted(os.listdir(os.path.join(work, "model"))),
                         sorted(os.listdir(self.source)))

    @parameterized.named_parameters(
        ("google", "google", "bert_model.ckpt.data-00000-of-00001"),
        ("huggingface", "huggingface", "model.safetensors"),
        ("tf_hub", "tf_hub", "preprocess/saved_model.pb"))
    @pytest.mark.long
    @pytest.mark.slow
    def test_a_file_size_limit_ends_in_one_line_and_leaves_no_output(self, format_name, file):
        work = self.create_tempdir().full_path
        out = os.path.join(work, "out")
        limited = subprocess.run(
            launched([sys.executable, str(REPO / "export_model.py"), f"--source={self.source}",
                      f"--format={format_name}", f"--output_dir={out}",
                      *(["--sequence_length=16"] if format_name == "tf_hub" else [])],
                     file_size_limit=20_000),
            capture_output=True, text=True, timeout=300,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        self.assertEqual(limited.returncode, 1, limited.stderr)
        self.assertNotIn("Traceback", limited.stderr)
        self.assertRegex(limited.stderr.strip().splitlines()[-1],
                         rf"^export_model\.py: error: cannot write {re.escape(out)}/{file}: the "
                         r"file would exceed this process' file-size limit \(ulimit -f\); make "
                         r"room \(or raise the limit\), then rerun the same command\Z")
        self.assertEqual(os.listdir(work), [])
