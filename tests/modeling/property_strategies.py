"""Hypothesis strategies for the library's entry points, drawn from their own declarations.

A constructor's or method's keyword arguments are drawn from its signature:
each parameter's type hint says what a plausible value looks like (an int,
a float, a flag, a list of names), its default is always among the draws,
and where the product declares the choices of a string setting (`long_texts`,
`pooling`, `objective`) they are drawn too. Every parameter also draws the
hostile values of issue #49: NaN, infinities, negatives, zero, huge numbers,
wrong types, empty and very long strings, odd Unicode; and a call sometimes
carries a misspelled keyword. A parameter added to a signature is covered
the day it is declared.

`ContractTestCase` holds the property every call is judged by: it succeeds
with a well-formed result, or it raises the library's own refusal (a
ValueError, TypeError or, for files, OSError) whose message names an
argument it was given, never a TensorFlow graph error or a Python internals
error (KeyError, IndexError, AttributeError, ZeroDivisionError).
"""

from __future__ import annotations

import hashlib
import inspect
import math
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf
from hypothesis import event, settings
from hypothesis import strategies as st

from modeling.feature_tagger import FEATURE_LAYERS
from modeling.pretrainer import OBJECTIVES
from modeling.text_embedder import POOLING_MODES
from network.config import ACTIVATIONS
from tests.fixtures import TestCase
from text.text_windows import TRUNCATE, WINDOWS

# The choices the product declares for its string settings, by parameter name.
CHOICES: dict[str, tuple] = {"long_texts": (TRUNCATE, WINDOWS), "pooling": POOLING_MODES,
                             "objective": OBJECTIVES, "hidden_act": ACTIVATIONS,
                             "feature_layers": FEATURE_LAYERS}
HOSTILE_NUMBERS = st.sampled_from([math.nan, math.inf, -math.inf, -1, -1e-9, 0, 0.0, 1e308,
                                   2**63, -2**63, True, False, "1", None, [1], 1.5,
                                   np.float32(math.nan), np.int64(3)])
ODD_STRINGS = ["", " ", "\u200b", "\U0001F600" * 50, "e\u0301", "\ufeffbom", "a\x00b",
               "x" * 5000, "\u0627\u0644\u0641\u064a\u0644\u0645", "\ud7ff\ue000",
               "\u3000", "[CLS]", "[SEP] [PAD]", "##s", "\r\n\t", "A" * 300 + " b"]
ODD_TEXT = st.one_of(st.text(max_size=40), st.sampled_from(ODD_STRINGS))
# Wrong kinds for any argument: containers, callables, bytes, arrays.
WRONG_TYPES = st.sampled_from([{}, {"a": 1}, (), [], [[]], b"bytes", object(), print,
                               np.zeros((2, 2)), np.array(["a"]), float, -0.0])
HOSTILE = st.one_of(HOSTILE_NUMBERS, st.sampled_from(ODD_STRINGS), WRONG_TYPES)
COUNTS = st.one_of(st.integers(min_value=-3, max_value=6), HOSTILE_NUMBERS)
RATES = st.one_of(st.floats(min_value=-1.0, max_value=2.0), HOSTILE_NUMBERS)
CLASS_LABELS = st.one_of(st.integers(min_value=-2, max_value=3), st.sampled_from(
    ["neg", "pos", "maybe", "", True, None, 1.0, math.nan]))
MISSPELLED = ("num_lables", "sequence_lenght", "batchsize", "\u00e9poques", "")


def for_hint(hint, name: str) -> st.SearchStrategy:
    """Plausible values of a type hint: its union's members, None, containers of them."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(for_hint(member, name) for member in typing.get_args(hint)))
    if hint is type(None):
        return st.none()
    if name in CHOICES and hint is str:
        return st.one_of(st.sampled_from(CHOICES[name]), ODD_TEXT)
    if origin in (list, tuple, Sequence, typing.Sequence) or hint in (list, tuple):
        (item,) = typing.get_args(hint)[:1] or (typing.Any,)
        return st.lists(for_hint(item, name), max_size=4)
    simple = {bool: st.booleans(), int: st.integers(min_value=-3, max_value=70),
              float: st.floats(min_value=-1.0, max_value=2.0, allow_nan=False), str: ODD_TEXT}
    return simple.get(hint, HOSTILE)


def keyword_arguments(function: Callable, skip: Iterable[str] = (), **given: st.SearchStrategy
                      ) -> st.SearchStrategy[dict]:
    """Each keyword parameter of `function` present or not, drawn from its hint and default.

    Args:
      function: the callable whose signature declares the parameters.
      skip: parameters left out (those a test passes itself).
      **given: strategies replacing the hint's for some parameters.
    """
    hints = typing.get_type_hints(function)
    required, optional = {}, {}
    for name, parameter in inspect.signature(function).parameters.items():
        if name in ("self", "cls") or name in skip or parameter.kind in (
                parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        drawn = st.one_of(given.get(name, for_hint(hints.get(name, typing.Any), name)), HOSTILE)
        if parameter.default is parameter.empty:  # always given: Python names a missing one
            required[name] = drawn
        else:
            optional[name] = st.one_of(st.just(parameter.default), drawn)
    optional.update({name: value for name, value in given.items()
                     if name not in optional and name not in required})
    return st.builds(_with_misspelling, st.fixed_dictionaries(required, optional=optional),
                     st.one_of(st.none(), st.sampled_from(MISSPELLED)))


def _with_misspelling(arguments: dict, misspelled: str | None) -> dict:
    return arguments if misspelled is None else {**arguments, misspelled: 1}


# `make test`'s profile (conftest.py): the same few examples every run.
QUICK_PROFILE = "default"


def budget(most: int | None = None, quick: int | None = None) -> settings:
    """Fewer examples for a property whose calls train, trace or export a model.

    Args:
      most: at most this many in any profile (the long one's many included).
      quick: at most this many in `make test`'s profile, whose draws are the
        same every run; its `@example`s run beside them. Other profiles keep
        their own count (or `most`).
    """
    count = settings.default.max_examples
    if most is not None:
        count = min(count, most)
    if quick is not None and settings.get_current_profile_name() == QUICK_PROFILE:
        count = min(count, quick)
    return settings(max_examples=count)


def folder_digest(folder: Path) -> dict[str, str]:
    """Every file under `folder` and the sha256 of its bytes: what a call must not change."""
    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(Path(folder).rglob("*")) if path.is_file()}


def names_of(arguments: dict) -> list[str]:
    """What a refusal may name: the arguments' names, and the paths and words given."""
    given = [str(value) for value in arguments.values()
             if isinstance(value, (str, Path)) and str(value).strip()]
    return [*arguments, *map(repr, arguments), *given, *(repr(text)[1:-1] for text in given)]


_INTERNALS = (KeyError, IndexError, AttributeError, ZeroDivisionError, UnicodeError,
              RecursionError, tf.errors.OpError)


class ContractTestCase(TestCase):
    """A test case that judges each call by the library's error contract."""

    def assert_refused(self, error: BaseException, named: Sequence[str]) -> None:
        """`error` is the library's refusal: a ValueError, TypeError or OSError (a file or
        folder), no graph or internals error, whose message names one of `named`."""
        event(f"refused: {type(error).__name__}")
        self.assertIsInstance(error, (ValueError, TypeError, OSError), repr(error))
        self.assertNotIsInstance(error, _INTERNALS, repr(error))
        message = str(error)
        self.assertTrue(any(name and name in message for name in named),
                        f"{message!r} names none of {list(named)[:12]}")

    def assert_finite(self, values, shape: tuple | None = None) -> None:
        """A well-formed numeric result: of `shape` (where given), every value finite."""
        event("succeeded")
        values = np.asarray(values)
        if shape is not None:
            self.assertEqual(values.shape, shape)
        self.assertTrue(np.isfinite(values).all(), values)
