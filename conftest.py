"""Test-wide settings: quiet TensorFlow, Keras on the TensorFlow backend, one XLA cache.

The project itself is importable because `make test` installs it (`pip install -e .`).
"""

import atexit
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings

_FLAGS_MARKED = pytest.StashKey[bool]()
XLA_CACHE_FLAG = "--tf_xla_persistent_cache_directory"

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def _share_xla_compilations() -> None:
    """Every process of this test run reuses the XLA programs another has compiled.

    The runner tests start dozens of processes that compile the same tiny
    models' steps; TensorFlow's persistent cache (checked against the whole
    program, written by atomic rename) spares each a second compilation.
    The process that makes the folder (pytest itself, before its workers
    start and inherit it) removes it at exit; one the user set is kept.
    """
    flags = os.environ.get("TF_XLA_FLAGS", "")
    if XLA_CACHE_FLAG in flags:
        return
    folder = tempfile.mkdtemp(prefix="xla_cache_")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ["TF_XLA_FLAGS"] = f"{flags} {XLA_CACHE_FLAG}={folder}".strip()


_share_xla_compilations()

# Property tests (Hypothesis): `make test` draws the same few examples every run; the long
# profile (`pytest --hypothesis-profile=long`) draws many fresh ones, beside the benchmarks.
_PROPERTY_SETTINGS = {"deadline": None, "database": None,
                      "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("default", derandomize=True, max_examples=12, **_PROPERTY_SETTINGS)
settings.register_profile("long", max_examples=400, **_PROPERTY_SETTINGS)
settings.load_profile("default")


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
    items[:] = slow_scopes_first(items)


def _scope(item) -> str:
    """What pytest-xdist's `--dist loadscope` sends to one worker: a class, else a module."""
    return item.nodeid.rsplit("::", 1)[0]


def slow_scopes_first(items: list) -> list:
    """The classes (or modules) holding a test marked slow first, each kept whole, in order.

    `make test` hands whole classes to its workers (`--dist loadscope`), so a
    `setUpClass` runs once; the long ones go first and the many quick ones
    fill the end, so that both workers finish together rather than one
    waiting on a runner test handed out last.
    """
    slow = {_scope(item) for item in items if item.get_closest_marker("slow")}
    return sorted(items, key=lambda item: _scope(item) not in slow)
