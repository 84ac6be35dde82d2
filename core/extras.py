"""Packages of an optional feature: a missing one is named with the `pip install` line that adds it.

`pip install bert-tf2` installs what the models and runners need; the paper's
ablation grids, the Apache Beam pipeline and the benchmarks need more, listed
as extras in pyproject.toml. A module of such a feature imports those
packages inside `needed(extra)`:

    with extras.needed("experiments"):
        from matplotlib.figure import Figure

so a user without them reads, as one line instead of a traceback,

    matplotlib is not installed: pip install 'bert-tf2[experiments]'

The import statements stay ordinary ones, which tools and the dependency
test (tests/test_dependencies.py) read. The error is a ModuleNotFoundError,
so code that probes for a package still catches it; only when nothing does
is it printed as that one line (exit status 1).
"""

from __future__ import annotations

import contextlib
import sys
from types import TracebackType
from typing import Iterator

DISTRIBUTION = "bert-tf2"  # the name pip installs this project under (pyproject's project.name)


class MissingExtraError(ModuleNotFoundError):
    """A package of an optional feature is not installed; says which extra brings it."""


@contextlib.contextmanager
def needed(extra: str) -> Iterator[None]:
    """Turns a failed import of a third-party package into MissingExtraError naming `extra`.

    Args:
      extra: the pyproject.toml extra (`[project.optional-dependencies]`) that
        installs the packages imported inside the block.
    """
    try:
        yield
    except ModuleNotFoundError as error:
        if isinstance(error, MissingExtraError) or not error.name:
            raise
        package = error.name.split(".")[0]
        _print_uncaught_as_one_line()
        raise MissingExtraError(f"{package} is not installed: pip install "
                                f"'{DISTRIBUTION}[{extra}]'", name=error.name) from error


def _print_uncaught_as_one_line() -> None:
    """Makes the interpreter print an uncaught MissingExtraError as its message alone.

    Installed only when such an error is raised, and it leaves every other
    exception to the hook it found.
    """
    previous = sys.excepthook
    if getattr(previous, "_prints_missing_extras", False):
        return

    def hook(kind: type[BaseException], error: BaseException,
             traceback: TracebackType | None) -> None:
        if isinstance(error, MissingExtraError):
            print(error, file=sys.stderr)
        else:
            previous(kind, error, traceback)

    hook._prints_missing_extras = True  # type: ignore[attr-defined]
    sys.excepthook = hook
