"""`--init_checkpoint=<folder>` configures the run as `modeling.load_config` / `load_tokenizer`
would, flags that name a file win, and the pre-training warmup fits short runs.

In-process, on flags parsed into a fresh `FlagValues` by the runners' own
`define_flags`, and the model's files resolved by the fine-tuning rule, as
`run_classifier.py` resolves them.
"""

import json
from pathlib import Path

import tensorflow as tf
from absl import flags

from cli import runner_flags
from network import pretrained
from tasks.model_files import FINE_TUNING, ModelFiles, resolve_model_files
from tests.fixtures import write_tiny_config

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film"]


def _model_folder(folder: Path, config_name: str = "config.json",
                  lower_case: bool | None = None) -> Path:
    """A model folder in the Hugging Face or Google layout (the weights are never read here)."""
    folder.mkdir(parents=True)
    if config_name:
        write_tiny_config(folder / config_name, vocab_size=len(VOCAB))
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    if lower_case is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": lower_case}))
    return folder


class ModelFolderFlagsTest(tf.test.TestCase):

    def _files(self, *arguments: str) -> ModelFiles:
        import run_classifier

        values = flags.FlagValues()
        run_classifier.define_flags(values)
        values(["run_classifier.py", f"--output_dir={self.get_temp_dir()}/out", "--do_train",
                "--max_seq_length=32", *arguments])  # the tiny configs' 64 positions
        model_files, training, *_ = runner_flags.training_configs(values)
        return resolve_model_files(model_files, FINE_TUNING, training.max_seq_length).files

    def test_hugging_face_folder_supplies_config_vocabulary_and_casing(self):
        folder = _model_folder(Path(self.get_temp_dir()) / "hf", lower_case=False)
        files = self._files(f"--init_checkpoint={folder}")
        self.assertEqual(files.bert_config_file, str(folder / "config.json"))
        self.assertEqual(files.vocab_file, str(folder / "vocab.txt"))
        self.assertFalse(files.do_lower_case)
        # The same choices as the Python API's.
        self.assertEqual(pretrained.load_config(folder).vocab_size, len(VOCAB))
        self.assertFalse(pretrained.load_tokenizer(folder).do_lower_case)

    def test_flags_that_name_a_file_or_the_casing_win(self):
        folder = _model_folder(Path(self.get_temp_dir()) / "hf", lower_case=False)
        other = write_tiny_config(Path(self.get_temp_dir()) / "other.json",
                                  vocab_size=len(VOCAB))
        files = self._files(f"--init_checkpoint={folder}", f"--bert_config_file={other}",
                            "--do_lower_case")
        self.assertEqual(files.bert_config_file, str(other))
        self.assertEqual(files.vocab_file, str(folder / "vocab.txt"))
        self.assertTrue(files.do_lower_case)

    def test_google_checkpoint_prefix_and_own_export_folder(self):
        root = Path(self.get_temp_dir())
        google = _model_folder(root / "cased_L-2_H-32_A-2", "bert_config.json")
        files = self._files(f"--init_checkpoint={google}/bert_model.ckpt")
        self.assertEqual(files.bert_config_file, str(google / "bert_config.json"))
        self.assertFalse(files.do_lower_case)  # from the folder's name, as Google named them
        run = _model_folder(root / "run", "bert_config.json")
        (run / "export").mkdir()
        files = self._files(f"--init_checkpoint={run}/export/bert_model.ckpt")
        self.assertEqual(files.bert_config_file, str(run / "bert_config.json"))
        self.assertEqual(files.vocab_file, str(run / "vocab.txt"))
        self.assertTrue(files.do_lower_case)  # no capital letter in the vocabulary

    def test_a_folder_without_a_config_still_needs_the_flag(self):
        folder = _model_folder(Path(self.get_temp_dir()) / "vocab_only", config_name="")
        with self.assertRaisesRegex(ValueError, r"^bert_config_file is required \(or an "
                                                r"init_checkpoint whose folder holds it\)"):
            self._files(f"--init_checkpoint={folder}")
        with self.assertRaisesRegex(ValueError, "^vocab_file is required"):
            self._files("--bert_config_file=config.json")


class PretrainingWarmupTest(tf.test.TestCase):

    def _schedule(self, *arguments: str) -> tuple[int, int]:
        import run_pretraining

        values = flags.FlagValues()
        run_pretraining.define_flags(values)
        values(["run_pretraining.py", "--input_file=records", "--bert_config_file=config.json",
                f"--output_dir={self.get_temp_dir()}", "--do_train", *arguments])
        _, training, optimization, _ = runner_flags.training_configs(values,
                                                                     run_pretraining.REQUIRED)
        return optimization.schedule(None, training.train_batch_size)

    def test_warmup_is_a_tenth_of_the_steps_unless_given(self):
        self.assertEqual(self._schedule("--num_train_steps=50"), (50, 5))
        self.assertEqual(self._schedule(), (100000, 10000))  # the original's default pair
        self.assertEqual(self._schedule("--num_train_steps=50", "--num_warmup_steps=7"), (50, 7))
        self.assertEqual(self._schedule("--num_train_steps=50", "--num_warmup_steps=0"), (50, 0))
