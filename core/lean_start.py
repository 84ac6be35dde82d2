"""TensorFlow imported without Keras's optional scikit-learn and matplotlib integrations.

`import tensorflow` loads Keras, and Keras imports scikit-learn (and with it
scipy) for its scikit-learn wrappers, and matplotlib for its image
galleries, whenever they are installed: about 1.5 s of the 5 s a process
spends importing TensorFlow on a 2-core machine. The processes this project
starts for itself (the runners, pre-training data's workers) never use
those integrations, so they hold both packages back while TensorFlow is
imported. Keras then treats them as not installed, and they are released
afterwards: a later `import sklearn` (the GLUE metrics) or `import
matplotlib` (the plots) works as usual, and is paid only by the run that
needs it. A library user's `import modeling` is left alone.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence

HELD_BACK = ("sklearn", "matplotlib")


@contextlib.contextmanager
def held_back(names: Sequence[str] = HELD_BACK) -> Iterator[None]:
    """Inside the block, `import name` raises ImportError for each of `names` not yet imported.

    Python's own convention: a module whose `sys.modules` entry is None is
    not importable. Each entry this block added is removed when it ends.

    Examples:
      >>> with held_back(["sklearn"]):
      ...     import tensorflow
    """
    added = [name for name in names if name not in sys.modules]
    for name in added:
        sys.modules[name] = None
    try:
        yield
    finally:
        for name in added:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
