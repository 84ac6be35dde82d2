"""Finding an interpreter with PyTorch and transformers, for tests that compare against them.

The suite's own environment has no torch. A test that loads an export with
transformers runs it in another interpreter: `BERT_REFERENCE_PYTHON` if set,
else the repository's `.venv-ref` (`make real-check` builds it), else this
one if it has both; otherwise it is skipped, saying so.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures import REPO

_CHECK = "import torch, transformers"


def reference_python() -> str | None:
    """The interpreter to run PyTorch references with, or None when there is none."""
    candidates = [os.environ.get("BERT_REFERENCE_PYTHON"),
                  str(REPO / ".venv-ref" / "bin" / "python"), sys.executable]
    for candidate in candidates:
        if candidate and Path(candidate).exists() and subprocess.run(
                [candidate, "-c", _CHECK], capture_output=True).returncode == 0:
            return candidate
    return None


NO_REFERENCE = ("no interpreter with torch and transformers: set BERT_REFERENCE_PYTHON, or "
                "build .venv-ref (make real-check)")


def run_reference(python: str, script: str, *arguments: str) -> object:
    """Runs `script` under `python` (offline, PyTorch threads passive); returns its JSON output."""
    result = subprocess.run([python, "-c", script, *arguments], capture_output=True, text=True,
                            timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1",
                                              "OMP_WAIT_POLICY": "PASSIVE"})
    if result.returncode:
        raise AssertionError(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def minilm_or_skip(test_case) -> Path:
    """The real MiniLM's folder (fetched into the cache on first use), or the test skipped."""
    from data_prep.corpora.assets import minilm_dir

    try:
        return minilm_dir()
    except RuntimeError as error:
        test_case.skipTest(f"the real MiniLM is not in the cache and cannot be fetched: {error}")
