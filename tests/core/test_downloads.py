"""Downloads into the cache: once, with progress, resumed after a cut, verified, fast to fail."""

import io
import json
import os
import tempfile
import time
import zipfile
from pathlib import Path
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from core.downloads import DownloadError, cache_dir, download, extract_zip, verify_file
from tests.loopback_http import LoopbackServer, closed_port_url

PAYLOAD = np.random.default_rng(0).bytes(3_000_000)


def _zip_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _safetensors_bytes(data_size: int, declared_end: int) -> bytes:
    header = json.dumps({"__metadata__": {"format": "pt"},
                         "w": {"dtype": "F32", "shape": [declared_end // 4],
                               "data_offsets": [0, declared_end]}}).encode()
    return len(header).to_bytes(8, "little") + header + bytes(data_size)


def _fresh_folder(test: tf.test.TestCase) -> Path:
    return Path(tempfile.mkdtemp(dir=test.get_temp_dir()))


def _file_with(test: tf.test.TestCase, content: bytes) -> Path:
    path = _fresh_folder(test) / "file"
    path.write_bytes(content)
    return path


class DownloadTest(tf.test.TestCase):

    def setUp(self):
        super().setUp()
        self.server = LoopbackServer()
        self.addCleanup(self.server.close)
        self.server.files["/data/file.bin"] = PAYLOAD
        self.url = self.server.url + "/data/file.bin"
        self.folder = _fresh_folder(self)
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
        archive = bytearray(_zip_bytes({"model/weights": b"\x01" * 5000}))
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


class VerifyAndExtractTest(parameterized.TestCase, tf.test.TestCase):

    @parameterized.named_parameters(
        ("json", "config.json", b'{"hidden_size": 8}', None),
        ("broken_json", "config.json", b'{"hidden_size": 8', r"config\.json: not valid JSON"),
        ("safetensors", "model.safetensors", _safetensors_bytes(16, 16), None),
        ("cut_safetensors", "model.safetensors", _safetensors_bytes(12, 16),
         r"model\.safetensors: its tensors need 16 bytes of data, the file holds 12"),
        ("not_safetensors", "model.safetensors", b"<html>", r"not a safetensors file"),
        ("zip", "a.zip", _zip_bytes({"a/b": b"x"}), None),
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
        folder = _fresh_folder(self)
        archive = _file_with(self, _zip_bytes({"release/vocab.txt": b"[PAD]\n",
                                               "release/sub/x": b"1"}))
        extract_zip(archive, folder)
        self.assertEqual((folder / "vocab.txt").read_bytes(), b"[PAD]\n")
        self.assertEqual((folder / "sub" / "x").read_bytes(), b"1")

    def test_extract_zip_refuses_members_outside_the_folder(self):
        folder = _fresh_folder(self)
        archive = _file_with(self, _zip_bytes({"a": b"", "../evil": b"x"}))
        with self.assertRaisesRegex(DownloadError, r"member \.\./evil points outside"):
            extract_zip(archive, folder)
        self.assertFalse((folder.parent / "evil").exists())


if __name__ == "__main__":
    tf.test.main()
