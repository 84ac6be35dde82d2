"""`eval_results.txt`: the `key = value` result file every runner writes and sweeps read."""

from __future__ import annotations

import os
from typing import Mapping

from absl import logging

from core.atomic import write_atomically


def write_eval_results(path: str | os.PathLike, results: Mapping[str, object],
                       log: bool = True) -> None:
    """`key = value` lines, sorted by key, as the original runners wrote eval_results.txt.

    With `log`, each line also goes to the log, as the original's
    `***** Eval results *****` block did.
    """
    lines = [f"{key} = {_format(value)}" for key, value in sorted(results.items())]
    write_atomically(path, "\n".join(lines) + "\n")
    if log:
        for line in lines:
            logging.info("  %s", line)


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
