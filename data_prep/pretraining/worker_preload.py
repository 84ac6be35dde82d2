"""What create_pretraining_data's fork server imports before it forks workers, and only there.

Every worker runs the per-chunk transform, which needs TensorFlow and
tensorflow-text, and the fork server's import of them is the longest wait
before the first chunk is processed.
`import tensorflow` also loads Keras, which imports scikit-learn for its
scikit-learn wrappers (about 0.9 s of that wait). The workers never use
those wrappers, so scikit-learn is held back while the fork server imports
(Keras treats it as not installed), then released, so that a later
`import sklearn` would work as usual. Nothing else imports this module.
"""

import sys

sys.modules["sklearn"] = None  # `import sklearn` raises ImportError while this is set
try:
    import data_prep.pretraining.transform  # noqa: F401  (TensorFlow, tensorflow-text)
finally:
    del sys.modules["sklearn"]
