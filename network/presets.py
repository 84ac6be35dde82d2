"""Pre-trained models by name: Google's releases and Hugging Face ids, fetched once into the cache.

`resolve(source)` turns what a user passes to a loader into a local folder:

- a local folder, file or checkpoint prefix of that name always wins, so a
  copy beside you is used as it is and never shadowed by a download;
- one of Google's release names (`uncased_L-12_H-768_A-12`, the 24 BERT
  miniatures `uncased_L-4_H-256_A-4`, ...) is the folder inside its zip,
  unpacked under `$BERT_CACHE_DIR/models/google/<name>`;
- a Hugging Face id (`bert-base-uncased`, or any `org/name`) is the folder
  of its `config.json`, `vocab.txt`, `tokenizer_config.json` and
  `model.safetensors`, under `$BERT_CACHE_DIR/models/huggingface/<id>`.

The cached folders keep the release's name, so the casing that a name like
`uncased_...` implies reaches the tokenizer. The hosts can be replaced by
mirrors (or a test's loopback server) with `BERT_GOOGLE_MODELS_URL` and
`BERT_HF_URL`. When a download fails the error names the URL tried and how
to use a copy fetched by other means instead.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

from core import atomic
from core.downloads import (DownloadError, cache_dir, download, extract_zip, locked,
                            verify_file)
from network.config import ConfigError

GOOGLE_MODELS_URL = "https://storage.googleapis.com/bert_models"
HF_URL = "https://huggingface.co"

_MINIATURES = {f"uncased_L-{layers}_H-{hidden}_A-{hidden // 64}": "2020_02_20"
               for layers in (2, 4, 6, 8, 10, 12) for hidden in (128, 256, 512, 768)}
# Release name -> the date folder its zip is published under. The miniatures' L-12/H-768
# is BERT-Base, whose original 2018 release comes after them and is the one kept.
GOOGLE_RELEASES: dict[str, str] = {
    **_MINIATURES,
    "uncased_L-12_H-768_A-12": "2018_10_18",
    "cased_L-12_H-768_A-12": "2018_10_18",
    "uncased_L-24_H-1024_A-16": "2018_10_18",
    "cased_L-24_H-1024_A-16": "2018_10_18",
    "multi_cased_L-12_H-768_A-12": "2018_11_23",
    "wwm_uncased_L-24_H-1024_A-16": "2019_05_30",
    "wwm_cased_L-24_H-1024_A-16": "2019_05_30",
}
# Hugging Face's short ids of the same models -> the repository that now holds them.
HF_SHORT_IDS: dict[str, str] = {
    name: f"google-bert/{name}" for name in (
        "bert-base-uncased", "bert-base-cased", "bert-large-uncased", "bert-large-cased",
        "bert-base-multilingual-cased", "bert-base-multilingual-uncased", "bert-base-chinese",
        "bert-large-uncased-whole-word-masking", "bert-large-cased-whole-word-masking")
}
HF_FILES = ("config.json", "vocab.txt", "tokenizer_config.json", "model.safetensors")
_HF_OPTIONAL = frozenset({"tokenizer_config.json"})
_GOOGLE_FILES = ("bert_config.json", "vocab.txt", "bert_model.ckpt.index")
# What is unpacked of a Google zip; anything else it holds (the .meta graph) is left out.
_GOOGLE_MEMBERS = (*_GOOGLE_FILES, "bert_model.ckpt.data-*")
_HF_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")


def known_names() -> list[str]:
    """Every name `resolve` downloads without an `org/` prefix."""
    return sorted(GOOGLE_RELEASES) + sorted(HF_SHORT_IDS)


def resolve(source: str | os.PathLike) -> Path:
    """The local folder (or file) `source` stands for, downloading a named model on first use.

    Paths that exist locally (a TF checkpoint prefix counts when its
    `.index` does), and paths whose folder exists, are returned as they are,
    as are remote file system paths (`gs://...`) and any path that is no
    name: the loaders' own errors name what is missing there. Raises
    ConfigError for a bare word that is neither a local path nor a known
    name (listing close matches), DownloadError when a download fails.
    """
    text = os.fspath(source)
    path = Path(text)
    if _is_local(text):
        return path
    if text in GOOGLE_RELEASES:
        return _google_release(text)
    if text in HF_SHORT_IDS or _HF_ID.fullmatch(text) and ".." not in text:
        return _huggingface(HF_SHORT_IDS.get(text, text))
    if "/" in text or os.sep in text:
        return path
    close = difflib.get_close_matches(text, known_names(), n=3, cutoff=0.6)
    raise ConfigError(
        f"{text!r} is neither a local file or folder nor a known model name"
        + (f"; did you mean {', '.join(close)}?" if close else ".")
        + f" Known names: Google's releases ({', '.join(list(GOOGLE_RELEASES)[:7])} and the "
        "24 miniatures uncased_L-{2..12}_H-{128..768}_A-{H/64}), Hugging Face's short ids "
        "(bert-base-uncased, ...) and any Hugging Face id as org/name. A model on disk is "
        "loaded by its folder's path.")


def _is_local(text: str) -> bool:
    path = Path(text)
    if "://" in text or path.is_absolute() or path.exists() or Path(text + ".index").exists():
        return True
    # `runs/base` when `runs/` is here: a local path (with a typo), not a Hugging Face id.
    return path.parent != Path(".") and path.parent.exists()


def _google_release(name: str) -> Path:
    """Downloads and unpacks one of Google's zips, unless its folder is in the cache."""
    folder = cache_dir() / "models" / "google" / name
    if folder.is_dir():
        return folder
    base = os.environ.get("BERT_GOOGLE_MODELS_URL", GOOGLE_MODELS_URL).rstrip("/")
    url = f"{base}/{GOOGLE_RELEASES[name]}/{name}.zip"
    advice = (f"To use a copy fetched elsewhere: download {url}, unzip it, and pass the path "
              f"of the folder it holds (the one with bert_config.json) instead of {name!r}.")
    with locked(folder):
        if folder.is_dir():
            return folder
        archive = cache_dir() / "downloads" / "google" / f"{name}.zip"
        try:
            download(url, archive)
        except DownloadError as error:
            raise DownloadError(f"could not download {name!r}: {error}. {advice}") from None
        atomic.remove_dead_temporaries(folder.parent)
        try:
            with atomic.atomic_folder(folder) as staging:
                extract_zip(archive, staging, _GOOGLE_MEMBERS)
                missing = [file for file in _GOOGLE_FILES if not (Path(staging) / file).is_file()]
                if missing:
                    raise DownloadError(f"{url}: the archive lacks {', '.join(missing)} (it is "
                                        f"not one of Google's BERT releases). {advice}")
                try:
                    verify_file(Path(staging) / "bert_config.json", "bert_config.json")
                except DownloadError as error:
                    raise DownloadError(f"{url}: {error}") from None
        finally:
            archive.unlink(missing_ok=True)
    return folder


def _huggingface(model_id: str) -> Path:
    """Downloads the files of a Hugging Face BERT, unless they are all in the cache.

    Each file is written whole (`download`) and the weights come last, so a
    folder holding `model.safetensors` is complete; an interrupted one is
    finished by the next call, resuming the weights where they stopped.
    """
    folder = cache_dir() / "models" / "huggingface" / model_id
    if (folder / "model.safetensors").is_file():
        return folder
    base = os.environ.get("BERT_HF_URL", HF_URL).rstrip("/")
    with locked(folder):
        for file in HF_FILES:
            url = f"{base}/{model_id}/resolve/main/{file}"
            if (folder / file).is_file():
                continue
            try:
                download(url, folder / file)
            except DownloadError as error:
                if file in _HF_OPTIONAL and "HTTP 404" in str(error):
                    continue
                hint = (" (the repository may hold no model.safetensors: convert its weights "
                        "to it, or use another id)" if file == "model.safetensors"
                        and "HTTP 404" in str(error) else "")
                raise DownloadError(
                    f"could not download Hugging Face model {model_id!r}: {error}{hint}. To "
                    f"use a copy fetched elsewhere: put {', '.join(HF_FILES)} from "
                    f"{base}/{model_id} in one folder and pass its path instead.") from None
    return folder

