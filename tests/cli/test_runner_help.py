"""Each runner's `--help` lists the flags a first run needs, its own and the shared ones.

absl's `--help` shows the main module's key flags; the shared flags are
defined in `cli.runner_flags`, so each runner adopts them. The help is read
in-process from a fresh `FlagValues`, as absl builds it for `--help`.
"""

import importlib
import os
import subprocess
import sys

import pytest
import tensorflow as tf
from absl import flags
from absl.testing import parameterized

from cli import quiet_start
from tests.fixtures import REPO

FINE_TUNING = ["output_dir", "init_checkpoint", "bert_config_file", "vocab_file", "do_lower_case",
               "do_train", "do_eval", "do_predict", "learning_rate", "num_train_epochs",
               "train_batch_size", "max_seq_length", "tf_cpp_log"]


class RunnerHelpTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.named_parameters(
        ("run_pretraining", "run_pretraining",
         ["input_file", "output_dir", "init_checkpoint", "bert_config_file", "do_train",
          "do_eval", "num_train_steps", "num_warmup_steps", "learning_rate", "objective",
          "distribution_strategy", "tf_cpp_log"]),
        ("run_classifier", "run_classifier",
         ["task_name", "data_dir", "learning_rates", *FINE_TUNING]),
        ("run_squad", "run_squad", ["train_file", "predict_file", "doc_stride", *FINE_TUNING]),
        ("run_ner", "run_ner", ["data_dir", "mode", *FINE_TUNING]),
        ("extract_features", "extract_features",
         ["input_file", "output_file", "layers", "init_checkpoint", "vocab_file",
          "bert_config_file", "do_lower_case", "tf_cpp_log"]),
        ("create_pretraining_data", "data_prep.create_pretraining_data",
         ["input_file", "output_file", "vocab_file", "do_lower_case", "max_seq_length",
          "dupe_factor"]))
    def test_help_lists_the_essential_flags(self, module_name, essential):
        module = importlib.import_module(module_name)
        values = flags.FlagValues()
        module.define_flags(values)
        shown = values.module_help(module.__name__)
        listed = {name for name in values if f"--{name}:" in shown or f"]{name}:" in shown}
        self.assertEmpty(set(essential) - listed, shown)
        # What --helpfull adds is absl's own machinery, not the runner's.
        self.assertNotIn("--flagfile", shown)


class TfCppLogFlagTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters(
        ([], False), (["--tf_cpp_log"], True), (["-tf_cpp_log"], True),
        (["--tf_cpp_log=true"], True), (["--tf_cpp_log=0"], False),
        (["--tf_cpp_log", "--notf_cpp_log"], False), (["--notf_cpp_log", "--tf_cpp_log"], True),
        (["--", "--tf_cpp_log"], False), (["--tf_cpp_logs"], False))
    def test_read_from_the_command_line_as_absl_does(self, arguments, wanted):
        self.assertEqual(quiet_start.asked_for(["runner.py", *arguments]), wanted)
        values = flags.FlagValues()
        flags.DEFINE_bool(quiet_start.FLAG, False, "", flag_values=values)
        flags.DEFINE_bool("tf_cpp_logs", False, "", flag_values=values)
        values(["runner.py", *arguments])
        self.assertEqual(values.tf_cpp_log, wanted)

    @pytest.mark.slow
    def test_flag_brings_back_the_cpp_start_up_lines_and_the_start_stays_lean(self):
        # The quiet default is checked on a real run in tests/runners/test_folder_configured_run.
        # The start imports none of the packages a runner uses only to score or plot
        # (core.lean_start); they would be a quarter of it.
        environment = {key: value for key, value in os.environ.items()
                       if key != "TF_CPP_MIN_LOG_LEVEL"}
        script = str(REPO / "run_classifier.py")
        driver = ("import runpy, sys\n"
                  f"sys.argv = [{script!r}, '--tf_cpp_log', '--help']\n"
                  "try:\n"
                  f"    runpy.run_path({script!r}, run_name='__main__')\n"
                  "finally:\n"
                  "    print('imported:', sorted(name for name in LEAN if name in sys.modules))\n"
                  ).replace("LEAN", repr(("sklearn", "matplotlib", "seqeval", "tensorflow")))
        result = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True,
                                timeout=300, env=environment, cwd=REPO)
        self.assertIn("--init_checkpoint", result.stdout, result.stderr[-3000:])  # absl exits 1
        self.assertRegex(result.stderr, r"\w+\.cc:\d+\]")
        self.assertIn("imported: ['tensorflow']", result.stdout)
