"""A runner's `main` in this process, with what its spawned self would have printed.

For tests whose subject is what a run wrote, loaded or logged, not the
process itself (its exit status, signals, a fresh interpreter): a spawned
runner pays for a second TensorFlow import and start-up, several seconds of
CPU, that this spares.
"""

import contextlib
import dataclasses
import io
import logging
from typing import Mapping

from absl import logging as absl_logging

from tests.fixtures import run_main


@dataclasses.dataclass(frozen=True)
class RunOutput:
    stdout: str
    stderr: str  # absl's INFO lines and what the run printed to stderr, in order


def run_logged(script: str, arguments: Mapping[str, object]) -> RunOutput:
    """`run_main(script, arguments)`, its stdout, stderr and absl's INFO lines captured.

    absl's verbosity is INFO during the run, whatever an earlier in-process
    run left behind, and restored after it.
    """
    stdout, stderr = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(stderr)
    handler.setLevel(logging.INFO)
    verbosity = absl_logging.get_verbosity()
    absl_logging.set_verbosity(absl_logging.INFO)
    logging.getLogger().addHandler(handler)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            run_main(script, arguments)
    finally:
        logging.getLogger().removeHandler(handler)
        absl_logging.set_verbosity(verbosity)
    return RunOutput(stdout.getvalue(), stderr.getvalue())
