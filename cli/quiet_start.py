"""TensorFlow's C++ start-up lines and its own info logs, hidden unless `--tf_cpp_log`.

Importing TensorFlow prints a dozen lines a user can do nothing about (the
oneDNN notice, "Could not find cuda drivers", CPU instruction sets, absl's
"All log messages before absl::InitializeLog()", twice), and the first
device lookup adds "failed call to cuInit" on every machine without a GPU.
Most of them are written before TensorFlow reads `TF_CPP_MIN_LOG_LEVEL`,
so the variable alone does not hide them: TensorFlow is imported and its
devices listed here with the process's stderr held aside, which is
dropped when that succeeds and written out when it fails. Later C++ info
and warnings are hidden by `TF_CPP_MIN_LOG_LEVEL=2` (errors still show),
and so are the info lines of TensorFlow's Python side ("Sharding callback
duration", "Assets written to"), which would sit between the runner's own.

It works only before anything imports TensorFlow: `cli.runner_flags`
imports it before anything else of ours. `--tf_cpp_log`, or
`TF_CPP_MIN_LOG_LEVEL=0`, leaves TensorFlow to print everything; another
value of that variable is obeyed for the lines it governs. Either way
TensorFlow is imported here, with Keras's optional scikit-learn and
matplotlib integrations held back (`core.lean_start`): no runner uses them,
and they are a quarter of the start-up.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from typing import Iterator, Sequence

from absl import logging as absl_logging

from core.lean_start import held_back

FLAG = "tf_cpp_log"  # defined with the runners' flags, read here before absl parses them
_TRUE = ("true", "t", "1", "yes", "y")


def asked_for(argv: Sequence[str]) -> bool:
    """Whether `argv` turns `--tf_cpp_log` on, as absl will parse it: the last mention wins."""
    wanted = False
    for argument in argv[1:]:
        if argument == "--":
            break
        name, _, value = argument.lstrip("-").partition("=")
        if name == FLAG:
            wanted = value.lower() in _TRUE if value else True
        elif name == "no" + FLAG:
            wanted = False
    return wanted


@contextlib.contextmanager
def _stderr_held() -> Iterator[None]:
    """Collects what is written to file descriptor 2; written out only if the block fails."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            held.seek(0)
            os.write(2, held.read())
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def quiet_tensorflow_start_up(argv: Sequence[str] = sys.argv) -> bool:
    """Starts TensorFlow without its start-up lines; False when left as the user wants."""
    if "tensorflow" in sys.modules:
        return False
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0" or asked_for(argv):
        _import_tensorflow()
        return False
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with _stderr_held():
        tf = _import_tensorflow()
        tf.config.list_physical_devices()
    tf.get_logger().setLevel(logging.WARNING)  # TensorFlow's own logger, with its own handler
    absl_logging.get_absl_handler().addFilter(_WarningsOnlyFrom(os.path.dirname(tf.__file__)))
    return True


def _import_tensorflow():
    with held_back():
        import tensorflow as tf
    return tf


class _WarningsOnlyFrom(logging.Filter):
    """Drops the info lines logged by the Python modules under `folder`."""

    def __init__(self, folder: str):
        super().__init__()
        self.folder = os.path.join(folder, "")

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or not record.pathname.startswith(self.folder)


quiet_tensorflow_start_up()
