"""What create_pretraining_data's fork server imports before it forks workers, and only there.

Every worker runs the per-chunk transform, which needs TensorFlow and
tensorflow-text, and the fork server's import of them is the longest wait
before the first chunk is processed.
Keras's optional scikit-learn and matplotlib integrations, which the
workers never use, are held back while it imports (`core.lean_start`).
Nothing else imports this module.
"""

from core.lean_start import held_back

with held_back():
    import data_prep.pretraining.transform  # noqa: F401  (TensorFlow, tensorflow-text)
