"""A package of an extra that is not installed is named with its `pip install` line, in one line."""

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

    @parameterized.parameters(
        ("experiments", "matplotlib", "matplotlib is not installed: "
                                      "pip install 'bert-tf2[experiments]'"),
        ("data_prep.beam_pretraining_data", "apache_beam", "apache_beam is not installed: "
                                                           "pip install 'bert-tf2[beam]'"),
    )
    @pytest.mark.slow  # starts a program, which imports TensorFlow
    def test_the_program_says_it_in_one_line(self, module, package, message):
        result = subprocess.run(
            [sys.executable, "-c", WITHOUT.format(package=package, module=module)],
            capture_output=True, text=True, cwd=REPO, timeout=120,
            env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"})
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertNotIn("Traceback", result.stderr)
        self.assertEqual(result.stderr.strip().splitlines()[-1], message)
        self.assertEqual(result.stdout, "")


if __name__ == "__main__":
    tf.test.main()
