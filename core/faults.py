"""Faults from outside the program end a run with one line: full disk, file-size limit, signal.

A user who fills the disk, runs under `ulimit -f` or presses Ctrl-C has
done nothing wrong and can fix nothing in the code: a traceback only hides
the two things they need, what happened and whether a rerun loses work. The
command-line entry points run their work inside `one_line_endings`, which
turns these faults into `prog: what happened; what a rerun does` on stderr
and an exit status, after the `finally` blocks that remove temporary files
have run.

- Writes that find no room: Python raises OSError with ENOSPC, EDQUOT or
  EFBIG; TensorFlow's file writers raise `ResourceExhaustedError` or
  `OutOfRangeError` whose message ends in `<path>; <strerror>` (how its
  POSIX file system reports an errno). Both are recognised here, without
  importing TensorFlow, so a program free of it stays free of it.
- The file-size limit also sends SIGXFSZ, which would kill the process
  with nothing said; CPython ignores SIGXFSZ from startup, so the write
  fails with EFBIG instead, and `one_line_endings` makes sure of it.
- SIGINT raises KeyboardInterrupt; SIGTERM (what `kill`, batch schedulers
  and container runtimes send) is made to raise `Terminated`, a
  KeyboardInterrupt, so the same clean-up runs. The exit status is the
  shell's for the signal, 128 + its number (130, 143). An exception raised
  while Python runs a `__del__` or a weakref callback (TensorFlow runs many)
  is printed and dropped, so a signal landing there would leave the run
  going: the signal is also noted, and loops call `raise_pending_signal` at
  each step to raise it again.

What a rerun does is the command's to say: a training run resumes (the
default advice), an export simply starts again. What it resumes from is
known only deep inside a run (the newest checkpoint); the code that knows it
reports it with `note_resume_point`.

A user error whose message names settings fields (`core.arguments.FieldMessage`)
is written with each field that is one of the program's flags as `--field`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import sys
import threading
from collections.abc import Container
from typing import Iterator

from core.arguments import FieldMessage

# What the line ends with unless the command says otherwise: its run resumes where it stopped.
RERUN_RESUMES = "rerun the same command to resume"

# errno -> what the user is told; the strerror text is how TensorFlow's messages carry it.
_NO_ROOM = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is used up",
    errno.EFBIG: "the file would exceed this process' file-size limit (ulimit -f)",
}
# TensorFlow's decorations around `<path>; <strerror>`: a function name in front, the op behind,
# and the suffix of the temporary file it writes before renaming.
_TF_PREFIX = re.compile(r"^\{\{[^}]*\}\}\s*")
_TF_SUFFIX = re.compile(r"\s*\[Op:\w+\]\s*$")
_TF_TEMPORARY = re.compile(r"\.tempstate\d+$")

_resume_point: str | None = None
_pending_signal: int | None = None  # a SIGINT/SIGTERM whose exception may have been dropped


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C raises KeyboardInterrupt."""


def note_resume_point(description: str | None) -> None:
    """Records what a rerun would resume from (e.g. "the newest checkpoint is out/ckpt-8"),
    for the line a run stopped by a fault ends with."""
    global _resume_point
    _resume_point = description


def no_room_error(error: BaseException) -> OSError | None:
    """`error` as an OSError naming its file, if it is a write that found no room; else None."""
    if isinstance(error, OSError):
        return error if error.errno in _NO_ROOM else None
    tensorflow = sys.modules.get("tensorflow")
    if tensorflow is None or not isinstance(error, (tensorflow.errors.ResourceExhaustedError,
                                                    tensorflow.errors.OutOfRangeError)):
        return None
    message = _TF_SUFFIX.sub("", _TF_PREFIX.sub("", error.message.strip()))
    for code in _NO_ROOM:
        path, separator, reason = message.rpartition("; ")
        if separator and reason == os.strerror(code):
            return OSError(code, os.strerror(code), _TF_TEMPORARY.sub("", path))
    return None


def no_room_message(error: OSError) -> str:
    """`cannot write PATH: why`, for an error `no_room_error` returned."""
    where = f" {error.filename}" if error.filename else ""
    return f"cannot write{where}: {_NO_ROOM[error.errno]}"


def _rerun_advice(action: str, rerun: str) -> str:
    return "; ".join(filter(None, [_resume_point, f"{action}{rerun}"]))


@contextlib.contextmanager
def one_line_endings(program: str, user_errors: tuple[type[BaseException], ...] = (
        ValueError, OSError), *, flags: Container[str] = (),
        rerun: str = RERUN_RESUMES) -> Iterator[None]:
    """Runs the block; a fault or a user error ends the process with one line on stderr.

    - no room to write: `program: error: cannot write PATH: why; ...`, exit 1;
    - SIGINT / SIGTERM: `program: interrupted (SIGINT); ...`, exit 130 / 143;
    - `user_errors`: `program: error: message`, exit 1, the message's fields
      that are in `flags` written `--field`.
    Anything else is a bug and keeps its traceback. `rerun` is the advice
    the fault lines end with: what rerunning the command does.
    """
    global _pending_signal
    _pending_signal = None
    in_main_thread = threading.current_thread() is threading.main_thread()
    if in_main_thread:  # signal handlers can only be set there
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    # A signal ignored on purpose (nohup, a shell's background job) stays ignored.
    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    handled = [number for number, handler in previous.items() if in_main_thread and handler in (
        signal.SIG_DFL, signal.default_int_handler)]
    for number in handled:
        signal.signal(number, _raise_interrupt)
    try:
        yield
    except KeyboardInterrupt as interrupt:
        number = signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT
        print(f"{program}: interrupted ({signal.Signals(number).name}); "
              f"{_rerun_advice('', rerun)}", file=sys.stderr, flush=True)
        sys.exit(128 + number)
    except Exception as error:
        room = no_room_error(error)
        if room is not None:
            advice = _rerun_advice("make room (or raise the limit), then ", rerun)
            print(f"{program}: error: {one_line(no_room_message(room))}; {advice}",
                  file=sys.stderr, flush=True)
            sys.exit(1)
        if isinstance(error, user_errors):
            message = error.render(flags) if isinstance(error, FieldMessage) else error
            print(f"{program}: error: {one_line(str(message))}", file=sys.stderr, flush=True)
            sys.exit(1)
        raise
    finally:
        _pending_signal = None
        for number in handled:
            signal.signal(number, previous[number])


def one_line(message: str) -> str:
    """`message` on one line: a line break a value brought in (a path, a flag's text) is
    written as `\\n`, so the ending stays one line and the value stays readable."""
    return message.replace("\r", "\\r").replace("\n", "\\n")


def raise_pending_signal() -> None:
    """Raises again a SIGINT or SIGTERM that arrived while `one_line_endings` ran and whose
    exception Python dropped (raised inside a `__del__`); nothing if none is pending."""
    if _pending_signal is not None:
        _raise_interrupt(_pending_signal, None)


def _raise_interrupt(number, frame) -> None:
    del frame
    global _pending_signal
    _pending_signal = number
    raise Terminated() if number == signal.SIGTERM else KeyboardInterrupt()
