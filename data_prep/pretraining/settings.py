"""One pre-training data run's settings, shared by the local tool and the Beam pipeline.

A plain dataclass, free of TensorFlow and of absl flags: the command-line
tools build it from their flags, and every library function takes it as an
argument, so a program (or a test) can run the pipeline without flags.
"""

from __future__ import annotations

import dataclasses
import os

from core.arguments import FieldError, FieldFileNotFoundError
from data_prep.pretraining.instances import InstanceOptions


@dataclasses.dataclass(frozen=True)
class Settings:
    """Messages name the fields, which are the command line's flags (`core.arguments`);
    the patterns and files are the comma lists of `input_file` and `output_file`."""

    input_patterns: tuple[str, ...]
    output_files: tuple[str, ...]
    vocab_file: str
    options: InstanceOptions
    do_lower_case: bool = True
    random_seed: int = 12345
    num_output_shards: int | None = None
    num_workers: int = 1
    documents_per_chunk: int = 256

    def __post_init__(self):
        if not self.input_patterns or not self.output_files or not self.vocab_file:
            raise FieldError("{input_file}, {output_file} and {vocab_file} are required")
        for name in ("num_workers", "documents_per_chunk", "num_output_shards"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise FieldError(f"{{{name}}}={{0}} must be at least 1", value)
        if self.random_seed < 0:
            raise FieldError("{random_seed}={0} must be non-negative", self.random_seed)

    def check_vocab_file(self) -> None:
        """Raises FileNotFoundError unless `vocab_file` is a file, before any work starts."""
        if not os.path.isfile(self.vocab_file):
            raise FieldFileNotFoundError("{vocab_file}={0}: no such file", self.vocab_file)
