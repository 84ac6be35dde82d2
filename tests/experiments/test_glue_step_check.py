"""experiments.glue_step_check's arguments (the comparison itself needs the MiniLM and torch)."""

import argparse
import contextlib
import io

from experiments.glue_step_check import _tasks, main
from tests.fixtures import TestCase


class GlueStepCheckArgumentsTest(TestCase):

    def test_tasks_are_two_class_glue_tasks_by_their_glue_names(self):
        self.assertEqual(_tasks("mrpc, rte,sst2"), ["MRPC", "RTE", "SST-2"])
        for text, message in (("STS-B", "expected two-class GLUE tasks, got 'STS-B'"),
                              ("MNLI", "expected two-class"), ("", "expected two-class"),
                              ("xnli", "unknown task 'xnli'")):
            with self.assertRaisesRegex(argparse.ArgumentTypeError, message):
                _tasks(text)

    def test_a_missing_task_folder_is_one_line_naming_the_layout(self):
        stderr = io.StringIO()
        with self.assertRaises(SystemExit) as ending, contextlib.redirect_stderr(stderr):
            main([f"--glue_dir={self.tmp_path()}", "--tasks=RTE"])
        self.assertEqual(ending.exception.code, 1)
        self.assertRegex(stderr.getvalue(), r"^python -m experiments.glue_step_check: error: "
                                            r".*RTE/train\.tsv: no such file; expected the GLUE "
                                            r"layout for RTE")
