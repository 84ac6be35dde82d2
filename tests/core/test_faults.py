"""core.faults: a full disk, a file-size limit, Ctrl-C and SIGTERM end with one line and the exit
status a shell expects."""

import contextlib
import errno
import io
import os
import signal
import sys

import tensorflow as tf
from absl.testing import parameterized

from core import faults
from core.arguments import FieldFileNotFoundError


@contextlib.contextmanager
def ending(program="prog", **options):
    """Runs the block under `one_line_endings`; yields [stderr text, exit status] when done."""
    outcome = ["", None]
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            with faults.one_line_endings(program, **options):
                yield outcome
        except SystemExit as exit_:
            outcome[1] = exit_.code
    outcome[0] = stderr.getvalue()


class NoRoomErrorTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.named_parameters(
        ("disk_full", errno.ENOSPC, "no space left on the device"),
        ("quota", errno.EDQUOT, "the disk quota is used up"),
        ("file_size_limit", errno.EFBIG,
         r"the file would exceed this process' file-size limit \(ulimit -f\)"))
    def test_python_write_errors(self, code, told):
        error = OSError(code, os.strerror(code), "/out/x.tfrecord")
        self.assertIs(faults.no_room_error(error), error)
        self.assertRegex(faults.no_room_message(error), f"^cannot write /out/x.tfrecord: {told}$")

    def test_tensorflow_checkpoint_save_names_the_file_without_decorations(self):
        error = tf.errors.OutOfRangeError(
            None, None, "{{function_node __wrapped__SaveV2_dtypes_149_device_/job:localhost/"
            "replica:0/task:0/device:CPU:0}} /out/ckpt-4_temp/part-00000-of-00001.data-00000-of-"
            "00001.tempstate10648123286649775472; File too large [Op:SaveV2]")
        found = faults.no_room_error(error)
        self.assertEqual((found.errno, found.filename),
                         (errno.EFBIG, "/out/ckpt-4_temp/part-00000-of-00001.data-00000-of-00001"))

    def test_tensorflow_record_writer_on_a_full_disk(self):
        error = tf.errors.ResourceExhaustedError(
            None, None, "/out/.x.tfrecord.1-00ff00ff.partial/chunk-0; No space left on device")
        found = faults.no_room_error(error)
        self.assertEqual((found.errno, found.filename),
                         (errno.ENOSPC, "/out/.x.tfrecord.1-00ff00ff.partial/chunk-0"))

    def test_other_errors_are_not_taken_for_a_full_disk(self):
        for error in [tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor"),
                      tf.errors.OutOfRangeError(None, None, "End of sequence"),
                      OSError(errno.EACCES, "Permission denied", "/out"),
                      ValueError("No space left on device")]:
            self.assertIsNone(faults.no_room_error(error), error)


class OneLineEndingsTest(tf.test.TestCase):

    def setUp(self):
        """No resume point: a run earlier in this process (a runner test's, in-process) may
        have noted one."""
        super().setUp()
        faults.note_resume_point(None)

    def tearDown(self):
        faults.note_resume_point(None)
        super().tearDown()

    def test_a_full_disk_ends_with_one_line_and_exit_1(self):
        faults.note_resume_point("the newest checkpoint is /out/ckpt-4")
        with ending("run_pretraining.py") as outcome:
            raise tf.errors.ResourceExhaustedError(
                None, None, "/out/events.out; No space left on device")
        self.assertEqual(outcome[1], 1)
        self.assertEqual(outcome[0], "run_pretraining.py: error: cannot write /out/events.out: no "
                         "space left on the device; the newest checkpoint is /out/ckpt-4; make "
                         "room (or raise the limit), then rerun the same command to resume\n")

    def test_ctrl_c_ends_with_one_line_and_exit_130(self):
        faults.note_resume_point("the newest checkpoint is /out/ckpt-8")
        with ending() as outcome:
            raise KeyboardInterrupt()
        self.assertEqual(outcome, ["prog: interrupted (SIGINT); the newest checkpoint is "
                                   "/out/ckpt-8; rerun the same command to resume\n", 130])

    def test_sigterm_runs_the_clean_up_and_ends_with_exit_143(self):
        cleaned = []
        with ending() as outcome:
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                signal.sigtimedwait([], 0)  # gives the handler a chance to run, if it has not
            finally:
                cleaned.append(True)
        self.assertEqual(outcome, ["prog: interrupted (SIGTERM); rerun the same command to "
                                   "resume\n", 143])
        self.assertEqual(cleaned, [True])
        self.assertEqual(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)  # restored

    def test_a_signal_whose_exception_python_dropped_stops_the_next_step(self):
        """TensorFlow runs `__del__`s all the time; Python drops what one raises."""

        class SignalledWhileCollected:
            def __del__(self):
                os.kill(os.getpid(), signal.SIGTERM)
                signal.sigtimedwait([], 0)

        dropped, steps = [], []
        hook, sys.unraisablehook = sys.unraisablehook, dropped.append
        try:
            with ending() as outcome:
                SignalledWhileCollected()
                steps.append("after the dropped exception")
                faults.raise_pending_signal()
                steps.append("the next step")
        finally:
            sys.unraisablehook = hook
        self.assertIsInstance(dropped[0].exc_value, faults.Terminated)
        self.assertEqual(steps, ["after the dropped exception"])
        self.assertEqual(outcome, ["prog: interrupted (SIGTERM); rerun the same command to "
                                   "resume\n", 143])
        faults.raise_pending_signal()  # nothing pending once the run has ended

    def test_ctrl_c_is_handled_only_where_python_would_raise_it(self):
        with ending():
            self.assertNotEqual(signal.getsignal(signal.SIGINT), signal.default_int_handler)
        self.assertEqual(signal.getsignal(signal.SIGINT), signal.default_int_handler)
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            with ending():  # a background job's ignored Ctrl-C stays ignored
                self.assertEqual(signal.getsignal(signal.SIGINT), signal.SIG_IGN)
        finally:
            signal.signal(signal.SIGINT, previous)

    def test_a_file_size_limit_fails_the_write_instead_of_killing(self):
        with ending():
            self.assertEqual(signal.getsignal(signal.SIGXFSZ), signal.SIG_IGN)

    def test_user_errors_end_with_one_line_and_bugs_keep_their_traceback(self):
        with ending() as outcome:
            raise FileNotFoundError("--vocab_file=v.txt: no such file")
        self.assertEqual(outcome, ["prog: error: --vocab_file=v.txt: no such file\n", 1])
        with self.assertRaises(KeyError):
            with ending():
                raise KeyError("a bug")

    def test_a_line_break_a_value_brought_in_keeps_the_ending_one_line(self):
        with ending(flags={"vocab_file"}) as outcome:
            raise FieldFileNotFoundError("{vocab_file}={0}: no such file", "a\nb\r.txt")
        self.assertEqual(outcome, ["prog: error: --vocab_file=a\\nb\\r.txt: no such file\n", 1])

    def test_a_user_error_names_the_fields_that_are_the_programs_flags_as_flags(self):
        with ending(flags={"vocab_file"}) as outcome:
            raise FieldFileNotFoundError("{vocab_file}={0}: no such file (for {max_seq_length})",
                                         "v{1}.txt")
        self.assertEqual(outcome, ["prog: error: --vocab_file=v{1}.txt: no such file (for "
                                   "max_seq_length)\n", 1])

    def test_a_command_whose_rerun_starts_over_says_so(self):
        with ending(rerun="rerun the same command") as outcome:
            raise OSError(28, "No space left on device", "/out/x")
        self.assertEqual(outcome, ["prog: error: cannot write /out/x: no space left on the "
                                   "device; make room (or raise the limit), then rerun the same "
                                   "command\n", 1])


if __name__ == "__main__":
    tf.test.main()
