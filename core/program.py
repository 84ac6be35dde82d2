"""Every command's program edge: its flags, its `--help`, and every ending in one line.

The runners, `export_model.py` and the `data_prep` and `evaluation` tools all
run through `run_command`, so each command a user types behaves the same
at its edge:

- malloc keeps freed heap pages (`core.host_memory`), set first, before
  TensorFlow starts its threads;
- its flags are defined only when it runs as a program, so importing it
  (tests, notebooks) registers nothing in absl's global registry, and
  `--help` lists them also when the program file is pip's wrapper;
- a user error (ValueError, OSError) ends as `prog: error: message`, exit
  status 1, and a full disk, Ctrl-C or SIGTERM as one line saying what a
  rerun does (`core.faults`); anything else is a bug and keeps its traceback;
- library code names settings fields bare (`core.arguments.FieldMessage`):
  here each field that is one of this program's flags is written `--field`.

It lives on the ground floor because the `data_prep` and `evaluation` tools
sit below `cli/` and may not import it.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

from absl import app, flags

from core import faults
from core.host_memory import keep_freed_heap_pages


def program_name(module_name: str) -> str:
    """How the one-line endings name the program, as the user started it.

    `python -m data_prep.vocab` for a module run with `-m`; otherwise the
    file or the installed command (`run_classifier.py`, `bert-run-squad`).
    """
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if module_name == "__main__" and spec is not None:
        return f"python -m {spec.name.removesuffix('.__main__')}"
    return os.path.basename(sys.argv[0])


def list_key_flags_under_program(module_name: str,
                                 flag_values: flags.FlagValues = flags.FLAGS) -> set[str]:
    """Makes `--help` list `module_name`'s key flags when the program is another file;
    returns their names: the flags this program's messages write as `--flag`.

    absl's `--help` lists the key flags of the program file (`sys.argv[0]`).
    For an installed command that file is the small wrapper pip writes, not
    the module, so its help would list no flag at all.
    """
    key_flags = flag_values.get_key_flags_for_module(module_name)
    for flag in key_flags:
        flag_values.register_key_flag_for_module(sys.argv[0], flag)
    return {flag.name for flag in key_flags}


def check_no_arguments(argv: list[str]) -> None:
    """Refuses the words absl left after the flags: a command reads every value from a flag.

    Such a word is most often a value written apart from its boolean flag
    (`--do_train false` sets --do_train and leaves `false`); ignoring it
    would run with a setting the user did not ask for.

    Args:
      argv: what absl passes to `main`: the program, then the words left.
    """
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments: {' '.join(argv[1:])}: every value goes in "
                         "a flag (--name=value; a boolean flag as --name or --noname)")


def run_command(define_flags: Callable[[], None], main: Callable[[list[str]], object],
                module_name: str, *, rerun: str = faults.RERUN_RESUMES) -> None:
    """A command as a program: its flags defined and listed by `--help`, then `main` run by
    `absl.app.run` inside `core.faults.one_line_endings`.

    The same whether the module runs as a script, with `python -m` or as its
    installed command.

    Args:
      define_flags: defines the command's flags in absl's global registry;
        the flags it defines (and the key flags it adopts) are the program's.
      main: absl's main, given the arguments left after the flags.
      module_name: the module defining the flags (its `__name__`).
      rerun: what the line a fault ends with advises; a command whose rerun
        starts over rather than resumes says so (`"rerun the same command"`).
    """
    keep_freed_heap_pages()
    define_flags()
    program_flags = list_key_flags_under_program(module_name)
    with faults.one_line_endings(program_name(module_name), flags=program_flags, rerun=rerun):
        app.run(main)
