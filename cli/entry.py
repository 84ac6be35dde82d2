"""The runners' entry point: user errors and outside faults as one line, not a traceback.

Runners raise ValueError / OSError (and their subclasses) for anything a
user can fix: a missing file, a malformed line, a bad flag value. The entry
point turns those into one line on stderr that names the problem, and exit
status 1, instead of a traceback; so too a full disk, a file-size limit,
Ctrl-C and SIGTERM (`core.faults`), which also say what a rerun resumes
from. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

from absl import app, flags

from cli.host_memory import keep_freed_heap_pages
from core import faults


def run(main: Callable[[list[str]], None]) -> None:
    """`absl.app.run(main)`, with user errors reported as `prog: error: message`, exit 1,
    and outside faults as `core.faults.one_line_endings` reports them.

    Before anything runs, malloc is told to keep freed heap pages
    (`cli.host_memory`), which must happen before TensorFlow starts
    its threads.
    """
    keep_freed_heap_pages()
    program = os.path.basename(sys.argv[0])
    with faults.one_line_endings(program):
        app.run(main)


def list_key_flags_under_program(module_name: str,
                                 flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Makes `--help` list `module_name`'s key flags when the program is another file.

    absl's `--help` lists the key flags of the program file (`sys.argv[0]`).
    For an installed command that file is the small wrapper pip writes, not
    the runner, so its help would list no flag at all.
    """
    for flag in flag_values.get_key_flags_for_module(module_name):
        flag_values.register_key_flag_for_module(sys.argv[0], flag)


def run_command(define_flags: Callable[[], None], main: Callable[[list[str]], None],
                module_name: str) -> None:
    """A runner as a program: its flags defined, listed by `--help`, then `run(main)`.

    The same whether the file is run as a script or as its installed command.
    `define_flags` runs only here, so importing a runner (tests, notebooks)
    registers nothing in absl's global registry; the shared flags it defines
    through `cli.runner_flags` are its key flags, listed by `--help`.
    """
    define_flags()
    list_key_flags_under_program(module_name)
    run(main)
