"""Exports from Python lose nothing: a refused folder is named and kept; a limit leaves nothing."""

import errno
import json
import os
import re
import shutil
from pathlib import Path
from unittest import mock

import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the exported preprocessor's ops)
from absl.testing import parameterized

from core.export_folder import STAMP_NAME, ExportFolderRefused
from export.model_exports import export_model
from modeling import export_tf_hub
from network.checkpoints import export_huggingface
from network.config import BertConfig
from network.encoder import BertEncoder
from tests.fixtures import TINY_CONFIG, TestCase
from tests.modeling.tiny_folder import tiny_folder
from tests.training.test_training_faults import file_size_limit

# (test name, the call, the argument its messages name)
EXPORTS = [("google", lambda source, out: export_model(source, out, "google"), "output_dir"),
           ("huggingface", lambda source, out: export_model(source, out, "huggingface"),
            "output_dir"),
           ("tf_hub", lambda source, out: export_model(source, out, "tf_hub", 16), "output_dir"),
           ("export_tf_hub", lambda source, out: export_tf_hub(source, out, 16), "folder")]
# Each format and the file it writes first and largest, so a small file-size limit stops it there
# (TF Hub's, slower to trace, under the limit from the command line: tests/test_export_model.py).
LIMITED = [(name, export, file) for (name, export, _), file in zip(EXPORTS, (
    "bert_model.ckpt.data-00000-of-00001", "model.safetensors"))]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_file()}


class ExportFoldersTest(TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        cls.source = tiny_folder(cls.root, "source")

    def setUp(self):
        super().setUp()
        self.work = self.tmp_path()

    def _assert_refused(self, export, out: Path, argument: str, message: str):
        before = _snapshot(self.work)
        with self.assertRaisesRegex(ExportFolderRefused,
                                    f"^{argument} '{re.escape(str(out))}' {message}"):
            export(out)
        self.assertEqual(_snapshot(self.work), before)
        self.assertEmpty([path for path in self.work.iterdir() if path.name.startswith(".")])

    @parameterized.named_parameters(*EXPORTS)
    def test_the_source_folder_is_refused_and_kept(self, export, argument):
        source = Path(shutil.copytree(self.source, self.work / "model"))
        self._assert_refused(lambda out: export(source, out), source, argument,
                             "is the source; an export replaces its folder whole")

    @parameterized.named_parameters(*EXPORTS)
    def test_a_folder_holding_the_source_is_refused_and_kept(self, export, argument):
        source = Path(shutil.copytree(self.source, self.work / "runs" / "model"))
        (self.work / "runs" / "notes.txt").write_text("mine")
        self._assert_refused(lambda out: export(source, out), self.work / "runs", argument,
                             f"holds the source '{source}'")

    @parameterized.named_parameters(*EXPORTS)
    def test_a_folder_of_other_files_is_refused_before_any_weights_load(self, export, argument):
        # Weights that cannot be read: a refusal naming them would mean they were read first.
        source = Path(shutil.copytree(self.source, self.work.parent / f"{self.work.name}-src"))
        self.addCleanup(shutil.rmtree, source)
        (source / "bert_model.ckpt.index").write_bytes(b"not an index")
        (self.work / "mine").mkdir()
        (self.work / "mine" / "thesis.tex").write_text("mine")
        self._assert_refused(lambda out: export(source, out), self.work / "mine", argument,
                             r"holds files no export wrote \(thesis\.tex\)")

    @parameterized.named_parameters(*EXPORTS)
    def test_an_existing_file_is_refused_and_kept(self, export, argument):
        (self.work / "bert_hub").write_text("mine")
        self._assert_refused(lambda out: export(self.source, out), self.work / "bert_hub",
                             argument, "is an existing file, not a folder")

    def test_a_re_export_replaces_its_own_kind_whole_and_refuses_another(self):
        out = self.work / "hf"
        export_model(self.source, out, "huggingface")
        export_model(self.source, out, "huggingface", do_lower_case=False)
        self.assertFalse(json.loads((out / "tokenizer_config.json").read_text())["do_lower_case"])
        self.assertEqual(sorted(path.name for path in self.work.iterdir()), ["hf"])
        before = _snapshot(out)
        with self.assertRaisesRegex(ExportFolderRefused,
                                    r"holds a huggingface export \(export_owner\.json\); this "
                                    r"is a google export"):
            export_model(self.source, out, "google")
        self.assertEqual(_snapshot(out), before)

    @pytest.mark.long
    @pytest.mark.slow
    def test_a_tf_hub_export_is_replaced_from_either_entry(self):
        out = self.work / "hub"
        export_tf_hub(self.source, out, 16)
        export_model(self.source, out, "tf_hub", 32)
        preprocess = tf.saved_model.load(str(out / "preprocess"))
        self.assertEqual(preprocess(tf.constant(["a fine film"]))["input_word_ids"].shape, (1, 32))
        self.assertEqual(sorted(path.name for path in self.work.iterdir()), ["hub"])

    @parameterized.named_parameters(*LIMITED)
    def test_a_file_size_limit_names_the_output_file_and_leaves_nothing(self, export, file):
        out = self.work / "out"
        with file_size_limit(20_000), self.assertRaises(OSError) as raised:
            export(self.source, out)
        self.assertEqual((raised.exception.errno, raised.exception.filename),
                         (errno.EFBIG, str(out / file)))
        self.assertEqual(os.listdir(self.work), [])

    def test_a_full_disk_under_safetensors_is_the_os_error_it_was(self):
        """safetensors' Rust writer reports the disk's errno inside its own exception."""
        from safetensors import SafetensorError

        full = SafetensorError("Error while serializing: I/O error: No space left on device "
                               "(os error 28)")
        out = self.work / "hf"
        with mock.patch("safetensors.numpy.save_file", side_effect=full), \
                self.assertRaises(OSError) as raised:
            export_model(self.source, out, "huggingface")
        self.assertEqual((raised.exception.errno, raised.exception.filename),
                         (errno.ENOSPC, str(out / "model.safetensors")))
        self.assertEqual(os.listdir(self.work), [])

    def test_export_huggingface_leaves_the_folders_other_files(self):
        folder = self.work / "hf"
        folder.mkdir()
        (folder / "vocab.txt").write_text("mine")
        encoder = BertEncoder(BertConfig.from_dict(TINY_CONFIG))
        export_huggingface(encoder, folder, encoder.config)
        self.assertEqual(sorted(path.name for path in folder.iterdir()),
                         ["config.json", "model.safetensors", "vocab.txt"])
        self.assertEqual((folder / "vocab.txt").read_text(), "mine")
        self.assertEqual(json.loads((folder / "config.json").read_text())["architectures"],
                         ["BertModel"])
        self.assertNotIn(STAMP_NAME, os.listdir(folder))


if __name__ == "__main__":
    tf.test.main()
