"""Test-wide settings: quiet TensorFlow, Keras on the TensorFlow backend.

The project itself is importable because `make test` installs it (`pip install -e .`).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def pytest_configure(config):
    """tf.test.TestCase reads absl flags (its temporary folders); pytest never parses them."""
    from absl import flags

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()


def pytest_collection_modifyitems(config, items):
    """tf.test.TestCase's test_session is a context manager, not a test; pytest would skip it once
    per class and count it."""
    kept = [item for item in items if not (
        item.name == "test_session" and "tensorflow" in getattr(
            getattr(getattr(item, "cls", None), "test_session", None), "__module__", ""))]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept
