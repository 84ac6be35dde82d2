"""A package of an extra that is not installed is named with its `pip install` line, in one line."""

import importlib
import os
import subprocess
import sys
from unittest import mock

import pytest
import tensorflow as tf
from absl.testing import parameterized

from core import extras
from tests.fixtures import REPO

# Imports a program's module the way `python -m` does, with one package made uninstalled.
WITHOUT = ("import runpy, sys; sys.modules[{package!r}] = None; sys.argv[1:] = ['--help']; "
           "runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")


class NeededTest(parameterized.TestCase, tf.test.TestCase):

    def setUp(self):
        super().setUp()
        self.enter_context(mock.patch.object(sys, "excepthook", sys.excepthook))

    def test_a_missing_package_names_the_extra(self):
        with self.assertRaises(extras.MissingExtraError) as caught:
            with extras.needed("experiments"):
                import no_such_package_here.sub  # noqa: F401
        self.assertEqual(str(caught.exception), "no_such_package_here is not installed: "
                                                "pip install 'bert-tf2[experiments]'")
        self.assertIsInstance(caught.exception, ModuleNotFoundError)  # probes still catch it
        self.assertEqual(caught.exception.name, "no_such_package_here")

    def test_other_errors_pass_unchanged(self):
        hook = sys.excepthook
        with self.assertRaisesRegex(ValueError, "^inside$"):
            with extras.needed("beam"):
                raise ValueError("inside")
        self.assertIs(sys.excepthook, hook)

    def test_a_module_without_its_extra_names_it_on_import(self):
        """What the beam program's one line says, from its import in this process (the
        program itself: the long test below)."""
        with mock.patch.dict(sys.modules, {"apache_beam": None}):
            sys.modules.pop("data_prep.beam_pretraining_data", None)
            with self.assertRaises(extras.MissingExtraError) as caught:
                importlib.import_module("data_prep.beam_pretraining_data")
        self.assertEqual(str(caught.exception),
                         "apache_beam is not installed: pip install 'bert-tf2[beam]'")

    def _says_it_in_one_line(self, module: str, package: str, message: str) -> None:
        result = subprocess.run(
            [sys.executable, "-c", WITHOUT.format(package=package, module=module)],
            capture_output=True, text=True, cwd=REPO, timeout=120,
            env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"})
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertNotIn("Traceback", result.stderr)
        self.assertEqual(result.stderr.strip().splitlines()[-1], message)
        self.assertEqual(result.stdout, "")

    def test_the_program_says_it_in_one_line(self):
        self._says_it_in_one_line("experiments", "matplotlib", "matplotlib is not installed: "
                                  "pip install 'bert-tf2[experiments]'")

    @pytest.mark.long  # imports TensorFlow in a new process
    def test_the_beam_program_says_it_in_one_line(self):
        self._says_it_in_one_line("data_prep.beam_pretraining_data", "apache_beam",
                                  "apache_beam is not installed: pip install 'bert-tf2[beam]'")

if __name__ == "__main__":
    tf.test.main()
