"""Test-wide settings: quiet TensorFlow, Keras on the TensorFlow backend.

The project itself is importable because `make test` installs it (`pip install -e .`).
"""

import os

import pytest

_FLAGS_MARKED = pytest.StashKey[bool]()

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def _is_tf_test(item) -> bool:
    cls = getattr(item, "cls", None)
    return cls is not None and any(base.__module__.startswith("tensorflow") for base in cls.__mro__)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """tf.test.TestCase reads absl flags (its temporary folders), which pytest never parses.

    They count as parsed for such a test only: library code must keep working
    with unparsed flags, and the tests of that run around these ones.
    """
    from absl import flags

    if _is_tf_test(item) and not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
        item.stash[_FLAGS_MARKED] = True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    if item.stash.get(_FLAGS_MARKED, False):
        from absl import flags

        flags.FLAGS.unparse_flags()


def pytest_collection_modifyitems(config, items):
    """tf.test.TestCase's test_session is a context manager, not a test; pytest would skip it once
    per class and count it."""
    kept = [item for item in items if not (
        item.name == "test_session" and "tensorflow" in getattr(
            getattr(getattr(item, "cls", None), "test_session", None), "__module__", ""))]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept
