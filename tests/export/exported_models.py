"""What the export tests share: loaded SavedModels run without Grappler's graph rewrites.

A loaded SavedModel's functions are rewritten by Grappler the first time each
is called (constant folding, layout and arithmetic passes): seconds of CPU
per signature of a raw-text export, whose graphs hold the tokenizer, the
packing and the model. The rewrites keep what every op computes, and these
tests are about what the exports compute, not about how fast they run, so
a test class whose subject is not the rewritten graph turns them off for its
own duration (`without_graph_rewrites`) and restores the setting after.
"""

from __future__ import annotations

import tensorflow as tf

_OPTION = "disable_meta_optimizer"


def without_graph_rewrites(test_class: type) -> None:
    """Turns Grappler off until `test_class`'s tests are done (call from its setUpClass)."""
    previous = tf.config.optimizer.get_experimental_options().get(_OPTION, False)
    tf.config.optimizer.set_experimental_options({_OPTION: True})
    test_class.addClassCleanup(tf.config.optimizer.set_experimental_options,
                               {_OPTION: previous})
