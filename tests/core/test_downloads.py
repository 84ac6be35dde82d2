"""Downloads into the cache: once, with progress, resumed after a cut, verified, fast to fail."""

import io
import json
import os
import re
import time
import zipfile
from pathlib import Path
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from core.downloads import DownloadError, cache_dir, download, extract_zip, verify_file
from tests.fixtures import TestCase
from tests.loopback_http import LoopbackServer, closed_port_url
from tests.zip_archives import declaring, zip_bytes

PAYLOAD = np.random.default_rng(0).bytes(3_000_000)


def _safetensors_bytes(data_size: int, declared_end: int) -> bytes:
    header = json.dumps({"__metadata__": {"format": "pt"},
                         "w": {"dtype": "F32", "shape": [declared_end // 4],
                               "data_offsets": [0, declared_end]}}).encode()
    return len(header).to_bytes(8, "little") + header + bytes(data_size)


def _file_with(test: TestCase, content: bytes) -> Path:
    path = test.tmp_path() / "file"
    path.write_bytes(content)
    return path


class DownloadTest(TestCase):

    def setUp(self):
        super().setUp()
        self.server = LoopbackServer()
        self.addCleanup(self.server.close)
        self.server.files["/data/file.bin"] = PAYLOAD
        self.url = self.server.url + "/data/file.bin"
        self.folder = self.tmp_path()
        self.target = self.folder / "file.bin"

    def test_downloads_once_and_shows_bytes_rate_and_eta(self):
        progress = io.StringIO()
        self.assertEqual(download(self.url, self.target, progress=progress), self.target)
        self.assertEqual(self.target.read_bytes(), PAYLOAD)
        self.assertRegex(progress.getvalue(),
                         r"file\.bin: 3\.0 MB of 3\.0 MB \(100%\), [\d.]+ MB/s, ETA 0s")
        download(self.url, self.target, progress=progress)
        self.assertEqual(self.server.requests, [("/data/file.bin", None)])
        self.assertEqual(sorted(p.name for p in self.folder.iterdir()), [".file.bin.lock",
                                                                         "file.bin"])

    def test_cut_transfer_resumes_with_a_range_request(self):
        self.server.cut_after["/data/file.bin"] = 1_000_000
        download(self.url, self.target, progress=None)
        self.assertEqual(self.server.requests, [("/data/file.bin", None),
                                                ("/data/file.bin", "bytes=1000000-")])
        self.assertEqual(self.target.read_bytes(), PAYLOAD)

    def test_partial_file_is_kept_for_the_next_call(self):
        self.server.cut_after["/data/file.bin"] = 1_200_000
        with self.assertRaisesRegex(DownloadError, r"/data/file\.bin: the transfer stopped at "
                                                   r"1200000 bytes .*next attempt resumes"):
            download(self.url, self.target, progress=None, attempts=1)
        self.assertFalse(self.target.exists())
        self.assertEqual((self.folder / ".file.bin.download").stat().st_size, 1_200_000)
        download(self.url, self.target, progress=None)
        self.assertEqual(self.server.requests[-1], ("/data/file.bin", "bytes=1200000-"))
        self.assertEqual(self.target.read_bytes(), PAYLOAD)
        self.assertFalse((self.folder / ".file.bin.download").exists())

    def test_server_ignoring_range_is_read_from_the_start(self):
        self.server.cut_after["/data/file.bin"] = 500_000
        self.server.ignore_range = True
        download(self.url, self.target, progress=None)
        self.assertEqual(self.server.requests[-1], ("/data/file.bin", "bytes=500000-"))
        self.assertEqual(self.target.read_bytes(), PAYLOAD)

    def test_corrupt_zip_is_refused_and_removed(self):
        archive = bytearray(zip_bytes({"model/weights": b"\x01" * 5000}))
        archive[100] ^= 0xFF  # inside the member's data: its CRC no longer matches
        self.server.files["/model.zip"] = bytes(archive)
        target = self.folder / "model.zip"
        with self.assertRaisesRegex(DownloadError, r"/model\.zip: model\.zip: corrupt zip "
                                                   r"archive \(member model/weights fails"):
            download(self.server.url + "/model.zip", target, progress=None)
        self.assertEqual([p.name for p in self.folder.iterdir()], [".model.zip.lock"])

    def test_missing_file_names_the_url_and_status(self):
        with self.assertRaisesRegex(DownloadError, r"http://127\.0\.0\.1:\d+/nothing: HTTP 404"):
            download(self.server.url + "/nothing", self.folder / "nothing", progress=None)
        self.assertLen(self.server.requests, 1)

    def test_unreachable_host_fails_at_once(self):
        url = closed_port_url() + "/model.zip"
        began = time.monotonic()
        with self.assertRaisesRegex(DownloadError, f"{url}: cannot connect"):
            download(url, self.folder / "model.zip", progress=None)
        self.assertLess(time.monotonic() - began, 2.0)

    def test_cache_dir_follows_the_environment(self):
        root = self.folder / "cache"
        with mock.patch.dict(os.environ, {"BERT_CACHE_DIR": str(root)}):
            self.assertEqual(cache_dir(), root)
        self.assertTrue(root.is_dir())


class CacheDirTest(TestCase):
    """A cache path that cannot be a cache folder is named with its variable and what is wrong."""

    def setUp(self):
        super().setUp()
        self.folder = self.tmp_path()
        self.file = self.folder / "a_file"
        self.file.write_text("not a folder")

    def assert_refused(self, environment: dict[str, str], message: str) -> None:
        with mock.patch.dict(os.environ, environment):
            with self.assertRaisesRegex(DownloadError, f"^{message}; the cache must be a folder "
                                                       "this user can write to$"):
                cache_dir()

    def test_a_file(self):
        self.assert_refused({"BERT_CACHE_DIR": str(self.file)},
                            f"BERT_CACHE_DIR={self.file}: is a file, not a folder")

    def test_a_path_under_a_file(self):
        self.assert_refused({"BERT_CACHE_DIR": str(self.file / "sub" / "cache")},
                            f"BERT_CACHE_DIR={self.file}/sub/cache: cannot be created: "
                            f"{self.file} is not a folder")

    def test_the_default_under_a_file_names_the_variable_that_moves_it(self):
        environment = {"HOME": str(self.file)}
        with mock.patch.dict(os.environ, environment):
            os.environ.pop("BERT_CACHE_DIR", None)
            with self.assertRaisesRegex(DownloadError, re.escape(
                    f"the download cache {self.file}/.cache/bert_tf2 (the default; set "
                    f"BERT_CACHE_DIR for another folder): cannot be created: {self.file} is not "
                    "a folder")):
                cache_dir()

    def test_a_folder_this_user_cannot_write_to(self):
        folder = self.folder / "read_only"
        folder.mkdir(mode=0o500)
        self.addCleanup(folder.chmod, 0o700)
        if os.access(folder, os.W_OK):  # root ignores the mode bits; not so /proc's
            folder = Path("/proc/self")
        if not folder.is_dir() or os.access(folder, os.W_OK):
            self.skipTest("no folder here that this user cannot write to")
        self.assert_refused({"BERT_CACHE_DIR": str(folder)},
                            f"BERT_CACHE_DIR={folder}: is a folder this user cannot write to")


class VerifyAndExtractTest(parameterized.TestCase, TestCase):

    @parameterized.named_parameters(
        ("json", "config.json", b'{"hidden_size": 8}', None),
        ("broken_json", "config.json", b'{"hidden_size": 8', r"config\.json: not valid JSON"),
        ("safetensors", "model.safetensors", _safetensors_bytes(16, 16), None),
        ("cut_safetensors", "model.safetensors", _safetensors_bytes(12, 16),
         r"model\.safetensors: its tensors need 16 bytes of data, the file holds 12"),
        ("not_safetensors", "model.safetensors", b"<html>", r"not a safetensors file"),
        ("zip", "a.zip", zip_bytes({"a/b": b"x"}), None),
        ("not_zip", "a.zip", b"PK\x03\x04 cut", r"a\.zip: not a readable zip archive"),
    )
    def test_verify_file(self, name, content, error):
        path = _file_with(self, content)
        if error is None:
            verify_file(path, name)
        else:
            with self.assertRaisesRegex(DownloadError, error):
                verify_file(path, name)

    def test_extract_zip_drops_the_single_top_folder(self):
        folder = self.tmp_path()
        archive = _file_with(self, zip_bytes({"release/vocab.txt": b"[PAD]\n",
                                              "release/sub/x": b"1"}))
        extract_zip(archive, folder, ["*"])
        self.assertEqual((folder / "vocab.txt").read_bytes(), b"[PAD]\n")
        self.assertEqual((folder / "sub" / "x").read_bytes(), b"1")

    def test_extract_zip_refuses_members_outside_the_folder(self):
        folder = self.tmp_path()
        archive = _file_with(self, zip_bytes({"a": b"", "../evil": b"x"}))
        with self.assertRaisesRegex(DownloadError, r"member \.\./evil points outside"):
            extract_zip(archive, folder, ["*"])
        self.assertFalse((folder.parent / "evil").exists())

    def test_extract_zip_unpacks_only_the_wanted_members_and_counts_the_rest(self):
        folder = self.tmp_path()
        archive = _file_with(self, zip_bytes(
            {"release/bert_config.json": b"{}", "release/bert_model.ckpt.data-00000-of-00001":
             b"w", "release/bert_model.ckpt.meta": b"graph", "release/extra/big.bin":
             bytes(2_000_000)}, zipfile.ZIP_DEFLATED))
        with self.assertLogs("absl", "INFO") as logs:
            extract_zip(archive, folder, ["bert_config.json", "bert_model.ckpt.data-*"])
        self.assertEqual(sorted(path.name for path in folder.rglob("*")),
                         ["bert_config.json", "bert_model.ckpt.data-00000-of-00001"])
        self.assertRegex(logs.output[0], r"left out 2 member\(s\) not needed: "
                                         r"release/bert_model\.ckpt\.meta, release/extra/big")

    def test_extract_zip_refuses_declared_sizes_over_the_limit_before_writing(self):
        folder = self.tmp_path()
        archive = _file_with(self, zip_bytes({"vocab.txt": b"v" * 600, "big.bin": bytes(600)},
                                             zipfile.ZIP_DEFLATED))
        with self.assertRaisesRegex(DownloadError, rf"^{archive}: member big\.bin brings the "
                                                   r"unpacked size to 1200 bytes, over the "
                                                   r"limit of 1000$"):
            extract_zip(archive, folder, ["*"], max_bytes=1000)
        self.assertEqual(list(folder.iterdir()), [])

    def test_extract_zip_writes_no_more_than_a_lying_header_declares(self):
        """A 2 MB member whose headers declare 1000 bytes: its data is refused, not unpacked."""
        folder = self.tmp_path()
        archive = _file_with(self, declaring(zip_bytes({"bert_model.ckpt.data-0": bytes(
            2_000_000)}, zipfile.ZIP_DEFLATED), "bert_model.ckpt.data-0", 1000))
        with self.assertRaisesRegex(DownloadError, rf"^{archive}: member bert_model\.ckpt\."
                                                   r"data-0 does not match its header"):
            extract_zip(archive, folder, ["*"], max_bytes=1_000_000)
        self.assertEqual(list(folder.iterdir()), [])

    def test_a_zip_declaring_more_than_the_limit_fails_verification_at_once(self):
        """A small download that would inflate to 3.5 GiB is refused before testzip reads it."""
        path = _file_with(self, declaring(zip_bytes({"release/big.bin": bytes(100_000)},
                                                    zipfile.ZIP_DEFLATED),
                                          "release/big.bin", 7 << 29))
        self.assertLess(path.stat().st_size, 1000)
        began = time.monotonic()
        with self.assertRaisesRegex(DownloadError, r"^m\.zip: member release/big\.bin brings "
                                                   r"the unpacked size to 3758096384 bytes, over "
                                                   r"the limit of 3221225472$"):
            verify_file(path, "m.zip")
        self.assertLess(time.monotonic() - began, 1.0)


if __name__ == "__main__":
    tf.test.main()
