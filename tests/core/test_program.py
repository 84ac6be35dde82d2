"""core.program: every command ends a user error in one line, naming its own flags as `--flag`.

The commands run in this process through the same edge their `__main__`
uses, with their flags defined in absl's global registry for the call and
removed after it, as `python -m ...` would define them once.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import subprocess
import sys
import types
from pathlib import Path
from unittest import mock

import tensorflow as tf
from absl import flags
from absl.testing import parameterized

from core import faults, program
from core.arguments import FieldError
from tests.fixtures import REPO


class ProgramTest(tf.test.TestCase, parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp_path = Path(self.create_tempdir().full_path)
        self.enter_context(mock.patch.object(program, "keep_freed_heap_pages", lambda: True))
        self.addCleanup(faults.note_resume_point, None)

    def run_command(self, define_flags, main, module_name: str, arguments: list[str],
                    **options) -> tuple[str, int | None]:
        """(stderr, exit status) of the command run with `arguments`; its flags removed after."""
        defined_before = set(flags.FLAGS)
        self.addCleanup(lambda: [delattr(flags.FLAGS, name) for name in
                                 set(flags.FLAGS) - defined_before])
        stderr = io.StringIO()
        with (mock.patch.object(sys, "argv", ["prog", *arguments]),
              contextlib.redirect_stderr(stderr), self.assertRaises(SystemExit) as exit_):
            program.run_command(define_flags, main, module_name, **options)
        return stderr.getvalue(), exit_.exception.code

    def test_a_field_error_names_the_programs_flags_as_flags_and_other_fields_bare(self):
        def define_flags():
            flags.DEFINE_integer("program_test_shards", 1, "Shards.")

        def main(argv):
            raise FieldError("{program_test_shards}={0} must be at least 1 (see {vocab_size})",
                             flags.FLAGS.program_test_shards)

        stderr, status = self.run_command(define_flags, main, __name__,
                                          ["--program_test_shards=0"])
        self.assertEqual((stderr, status), ("prog: error: --program_test_shards=0 must be at "
                                            "least 1 (see vocab_size)\n", 1))

    def test_a_command_says_what_its_rerun_does(self):
        def main(argv):
            raise KeyboardInterrupt()

        stderr, status = self.run_command(lambda: None, main, __name__, [],
                                          rerun="rerun the same command")
        self.assertEqual((stderr, status),
                         ("prog: interrupted (SIGINT); rerun the same command\n", 130))
        stderr, status = self.run_command(lambda: None, main, __name__, [])
        self.assertEqual(stderr, "prog: interrupted (SIGINT); rerun the same command to resume\n")

    def test_the_program_is_named_as_the_user_started_it(self):
        with mock.patch.object(sys, "argv", ["/env/bin/bert-run-squad"]):
            self.assertEqual(program.program_name("run_squad"), "bert-run-squad")
            started_with_m = types.SimpleNamespace(
                __spec__=types.SimpleNamespace(name="data_prep.vocab"))
            with mock.patch.dict(sys.modules, {"__main__": started_with_m}):
                self.assertEqual(program.program_name("__main__"), "python -m data_prep.vocab")
            as_script = types.SimpleNamespace(__spec__=None)
            with mock.patch.dict(sys.modules, {"__main__": as_script}):
                self.assertEqual(program.program_name("__main__"), "bert-run-squad")

    @parameterized.named_parameters(
        ("create_pretraining_data", "data_prep.create_pretraining_data",
         ["--input_file=a.txt", "--output_file=out.tfrecord", "--vocab_file=vocab.txt",
          "--max_seq_length=3"],
         "--max_seq_length=3 must be at least 5 ([CLS], two one-token segments, two [SEP]); "
         "--max_predictions_per_seq=20 must lie in [0, --max_seq_length=3]"),
        ("beam_pretraining_data", "data_prep.beam_pretraining_data",
         ["--input_file=a.txt", "--output_file=a,b", "--vocab_file=vocab.txt"],
         "--output_file must name one prefix on Beam (use --num_output_shards)"),
        ("vocab", "data_prep.vocab", ["--input_file= , ", "--output_file=vocab.txt"],
         "--input_file is empty: give comma-separated globs of corpus files"),
        ("builtin_corpus", "data_prep.corpora.builtin_corpus", ["news"],
         "unexpected arguments: news: every value goes in a flag (--name=value; a boolean "
         "flag as --name or --noname)"),
        ("squad_metric", "evaluation.squad", ["{data}", "{predictions}", "--na-prob-file=p.json",
                                             "--version=1.1"],
         "--na_prob_file applies to SQuAD 2.0 only"),
    )
    def test_each_data_and_evaluation_command_ends_a_user_error_in_one_line(
            self, module_name, arguments, message):
        data, predictions = self.tmp_path / "data.json", self.tmp_path / "predictions.json"
        data.write_text(json.dumps({"data": []}))
        predictions.write_text("{}")
        module = importlib.import_module(module_name)
        arguments = [argument.format(data=data, predictions=predictions) for argument in arguments]
        stderr, status = self.run_command(module.define_flags, module.main, module_name,
                                          arguments)
        self.assertEqual((stderr, status), (f"prog: error: {message}\n", 1))

    def test_a_module_run_with_dash_m_names_itself_and_its_flags(self):
        result = subprocess.run([sys.executable, "-m", "data_prep.vocab", "--input_file=,",
                                 "--output_file=vocab.txt"], cwd=self.tmp_path,
                                env={"PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"},
                                capture_output=True, text=True, timeout=120)
        self.assertEqual((result.returncode, result.stderr.splitlines()[-1:]),
                         (1, ["python -m data_prep.vocab: error: --input_file is empty: give "
                              "comma-separated globs of corpus files"]), result.stderr[-3000:])


if __name__ == "__main__":
    tf.test.main()
