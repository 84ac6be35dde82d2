"""One-call loading of models and tokenizers from Google, Hugging Face and our own folders."""

import json
import os
import shutil
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

from data_prep.corpora.assets import minilm_dir
from modeling import (BertClassifier, BertConfig, BertEncoder, BertPreprocessor, BertPretrainer,
                      BertSpanModel, load_config, load_encoder, load_preprocessor,
                      load_task_model, load_tokenizer)
from network.checkpoints import (CheckpointError, export_google_checkpoint, export_huggingface,
                                 save_checkpoint, training_checkpoint)
from network.config import ConfigError
from tests.fixtures import GOLDEN, TINY_CONFIG, TestCase, write_tiny_config

UNCASED_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s", "sat"]
CASED_VOCAB = UNCASED_VOCAB + ["The", "Cat"]
VOCAB = UNCASED_VOCAB + [f"[unused{index}]" for index in range(TINY_CONFIG["vocab_size"] - 9)]


def _inputs() -> dict:
    ids = np.array([[2, 5, 6, 7, 8, 3, 0, 0], [2, 6, 8, 3, 0, 0, 0, 0]], np.int32)
    return {"input_ids": tf.constant(ids), "input_mask": tf.constant((ids > 0).astype(np.int32)),
            "segment_ids": tf.zeros_like(ids)}


def _write_vocab(folder, tokens=UNCASED_VOCAB):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(tokens) + "\n")


def _encoder() -> BertEncoder:
    return BertEncoder(BertConfig.from_dict(TINY_CONFIG))


class PretrainedLoadingTest(TestCase):

    def _assert_same_encoder(self, loaded, original):
        for key, value in original(_inputs(), training=False).items():
            self.assertAllEqual(loaded(_inputs(), training=False)[key].numpy(), value.numpy(),
                                msg=key)

    def test_google_release_folder(self):
        folder = self.tmp_path() / "uncased_L-2_H-32_A-2"
        original = _encoder()
        _write_vocab(folder, CASED_VOCAB)  # the folder name, not the vocabulary, decides
        write_tiny_config(folder / "bert_config.json")
        export_google_checkpoint(original, folder / "bert_model.ckpt")
        self._assert_same_encoder(load_encoder(folder), original)
        self._assert_same_encoder(load_encoder(folder / "bert_model.ckpt"), original)
        self.assertIs(load_tokenizer(folder).do_lower_case, True)
        self.assertIs(load_tokenizer(folder, do_lower_case=False).do_lower_case, False)

    def test_google_cased_folder_name(self):
        folder = self.tmp_path() / "multi_cased_L-12_H-768_A-12"
        _write_vocab(folder)
        self.assertIs(load_tokenizer(folder).do_lower_case, False)

    def test_huggingface_folder_reads_casing_from_tokenizer_config(self):
        folder = self.tmp_path() / "hf"
        original = _encoder()
        export_huggingface(original, folder, original.config)
        _write_vocab(folder)
        (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
        self._assert_same_encoder(load_encoder(folder), original)
        tokenizer = load_tokenizer(folder)
        self.assertIs(tokenizer.do_lower_case, False)
        self.assertEqual(tokenizer.tokenize("The cats"), ["[UNK]", "cat", "##s"])

    def test_pretraining_output_and_its_export_folder(self):
        run = self.tmp_path() / "run"
        original = _encoder()
        _write_vocab(run, CASED_VOCAB)
        write_tiny_config(run / "bert_config.json")
        tf.train.CheckpointManager(training_checkpoint(original), str(run), 2).save()
        export_google_checkpoint(original, run / "export" / "bert_model.ckpt")
        self._assert_same_encoder(load_encoder(run), original)
        self._assert_same_encoder(load_encoder(run / "export"), original)
        # Nothing names the casing: capitals in the vocabulary mean a cased model.
        self.assertIs(load_tokenizer(run / "export").do_lower_case, False)
        _write_vocab(run, UNCASED_VOCAB)
        self.assertIs(load_tokenizer(run).do_lower_case, True)

    def test_fine_tuned_output_reloads_whole_with_config_overrides(self):
        tmp_path = self.tmp_path()
        features = _inputs()
        original = BertClassifier(BertConfig.from_dict(TINY_CONFIG), num_labels=3)
        write_tiny_config(tmp_path / "bert_config.json")
        save_checkpoint(original, tmp_path / "model.ckpt")
        reloaded = BertClassifier.from_pretrained(tmp_path, num_labels=3, hidden_dropout_prob=0.3)
        self.assertEqual(reloaded.config.hidden_dropout_prob, 0.3)
        self.assertAllEqual(reloaded(features, training=False).numpy(),
                            original(features, training=False).numpy())
        mixed = load_task_model(BertSpanModel, tmp_path, dtype="mixed_bfloat16")
        self.assertEqual(mixed.encoder.blocks[0].intermediate.compute_dtype, "bfloat16")
        self.assertEqual({variable.dtype for variable in mixed.weights}, {"float32"})

    @pytest.mark.long  # the same golden: test_checkpoints' test_real_minilm_matches_pytorch
    @pytest.mark.assets
    def test_real_minilm_in_three_lines_matches_pytorch(self):
        encoder = load_encoder(minilm_dir())
        tokenizer = load_tokenizer(minilm_dir())
        self.assertIs(tokenizer.do_lower_case, True)
        golden = np.load(GOLDEN / "minilm_reference.npz")
        outputs = encoder({key: tf.constant(golden[key])
                           for key in ("input_ids", "input_mask", "segment_ids")}, training=False)
        self.assertAllClose(outputs["pooled_output"].numpy(), golden["pooled_output"],
                            atol=1e-4, rtol=1e-7)

    def test_folder_without_config_names_what_is_missing(self):
        folder = self.tmp_path() / "weights_only" / "inner"
        original = _encoder()
        export_google_checkpoint(original, folder / "bert_model.ckpt")
        with self.assertRaisesRegex(ConfigError,
                                    r"no config file \(bert_config.json or config.json\)"):
            load_encoder(folder)
        # An explicit config is enough, and a wrong one is refused by shape.
        self._assert_same_encoder(load_task_model(BertEncoder, folder, config=original.config),
                                  original)
        with self.assertRaisesRegex(CheckpointError, "intermediate/dense/kernel has shape"):
            load_task_model(BertEncoder, folder,
                            config=original.config.replace(intermediate_size=48))
        with self.assertRaisesRegex(ConfigError, "no vocabulary file"):
            load_tokenizer(folder)

    def test_load_config_applies_overrides(self):
        tmp_path = self.tmp_path()
        write_tiny_config(tmp_path / "config.json")
        self.assertEqual(load_config(tmp_path, attention_probs_dropout_prob=0.0)
                         .attention_probs_dropout_prob, 0.0)


if __name__ == "__main__":
    tf.test.main()


class FromPretrainedTest(TestCase):
    """Every public class loads from every source the task models load from."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        root = cls.class_folder()
        keras.utils.set_random_seed(3)
        cls.original = BertPretrainer(BertConfig.from_dict(TINY_CONFIG))
        google = root / "google"
        _write_vocab(google, VOCAB)
        write_tiny_config(google / "bert_config.json")
        export_google_checkpoint(cls.original, google / "bert_model.ckpt")
        hugging_face = root / "hugging_face"
        _write_vocab(hugging_face, VOCAB)
        export_huggingface(cls.original, hugging_face, BertConfig.from_dict(TINY_CONFIG))
        cls.cache = root / "cache"
        shutil.copytree(google, cls.cache / "models" / "google" / "uncased_L-2_H-128_A-2")
        shutil.copytree(hugging_face, cls.cache / "models" / "huggingface" / "google-bert" /
                        "bert-base-uncased")
        cls.sources = {"google folder": google, "google checkpoint": google / "bert_model.ckpt",
                       "hugging face folder": hugging_face,
                       "google name": "uncased_L-2_H-128_A-2",
                       "hugging face name": "bert-base-uncased"}

    def setUp(self):
        super().setUp()
        environment = mock.patch.dict(os.environ, {"BERT_CACHE_DIR": str(self.cache)})
        environment.start()
        self.addCleanup(environment.stop)

    def test_encoder_pretrainer_and_task_models_load_every_source(self):
        outputs = self.original(_pretraining_inputs(), training=False)
        encoded = self.original.encoder(_inputs(), training=False)
        for name, source in self.sources.items():
            with self.subTest(source=name):
                encoder = BertEncoder.from_pretrained(source)
                self.assertIsInstance(encoder, BertEncoder)
                self.assertAllClose(encoder(_inputs(), training=False)["pooled_output"],
                                    encoded["pooled_output"], atol=1e-6)
                pretrainer = BertPretrainer.from_pretrained(source, objective="mlm_nsp")
                got = pretrainer(_pretraining_inputs(), training=False)
                for key in ("masked_lm_logits", "next_sentence_logits"):
                    self.assertAllClose(got[key], outputs[key], atol=1e-5)
                classifier = BertClassifier.from_pretrained(source, num_labels=2)
                self.assertAllClose(classifier.encoder.embedding_table,
                                    self.original.encoder.embedding_table)
        dropout = BertEncoder.from_pretrained(self.sources["google name"],
                                              hidden_dropout_prob=0.3)
        self.assertEqual(dropout.config.hidden_dropout_prob, 0.3)

    def test_preprocessor_loads_every_source_as_load_preprocessor(self):
        for name, source in self.sources.items():
            with self.subTest(source=name):
                preprocessor = BertPreprocessor.from_pretrained(source, 16)
                self.assertEqual(preprocessor.vocabulary, VOCAB)
                self.assertEqual(preprocessor.sequence_length, 16)
                self.assertTrue(preprocessor.tokenizer.do_lower_case)
                self.assertAllEqual(preprocessor(["the cats sat"])["input_ids"],
                                    [[2, 5, 6, 7, 8, 3] + [0] * 10])
        # No length: 128, or fewer when the model has fewer positions (the tiny one has 64).
        self.assertEqual(BertPreprocessor.from_pretrained(self.sources["google folder"])
                         .sequence_length, 64)
        self.assertEqual(load_preprocessor(self.sources["google folder"]).sequence_length, 64)
        cased = BertPreprocessor.from_pretrained(self.sources["hugging face name"], 8,
                                                 do_lower_case=False)
        self.assertFalse(cased.tokenizer.do_lower_case)

    def test_bad_sources_and_settings_are_refused_by_name(self):
        for model_class in (BertEncoder, BertPretrainer, BertPreprocessor):
            with self.subTest(model_class=model_class.__name__):
                with self.assertRaisesRegex(TypeError, r"must be a model folder, checkpoint or "
                                                       r"model name .* got None"):
                    model_class.from_pretrained(None)
                with self.assertRaisesRegex(ConfigError, "'uncased_L-2_H-128_A-3' is neither a "
                                                         "local file or folder nor a known model "
                                                         "name; did you mean"):
                    model_class.from_pretrained("uncased_L-2_H-128_A-3")
        with self.assertRaisesRegex(ValueError, r"sequence_length must be an integer from 3 to "
                                                r"the model's max_position_embeddings \(64\), "
                                                r"got 65"):
            BertPreprocessor.from_pretrained(self.sources["google name"], 65)
        with self.assertRaisesRegex(TypeError, "do_lower_case must be True, False or None"):
            BertPreprocessor.from_pretrained(self.sources["google name"], 8, do_lower_case="no")
        with self.assertRaisesRegex(ValueError, "unknown pre-training objective 'nsp'"):
            BertPretrainer.from_pretrained(self.sources["google folder"], objective="nsp")


def _pretraining_inputs() -> dict:
    return {**_inputs(), "masked_lm_positions": tf.constant([[1, 2], [2, 0]], tf.int32)}
