"""TensorFlow's C++ start-up lines, hidden unless `--tf_cpp_log` asks for them.

Importing TensorFlow prints a dozen lines a user can do nothing about (the
oneDNN notice, "Could not find cuda drivers", CPU instruction sets, absl's
"All log messages before absl::InitializeLog()", twice), and the first
device lookup adds "failed call to cuInit" on every machine without a GPU.
Most of them are written before TensorFlow reads `TF_CPP_MIN_LOG_LEVEL`,
so the variable alone does not hide them: TensorFlow is imported and its
devices listed here with the process's stderr held aside, which is
dropped when that succeeds and written out when it fails. Later C++ info
and warnings are hidden by `TF_CPP_MIN_LOG_LEVEL=2`; errors still show.

It works only before anything imports TensorFlow, so the runners import
this module first of all. A user who set `TF_CPP_MIN_LOG_LEVEL`, or passed
`--tf_cpp_log`, sees everything as TensorFlow prints it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import Iterator, Sequence

from absl import flags

FLAG = "tf_cpp_log"
_TRUE = ("true", "t", "1", "yes", "y")


def define_flags(flag_values: flags.FlagValues) -> None:
    """`--tf_cpp_log`, read from the command line before absl parses it (see `asked_for`)."""
    flags.DEFINE_bool(FLAG, False, "Show TensorFlow's C++ start-up and info messages (hidden "
                      "by default; TF_CPP_MIN_LOG_LEVEL, when set, is obeyed as is).",
                      flag_values=flag_values)


def asked_for(argv: Sequence[str]) -> bool:
    """Whether the command line turns `--tf_cpp_log` on; as in absl, the last mention wins."""
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
    """Starts TensorFlow without its C++ start-up lines; False when left as the user wants."""
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ or asked_for(argv) or "tensorflow" in sys.modules:
        return False
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    with _stderr_held():
        import tensorflow as tf

        tf.config.list_physical_devices()
    return True


quiet_tensorflow_start_up()
