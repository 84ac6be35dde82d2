"""The library speaks of fields and arguments; only the command-line edge speaks of `--flags`.

A message raised, logged or printed by a library module (every floor below
`cli/`) names the field or argument bare (`max_seq_length`), through
`core.arguments.FieldError` where a command line should see the flag: the
program edge (`core.program`) writes each field that is one of its flags
as `--max_seq_length`. So a Python caller never reads about a flag it never
set, and the command line still reads its own flags.

The rule, read from the syntax tree: no string literal of a library module
(f-string pieces included) holds `--word`, except
- docstrings (and other strings standing alone as statements),
- flag definitions and their help texts (`flags.DEFINE_*`, argparse's
  `add_argument`, `help=`), which describe the command line to itself,
- elements of list and tuple literals: the command lines a module builds for
  another program (`pip download --no-deps`, Beam's `--runner=`);
and except the program edge itself (`core/program.py`), which only a command
line reaches and which tells it how flags are written.
"""

import ast
import re
from pathlib import Path

import tensorflow as tf

REPO = Path(__file__).resolve().parents[1]
LIBRARY = ("text", "core", "network", "modeling", "data_prep", "training", "evaluation", "export",
           "tasks")
FLAG = re.compile(r"(?<![\w-])--[a-z_]")
FLAG_DEFINITIONS = ("DEFINE", "add_argument")  # absl's flags.DEFINE_*, argparse's
PROGRAM_EDGE = "core/program.py"


def _is_allowed(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    parent = parents.get(node)
    if isinstance(parent, ast.JoinedStr):  # a piece of an f-string: judged as the whole
        node, parent = parent, parents.get(parent)
    if isinstance(parent, (ast.Expr, ast.List, ast.Tuple)):  # docstring; another program's argv
        return True
    while parent is not None:
        if isinstance(parent, ast.keyword) and parent.arg == "help":
            return True
        if isinstance(parent, ast.Call):
            function = parent.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(
                function, "id", "")
            if name.startswith(FLAG_DEFINITIONS):
                return True
        parent = parents.get(parent)
    return False


def flag_words(source: str, filename: str = "<source>") -> list[str]:
    """`line: text` of each string literal in `source` that speaks of a `--flag`."""
    tree = ast.parse(source, filename)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and FLAG.search(node.value) and not _is_allowed(node, parents)):
            found.append((node.lineno, f"{node.lineno}: {node.value.strip()[:80]}"))
    return [word for _, word in sorted(found)]


def library_flag_words() -> dict[str, list[str]]:
    """Each library module that speaks of flags -> where."""
    found = {}
    for floor in LIBRARY:
        for path in sorted((REPO / floor).rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            words = [] if name == PROGRAM_EDGE else flag_words(path.read_text(encoding="utf-8"),
                                                                 str(path))
            if words:
                found[name] = words
    return found


class LibraryWordsTest(tf.test.TestCase):

    def test_no_library_message_names_a_flag(self):
        self.assertEqual(library_flag_words(), {})

    def test_the_rule_sees_messages_and_spares_docs_help_and_command_lines(self):
        source = '''
"""Run it as `tool --input_file=x`."""
import subprocess
from absl import flags

def check(value, problems, log, parser):
    """`value` from `--value`."""
    # a comment on --value
    flags.DEFINE_integer("shards", 1, "Shards --output_file names.")
    parser.add_argument("--shards", help="see --output_file")
    subprocess.run(["pip", "download", "--no-deps"])
    problems.append(f"--max_seq_length={value} is too small")
    log.warning("no --init_checkpoint given")
    if value < 0:
        raise ValueError(f"--value must be >= 0, got {value}")
    raise ValueError("value must be >= 0")
'''
        self.assertEqual([word.split(":")[0] for word in flag_words(source)], ["12", "13", "15"])


if __name__ == "__main__":
    tf.test.main()
