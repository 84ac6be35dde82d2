"""What a results page names beside its figures: the CPU, the versions and the data's checksums.

A figure measured on shared 2-core machines means little without the
processor it ran on, and one computed from research data means little
without the exact files; every results page of the paper's tasks states both.
"""

from __future__ import annotations

import hashlib
import math
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Iterable, Mapping


def sha256(path: str | Path) -> str:
    """The file's SHA-256, as `sha256sum` prints it."""
    digest = hashlib.sha256()
    with open(path, "rb") as reader:
        for block in iter(lambda: reader.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def machine(torch_python: str | None = None) -> dict[str, str]:
    """lscpu's model name, CPU count and flags, and the versions of both environments."""
    info = {}
    listing = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    for line in listing.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("Model name", "CPU(s)", "Flags"):
            info[key.strip()] = value.strip()
    for package in ("tensorflow", "keras", "tensorflow-text"):
        info[package] = metadata.version(package)
    if torch_python and Path(torch_python).is_file():
        info["reference (torch, transformers)"] = subprocess.run(
            [torch_python, "-c", "import torch, transformers; "
             "print(torch.__version__, transformers.__version__)"],
            capture_output=True, text=True, check=False).stdout.strip()
    return info


def provenance_lines(command: str | None, seconds: Mapping[str, tuple[float, float]],
                     files: Iterable[tuple[str, str]], info: Mapping[str, str]) -> list[str]:
    """Markdown: the command, wall and CPU time per part, the machine, the data's sha256.

    Args:
      command: the command that made the page's figures (None: the page shows it already).
      seconds: part name -> (wall seconds, CPU seconds; nan where not recorded).
      files: (file name as the data's README names it, sha256).
      info: `machine()`'s answer.
    """
    lines = ["Produced by:", "", "```bash", command, "```", ""] if command else []
    lines += ["| part | wall time | CPU time |", "|---|---|---|"]
    lines += [f"| {name} | {_duration(wall)} | {_duration(cpu)} |"
              for name, (wall, cpu) in seconds.items()]
    lines += ["", "Data (sha256, as in the data folder's SHA256SUMS):", ""]
    lines += [f"- `{name}` `{digest}`" for name, digest in files]
    lines += ["", "Machine:", ""]
    lines += [f"- {key}: {value}" for key, value in info.items()]
    return lines


def _duration(seconds: float) -> str:
    if math.isnan(seconds):
        return "not recorded"
    minutes, second = divmod(round(seconds), 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours} h {minute:02d} min" if hours else f"{minute} min {second:02d} s"
