"""Hypothesis strategies for a command's flags, drawn from the flags' own declarations.

Each flag a command defines has a parser that says its type (integer,
float, boolean, enum, list, string), its default and, for numbers, the
bounds it was declared with; `flag_arguments` turns those into command-line
words: values of the right type around the default and the bounds, values
of the wrong type, and the hostile ones (NaN, infinities, negatives, zero,
huge numbers, empty and very long strings, odd Unicode). A flag a runner
declares tomorrow is drawn the same way, with no change here.

Only what a command line can hold is drawn: no NUL byte, and text that is
not UTF-8 arrives as Python decodes `argv` (surrogate escapes). No word
names a place outside the current folder (an absolute path, `..`), so a
test running in a scratch folder keeps every write inside it.
"""

from __future__ import annotations

import os
from typing import Sequence

from absl import flags
from hypothesis import strategies as st

# Words a shell can pass, that a careless or creative user does.
ODD_WORDS = ["", " ", "-", "--", "none", "None", "null", "true", "nan", "inf", "-inf",
             "1e400", "0x10", "1_000", "\u0661\u0662", "\u00bd", "e\u0301", "\u200b",
             "\ufeffbom", "\U0001F600", "\u202eevil", "a\tb", "a\nb", "x" * 5000,
             os.fsdecode(b"caf\xe9"), "%s%n", "{0}", "{output_dir}", "~", ".", "a/../b"]
# Never a path outside the folder the test runs in: no absolute path, no climbing out of it.
ODD_TEXT = st.one_of(st.sampled_from(ODD_WORDS),
                     st.text(st.characters(blacklist_characters="\x00",
                                           blacklist_categories=("Cs",)), max_size=30)
                     .filter(lambda text: not text.startswith(("/", "..")) and "/.." not in text))
HUGE_INTEGERS = [2**31, 2**63, -2**63 - 1, 10**30]
HOSTILE_FLOATS = ["nan", "-nan", "inf", "-inf", "1e308", "1e-320", "-0.0", "0", "-1",
                  "1e400", "0.1e1"]


def _integer_words(parser: flags.IntegerParser, default) -> st.SearchStrategy[str]:
    low = parser.lower_bound if parser.lower_bound is not None else -3
    high = parser.upper_bound if parser.upper_bound is not None else max(
        8, 2 * (default or 0))
    anchors = {0, 1, -1, low, low - 1, high, high + 1, *HUGE_INTEGERS}
    if default is not None:
        anchors |= {default, default - 1, default + 1}
    typed = st.one_of(st.integers(min_value=low - 1, max_value=high + 1),
                      st.sampled_from(sorted(anchors))).map(str)
    return st.one_of(typed, typed, typed, st.sampled_from(["1.5", "2e3", " 3 ", "+4", "--5"]),
                     ODD_TEXT)


def _float_words(default) -> st.SearchStrategy[str]:
    scale = abs(default) if default else 1.0
    typed = st.one_of(st.floats(min_value=-2 * scale, max_value=4 * scale).map(repr),
                      st.floats(allow_nan=True, allow_infinity=True).map(repr),
                      st.sampled_from(HOSTILE_FLOATS))
    return st.one_of(typed, typed, typed, ODD_TEXT)


def _list_words(items: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(st.lists(items.filter(lambda item: "," not in item), max_size=4)
                     .map(",".join), st.sampled_from([",", ",,", " , ", "a,,b"] + [
                         ",".join(["1e-5"] * 300)]))


def flag_words(flag: flags.Flag, paths: Sequence[str] = ()) -> st.SearchStrategy[list[str]]:
    """The command-line words setting `flag`, drawn from its declaration.

    Args:
      flag: the absl flag (its parser gives the type, bounds and choices).
      paths: places the test prepared (existing files and folders, missing
        ones, a file's child): any string flag may be given one.

    Returns:
      A strategy of word lists: `["--name=value"]`, or a boolean's bare
      `--name` / `--noname`, or the value as the next word.
    """
    name, parser = flag.name, flag.parser
    if isinstance(parser, flags.BooleanParser):
        return st.one_of(st.sampled_from([[f"--{name}"], [f"--no{name}"]]),
                         st.sampled_from([[f"--{name}"], [f"--no{name}"]]),
                         st.sampled_from(["true", "false", "0", "1", "yes", "maybe", ""])
                         .map(lambda value: [f"--{name}={value}"]),
                         st.just([f"--{name}", "false"]))  # a value it does not take
    if isinstance(parser, flags.EnumParser):
        choices = list(parser.enum_values)
        values = st.one_of(st.sampled_from(choices), st.sampled_from(choices),
                           st.sampled_from(choices).map(str.upper), ODD_TEXT)
    elif isinstance(parser, flags.IntegerParser):
        values = _integer_words(parser, flag.default)
    elif isinstance(parser, flags.FloatParser):
        values = _float_words(flag.default)
    elif isinstance(parser, flags.ListParser):
        values = _list_words(st.one_of(_float_words(1e-4), ODD_TEXT))
    else:
        values = st.one_of(ODD_TEXT, st.sampled_from(list(paths) or ["missing"]))
    return st.one_of(values.map(lambda value: [f"--{name}={value}"]),
                     values.filter(lambda value: not value.startswith("-"))
                     .map(lambda value: [f"--{name}", value]))


def flag_arguments(values: flags.FlagValues, paths: Sequence[str] = (),
                   max_flags: int = 4) -> st.SearchStrategy[list[str]]:
    """Command-line words for up to `max_flags` of the flags defined in `values`, plus now and
    then a word that is no flag of the command (a misspelt name, a stray positional word)."""
    names = sorted(values)
    one_flag = st.sampled_from(names).flatmap(lambda name: flag_words(values[name], paths))
    stray = st.sampled_from([["--no_such_flag=1"], ["--learning_rat=1e-4"], ["extra"],
                             ["--"], ["-"]])
    return st.lists(st.one_of(*[one_flag] * 6, stray), max_size=max_flags).map(
        lambda groups: [word for group in groups for word in group])
