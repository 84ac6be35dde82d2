"""core.export_folder: an export replaces only a new, empty or same-kind export folder, whole."""

import errno
import json
import os
import re
from pathlib import Path

import tensorflow as tf
from absl.testing import parameterized

from core import atomic
from core.export_folder import (STAMP_NAME, ExportFolderRefused, check_export_folder,
                                export_folder)
from tests.fixtures import TestCase


def _tree(folder: Path) -> dict[str, str]:
    """Every file under `folder` and its text."""
    return {str(path.relative_to(folder)): path.read_text() for path in sorted(folder.rglob("*"))
            if path.is_file()}


class CheckExportFolderTest(TestCase, parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.tmp_path()
        self.source = self.root / "model"
        self.source.mkdir()
        (self.source / "bert_config.json").write_text("{}")

    def test_a_new_or_empty_folder_is_accepted_as_its_real_path(self):
        self.assertEqual(check_export_folder(self.root / "new" / "deeper", "google",
                                             [self.source]),
                         str(self.root / "new" / "deeper"))
        (self.root / "empty").mkdir()
        (self.root / "link").symlink_to(self.root / "empty")
        self.assertEqual(check_export_folder(self.root / "link", "google", [self.source]),
                         str(self.root / "empty"))

    @parameterized.named_parameters(
        ("existing_file", "notes.txt",
         r"^output_dir '{root}/notes.txt' is an existing file, not a folder; pass a new or "
         r"empty folder$"),
        ("the_source", "model",
         r"^output_dir '{root}/model' is the source; an export replaces its folder whole, so "
         r"pass a new or empty folder$"),
        ("holds_the_source", "",
         r"^output_dir '{root}' holds the source '{root}/model'; an export replaces its "
         r"folder whole"),
        ("other_files", "theirs",
         r"^output_dir '{root}/theirs' holds files no export wrote \(\.git, a, b and 1 more\); "
         r"an export replaces its folder whole, so pass a new or empty folder$"))
    def test_refusals_name_the_argument_the_value_and_why(self, folder, message):
        (self.root / "notes.txt").write_text("mine")
        theirs = self.root / "theirs"
        for name in (".git/HEAD", "a", "b", "c/d"):
            (theirs / name).parent.mkdir(parents=True, exist_ok=True)
            (theirs / name).write_text("mine")
        with self.assertRaisesRegex(ExportFolderRefused,
                                    message.format(root=re.escape(str(self.root)))):
            check_export_folder(self.root / folder, "huggingface", [self.source],
                                argument="output_dir")

    def test_a_folder_holding_a_checkpoint_prefix_source_is_refused(self):
        prefix = self.root / "run" / "deep" / "bert_model.ckpt"
        prefix.parent.mkdir(parents=True)
        Path(f"{prefix}.index").write_text("index")
        with self.assertRaisesRegex(ExportFolderRefused,
                                    r"^--output_dir '.*/run' holds the source '.*/run/deep/"
                                    r"bert_model.ckpt'"):
            check_export_folder(self.root / "run", "google", [prefix], argument="--output_dir")

    def test_a_source_that_is_no_path_here_does_not_count(self):
        """A model name (`bert-base-uncased`) is no file in the output folder."""
        (self.root / "empty").mkdir()
        check_export_folder(self.root / "empty", "google", [self.root / "empty" / "bert-base"])

    def test_stamped_folders_of_another_kind_or_with_other_files_are_refused(self):
        out = self.root / "out"
        with export_folder(out, "google") as staging:
            Path(staging, "bert_config.json").write_text("{}")
        self.assertEqual(check_export_folder(out, "google"), str(out))
        with self.assertRaisesRegex(ExportFolderRefused,
                                    r"^folder '.*/out' holds a google export \(export_owner"
                                    r"\.json\); this is a tf_hub export: pass a new or empty "
                                    r"folder$"):
            check_export_folder(out, "tf_hub")
        (out / "notes").mkdir()
        (out / "notes" / "todo.txt").write_text("mine")
        with self.assertRaisesRegex(ExportFolderRefused,
                                    r"^folder '.*/out' holds files its earlier google export "
                                    r"did not write \(notes\); move them out, or pass a new or "
                                    r"empty folder$"):
            check_export_folder(out, "google")

    @parameterized.parameters(("[1, 2]", "names no kind"), ("{", r"is not valid JSON \("))
    def test_a_broken_stamp_is_refused(self, stamp, message):
        (self.root / "out").mkdir()
        (self.root / "out" / STAMP_NAME).write_text(stamp)
        with self.assertRaisesRegex(ExportFolderRefused,
                                    f"^{re.escape(str(self.root / 'out' / STAMP_NAME))} "
                                    f"{message}.*; folder '.*/out' is no export to replace: "
                                    "pass a new or empty folder$"):
            check_export_folder(self.root / "out", "google")

    def test_a_stamp_without_its_file_list_keeps_every_file(self):
        (self.root / "out").mkdir()
        (self.root / "out" / STAMP_NAME).write_text('{"kind": "google", "files": "vocab.txt"}')
        (self.root / "out" / "vocab.txt").write_text("mine")
        with self.assertRaisesRegex(ExportFolderRefused, r"did not write \(vocab\.txt\)"):
            check_export_folder(self.root / "out", "google")


class ExportFolderTest(TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.tmp_path()
        self.out = self.root / "out"

    def test_a_re_export_replaces_the_folder_whole_and_stamps_what_it_wrote(self):
        with export_folder(self.out, "tf_hub") as staging:
            Path(staging, "encoder").mkdir()
            Path(staging, "encoder", "old.pb").write_text("old")
        self.assertEqual(json.loads((self.out / STAMP_NAME).read_text()),
                         {"kind": "tf_hub", "files": ["encoder", "encoder/old.pb"]})
        with export_folder(self.out, "tf_hub") as staging:
            Path(staging, "encoder").mkdir()
            Path(staging, "encoder", "new.pb").write_text("new")
            self.assertEqual(_tree(self.out)["encoder/old.pb"], "old")
        self.assertEqual(sorted(_tree(self.out)), ["encoder/new.pb", STAMP_NAME])
        self.assertEqual(os.listdir(self.root), ["out"])

    def test_a_file_that_appears_during_the_export_is_kept_and_the_export_refused(self):
        self.out.mkdir()
        with self.assertRaisesRegex(ExportFolderRefused, r"holds files no export wrote "
                                                         r"\(arrived\.txt\)"):
            with export_folder(self.out, "google") as staging:
                Path(staging, "bert_config.json").write_text("{}")
                (self.out / "arrived.txt").write_text("mine")
        self.assertEqual(_tree(self.out), {"arrived.txt": "mine"})
        self.assertEqual(os.listdir(self.root), ["out"])

    def test_a_write_without_room_is_named_by_its_path_in_the_output_folder(self):
        """Temporary names are the staging folder's, a staged prefix's and a file's own."""
        cases = [(lambda staging: os.path.join(staging, "encoder", "saved_model.pb.tmp"
                                               + "0123456789abcdef" * 2), None,
                  "encoder/saved_model.pb"),
                 (lambda staging: os.path.join(atomic.temporary_name(
                     os.path.join(staging, "bert_model.ckpt")), "bert_model.ckpt.index"), None,
                  "bert_model.ckpt.index"),
                 (lambda staging: "/elsewhere/vocab.txt",  # shutil.copyfile: source first
                  lambda staging: atomic.temporary_name(os.path.join(staging, "vocab.txt")),
                  "vocab.txt"),
                 (lambda staging: None, None, "")]  # a failed write() names no file
        for filename, filename2, expected in cases:
            with self.assertRaises(OSError) as raised:
                with export_folder(self.out, "google") as staging:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), filename(staging),
                                  None, filename2 and filename2(staging))
            self.assertEqual((raised.exception.errno, raised.exception.filename),
                             (errno.ENOSPC, os.path.join(self.out, expected).rstrip("/")))
            self.assertEqual(os.listdir(self.root), [])

    def test_other_errors_pass_through_and_leave_nothing(self):
        with self.assertRaisesRegex(RuntimeError, "a bug"):
            with export_folder(self.out, "google"):
                raise RuntimeError("a bug")
        self.assertEqual(os.listdir(self.root), [])


if __name__ == "__main__":
    tf.test.main()
