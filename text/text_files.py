"""Reads text files line by line as strict UTF-8, naming the file and line of any bad byte.

The original BERT scripts decoded input with `errors="ignore"`, so a corpus
in the wrong encoding (Latin-1, UTF-16, a stray binary file) was silently
tokenized into something else. Text inputs here (corpora, vocabularies,
task files) go through `read_utf8_lines` instead, which stops at the first
byte that is not UTF-8 and says where it is.

Lines end at `\\n` only, as with the original's `readline()`; a `\\r` before
it (Windows line ends) is removed too. Other Unicode line separators
(U+2028, U+0085, ...) stay inside the line, where the tokenizer treats them
as the original does. Paths with a scheme (`gs://...`) are read through
`tf.io.gfile`, as the original's `tf.gfile` allowed; local files through
Python's own file objects, which iterate lines about 15 times faster.
"""

from __future__ import annotations

from typing import BinaryIO, Iterator


def read_utf8_lines(path: str) -> Iterator[str]:
    """Yields the lines of `path` without their line ends.

    Raises FileNotFoundError when `path` does not exist, IsADirectoryError
    for a folder, OSError when it cannot be read, and ValueError naming
    `path:line` and the byte column when a line is not valid UTF-8.
    """
    path = str(path)
    with _open_binary(path) as handle:
        line_number = 0
        try:
            for line_number, raw in enumerate(handle, start=1):
                yield decode_line(raw, path, line_number)
        except OSError as error:
            raise OSError(f"{path}: reading failed after line {line_number}: {error}") from None


def decode_line(raw: bytes, path: str, line_number: int) -> str:
    """One line as text, its `\\n` or `\\r\\n` end removed; bad UTF-8 names where it is."""
    if raw.endswith(b"\n"):
        raw = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        bad = raw[error.start:error.end]
        raise ValueError(
            f"{path}:{line_number}: not valid UTF-8 at byte column {error.start + 1} "
            f"(bytes {bad.hex(' ')}: {error.reason}); convert the file to UTF-8") from None


def _open_binary(path: str) -> BinaryIO:
    if "://" not in path:
        try:
            return open(path, "rb")
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise IsADirectoryError(f"{path}: is a folder, not a text file") from None
        except OSError as error:
            raise OSError(f"{path}: cannot be opened: {error.strerror}") from None
    import tensorflow as tf  # only remote paths need TensorFlow's file systems

    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    if tf.io.gfile.isdir(path):
        raise IsADirectoryError(f"{path}: is a folder, not a text file")
    try:
        return tf.io.gfile.GFile(path, "rb")
    except tf.errors.OpError as error:
        raise OSError(f"{path}: cannot be opened: {error.message}") from None
