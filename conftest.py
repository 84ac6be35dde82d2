"""Test-wide settings: quiet TensorFlow, Keras on the TensorFlow backend.

The project itself is importable because `make test` installs it (`pip install -e .`).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
