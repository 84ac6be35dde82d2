"""tasks.model_files: one resolver, one rule per task for what the model's files must hold;
and every task module's `TASK` implements the contract."""

import json
import re
from pathlib import Path

import tensorflow as tf
from absl.testing import parameterized

from tasks import classification, contract, features, pretraining, squad, tagging
from tasks.model_files import (FINE_TUNING, FROZEN_ENCODER, PRETRAINING, ModelFiles,
                               resolve_model_files)
from tests.fixtures import TestCase, write_tiny_config

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


class ResolveModelFilesTest(TestCase, parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.tmp_path()

    def _vocab(self, size: int, name: str = "vocab.txt", capital: bool = False) -> Path:
        words = [f"Word{i}" if capital else f"word{i}" for i in range(size - len(SPECIAL))]
        path = self.root / name
        path.write_text("\n".join(SPECIAL + words) + "\n")
        return path

    def _config(self, vocab_size: int = 64) -> Path:
        return write_tiny_config(self.root / "bert_config.json", vocab_size=vocab_size)

    def test_pretraining_needs_a_config_and_takes_a_vocabulary_padded_past(self):
        resolved = resolve_model_files(ModelFiles(str(self._config())), PRETRAINING, 32)
        self.assertEqual(resolved.config.vocab_size, 64)
        padded = ModelFiles(str(self._config()), str(self._vocab(60)))
        self.assertEqual(resolve_model_files(padded, PRETRAINING, 32).files.vocab_file,
                         str(self.root / "vocab.txt"))
        too_many = ModelFiles(str(self._config()), str(self._vocab(65)))
        with self.assertRaisesRegex(ValueError, "holds 65 tokens, more than vocab_size=64 of "):
            resolve_model_files(too_many, PRETRAINING, 32)
        with self.assertRaisesRegex(ValueError, r"^bert_config_file is required \(or an "
                                                r"init_checkpoint whose folder holds it\)"):
            resolve_model_files(ModelFiles(), PRETRAINING, 32)

    @parameterized.parameters(60, 65)
    def test_a_task_that_tokenizes_needs_the_models_own_vocabulary(self, size):
        files = ModelFiles(str(self._config()), str(self._vocab(size)))
        with self.assertRaisesRegex(ValueError, f"holds {size} tokens but .*bert_config.json "
                                                "says vocab_size=64"):
            resolve_model_files(files, FINE_TUNING, 32)
        with self.assertRaisesRegex(ValueError, "^vocab_file is required"):
            resolve_model_files(ModelFiles(str(self._config())), FINE_TUNING, 32)

    def test_a_frozen_encoder_needs_its_whole_checkpoint(self):
        files = ModelFiles(str(self._config()), str(self._vocab(64)))
        self.assertIsNone(resolve_model_files(files, FINE_TUNING, 32).files.init_checkpoint)
        with self.assertRaisesRegex(ValueError, "^init_checkpoint is required"):
            resolve_model_files(files, FROZEN_ENCODER, 32)
        with self.assertRaisesRegex(ValueError, "^transfer_layers picks the blocks"):
            resolve_model_files(ModelFiles(str(self._config()), str(self._vocab(64)),
                                           init_checkpoint=str(self.root), transfer_layers=1),
                                FROZEN_ENCODER, 32)

    def test_the_sequence_length_must_fit_the_position_embeddings(self):
        config = self._config()
        with self.assertRaisesRegex(ValueError, "^max_seq_length must be an integer from 3 to the "
                                                r"model's max_position_embeddings \(64\) of "
                                                f"{re.escape(str(config))}, got 128$"):
            resolve_model_files(ModelFiles(str(config)), PRETRAINING, 128)

    def test_the_checkpoints_folder_fills_in_what_no_flag_names(self):
        self._config()
        self._vocab(64, capital=True)
        resolved = resolve_model_files(ModelFiles(init_checkpoint=str(self.root)),
                                       FINE_TUNING, 32)
        self.assertEqual(resolved.files.bert_config_file, str(self.root / "bert_config.json"))
        self.assertEqual(resolved.files.vocab_file, str(self.root / "vocab.txt"))
        self.assertFalse(resolved.files.do_lower_case)  # capitals in the vocabulary: cased
        named = resolve_model_files(ModelFiles(init_checkpoint=str(self.root),
                                               do_lower_case=True), FINE_TUNING, 32)
        self.assertTrue(named.files.do_lower_case)  # a casing the caller gives wins
        (self.root / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
        self.assertTrue(resolve_model_files(ModelFiles(init_checkpoint=str(self.root)),
                                            FINE_TUNING, 32).files.do_lower_case)

    def test_without_a_checkpoint_the_casing_is_lowercase(self):
        files = ModelFiles(str(self._config()), str(self._vocab(64, capital=True)))
        resolved = resolve_model_files(files, FINE_TUNING, 32)
        self.assertTrue(resolved.files.do_lower_case)
        self.assertTrue(resolved.tokenizer.do_lower_case)


class TaskContractTest(tf.test.TestCase):

    def test_every_task_module_exposes_one_task_implementing_the_contract(self):
        for module in (classification, squad, tagging, pretraining, features):
            self.assertIsInstance(module.TASK, contract.Task, module.__name__)
        self.assertNotIsInstance(object(), contract.Task)


if __name__ == "__main__":
    tf.test.main()
