"""What every runner script shares at its edges: the entry point and its result files.

Runners raise ValueError / OSError (and their subclasses) for anything a
user can fix: a missing file, a malformed line, a bad flag value. The entry
point turns those into one line on stderr that names the problem, and exit
status 1, instead of a traceback; anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Mapping

from absl import app

from training.atomic import write_atomically
from training.host_memory import keep_freed_heap_pages


def run(main: Callable[[list[str]], None]) -> None:
    """`absl.app.run(main)`, with user errors reported as `prog: error: message`, exit 1.

    Before anything runs, malloc is told to keep freed heap pages
    (`training.host_memory`), which must happen before TensorFlow starts
    its threads.
    """
    keep_freed_heap_pages()
    program = os.path.basename(sys.argv[0])
    try:
        app.run(main)
    except (ValueError, OSError) as error:
        print(f"{program}: error: {error}", file=sys.stderr)
        sys.exit(1)


def write_text_atomically(path: str | os.PathLike, text: str) -> None:
    """Writes `text` under a temporary name beside `path`, then renames it into place."""
    write_atomically(path, text)


def write_eval_results(path: str | os.PathLike, results: Mapping[str, object]) -> None:
    """`key = value` lines, sorted by key, as the original runners wrote eval_results.txt."""
    lines = [f"{key} = {_format(value)}" for key, value in sorted(results.items())]
    write_text_atomically(path, "\n".join(lines) + "\n")


def read_eval_results(path: str | os.PathLike) -> dict[str, float]:
    """Parses an eval_results.txt back into numbers (for sweeps and tests)."""
    results = {}
    with open(path, encoding="utf-8") as reader:
        for line_number, line in enumerate(reader, start=1):
            if not line.strip():
                continue
            key, separator, value = line.partition(" = ")
            if not separator:
                raise ValueError(f"{path}:{line_number}: expected 'key = value', got {line!r}")
            results[key.strip()] = float(value)
    return results


def _format(value: object) -> str:
    if hasattr(value, "item"):  # numpy and tensor scalars
        value = value.item()
    return repr(value) if isinstance(value, float) else str(value)
