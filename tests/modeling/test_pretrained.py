"""One-call loading of models and tokenizers from Google, Hugging Face and our own folders."""

import json

import numpy as np
import pytest
import tensorflow as tf

from data_prep.corpora.assets import minilm_dir
from modeling import (BertClassifier, BertConfig, BertEncoder, BertSpanModel, load_config,
                      load_encoder, load_task_model, load_tokenizer)
from modeling.checkpoints import (CheckpointError, export_google_checkpoint, export_huggingface,
                                  save_checkpoint, training_checkpoint)
from modeling.config import ConfigError
from tests.fixtures import GOLDEN, TINY_CONFIG, TestCase, write_tiny_config

UNCASED_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s", "sat"]
CASED_VOCAB = UNCASED_VOCAB + ["The", "Cat"]


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
