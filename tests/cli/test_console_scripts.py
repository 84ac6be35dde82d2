"""Every console command the package installs names a function that exists and runs the script.

A wrong entry point only shows after `pip install .`, as an ImportError at
the user's first call; reading pyproject.toml here catches it in the suite.
"""

import importlib
import sys
import tomllib
from unittest import mock
from pathlib import Path

import tensorflow as tf
from absl import flags

from core import program

REPO = Path(__file__).resolve().parents[2]


def console_scripts() -> dict[str, str]:
    with open(REPO / "pyproject.toml", "rb") as reader:
        return tomllib.load(reader)["project"]["scripts"]


class ConsoleScriptsTest(tf.test.TestCase):

    def test_each_command_names_a_callable_that_defines_flags_and_runs(self):
        scripts = console_scripts()
        self.assertContainsSubset({"bert-run-pretraining", "bert-run-classifier",
                                   "bert-run-squad", "bert-run-ner", "bert-extract-features",
                                   "bert-create-pretraining-data", "bert-export-model"},
                                  set(scripts))
        for command, target in scripts.items():
            module_name, _, function = target.partition(":")
            module = importlib.import_module(module_name)
            self.assertTrue(callable(getattr(module, function, None)), f"{command} -> {target}")
            self.assertTrue(callable(getattr(module, "define_flags", None)), module_name)

    def test_an_installed_commands_help_lists_the_runners_flags(self):
        import run_classifier

        values = flags.FlagValues()
        run_classifier.define_flags(values)
        with mock.patch.object(sys, "argv", ["/env/bin/bert-run-classifier"]):
            self.assertNotIn("--output_dir", values.main_module_help())
            program.list_key_flags_under_program(run_classifier.__name__, values)
            help_text = values.main_module_help()
        for flag in ("output_dir", "init_checkpoint", "do_train", "learning_rate", "task_name"):
            self.assertRegex(help_text, rf"--(\[no\])?{flag}:")

    def test_installed_modules_include_every_script(self):
        with open(REPO / "pyproject.toml", "rb") as reader:
            setuptools = tomllib.load(reader)["tool"]["setuptools"]
        for target in console_scripts().values():
            module_name = target.partition(":")[0]
            top = module_name.split(".")[0]
            self.assertTrue(top in setuptools["py-modules"] or (REPO / top).is_dir(), target)


if __name__ == "__main__":
    tf.test.main()
