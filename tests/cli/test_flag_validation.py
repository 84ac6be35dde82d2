"""Flag values that would give a wrong result with exit 0 are refused before any work starts.

The checks run in-process on a fresh `FlagValues`, into which
`run_pretraining`'s flags and the fine-tuning runners' shared flags are
defined (absl's global registry cannot hold two runners' flags at once).
The runners' own checks are reached through their `main`, in-process too.
"""

import os
import re

import tensorflow as tf
from absl import flags
from absl.testing import parameterized

from cli import runner_flags
from core.arguments import FieldError
from tests.fixtures import TestCase, run_main


def _pretraining_flags(tmp_path, *arguments: str) -> flags.FlagValues:
    import run_pretraining

    values = flags.FlagValues()
    run_pretraining.define_flags(values)
    values(["run_pretraining.py", "--input_file=records", "--bert_config_file=config.json",
            f"--output_dir={tmp_path}", *arguments])
    return values


def _check_pretraining(tmp_path, *arguments: str) -> None:
    """The runner's checks before it reads a file: its flags as configs, then the task's own."""
    import run_pretraining
    from tasks import pretraining

    values = _pretraining_flags(tmp_path, *arguments)
    task = runner_flags.task_from_flags(values, pretraining.PretrainingTask)
    model_files, training, *_ = runner_flags.training_configs(values, run_pretraining.REQUIRED)
    pretraining.check(task, model_files, training)


def _shown(refused: Exception, values: flags.FlagValues) -> str:
    """The refusal as the command line shows it: each field that is a flag written `--field`."""
    return refused.render(values) if isinstance(refused, FieldError) else str(refused)


def _finetuning_flags(*arguments: str) -> flags.FlagValues:
    values = flags.FlagValues()
    runner_flags.define_finetuning_flags(values)
    values(["run_classifier.py", "--bert_config_file=config.json", "--vocab_file=vocab.txt",
            "--output_dir=out", *arguments])
    return values


PRETRAINING_REFUSALS = [
    (["--do_train", "--learning_rate=0"],
     "--learning_rate must be a positive finite number, got 0.0"),
    (["--do_train", "--learning_rate=-1e-4"], "--learning_rate must be a positive finite number"),
    (["--do_train", "--learning_rate=nan"],
     "--learning_rate must be a positive finite number, got nan"),
    (["--do_train", "--num_warmup_steps=-1"], "--num_warmup_steps must be an integer >= 0"),
    (["--do_train", "--keep_checkpoint_max=0"],
     "--keep_checkpoint_max must be a positive integer"),
    (["--do_train", "--log_every=0"], "--log_every must be a positive integer"),
    (["--do_train", "--tpu_timeout_s=0"], "--tpu_timeout_s must be a positive integer"),
    (["--do_train", "--num_gpus=-1"], "--num_gpus must be an integer >= 0"),
    (["--do_train", "--train_batch_size=32", "--gradient_accumulation_steps=3"],
     "--train_batch_size=32 is not divisible by --gradient_accumulation_steps=3"),
]

FINETUNING_REFUSALS = [
    (["--do_train", "--learning_rate=0"],
     "--learning_rate must be a positive finite number, got 0.0"),
    (["--do_eval", "--learning_rate=-5e-05"], "--learning_rate must be a positive finite number"),
    (["--do_train", "--num_train_epochs=0"],
     "--num_train_epochs must be a positive finite number, got 0.0"),
    (["--do_train", "--train_batch_size=32", "--gradient_accumulation_steps=5"],
     "--train_batch_size=32 is not divisible by --gradient_accumulation_steps=5"),
    (["--do_train", "--gradient_accumulation_steps=0"],
     "--gradient_accumulation_steps must be a positive integer"),
    (["--do_train", "--warmup_proportion=-0.1"],
     r"--warmup_proportion must be a finite number in \[0, 1\]"),
    (["--do_eval", "--eval_batch_size=0"], "--eval_batch_size must be a positive integer"),
    (["--do_train", "--save_checkpoints_steps=0"],
     "--save_checkpoints_steps must be a positive integer"),
    (["--do_predict", "--cpu_replicas=-2"], "--cpu_replicas must be an integer >= 0"),
    (["--do_train", "--init_checkpoint=ckpt", "--transfer_layers=-1"],
     "--transfer_layers must be 0 or more, got -1"),
    (["--do_train", "--transfer_layers=1"], "--transfer_layers needs --init_checkpoint"),
]

RUNNER_REFUSALS = [
    ("run_classifier.py", {"task_name": "sst-2", "learning_rates": "5e-5,-5e-5", "do_train": True},
     "--learning_rates: every rate must be a positive finite number, got -5e-05"),
    ("run_ner.py", {"learning_rates": "1e-3,3e-3", "do_train": True, "do_predict": True},
     "--learning_rates and --num_restarts ask for 2 runs and the best is chosen on dev: pass "
     "--do_eval too"),
    ("run_ner.py", {"learning_rate": 0, "do_train": True},
     "--learning_rate must be a positive finite number, got 0.0"),
    ("run_ner.py", {"mode": "feature_based", "init_checkpoint": "ckpt", "do_train": True,
                    "num_train_epochs": 1.5},
     "--mode=feature_based trains whole epochs; got --num_train_epochs=1.5"),
]


class FlagValidationTest(TestCase, parameterized.TestCase):

    @parameterized.parameters(*PRETRAINING_REFUSALS)
    def test_pretraining_refuses_out_of_range_flags(self, arguments, message):
        tmp_path = self.tmp_path()
        with self.assertRaises(ValueError) as refused:
            _check_pretraining(tmp_path, *arguments)
        self.assertRegex(_shown(refused.exception, _pretraining_flags(tmp_path)),
                         message.replace("+", r"\+"))

    def test_pretraining_eval_alone_needs_weights_to_evaluate(self):
        tmp_path = self.tmp_path()
        with self.assertRaises(ValueError) as refused:
            _check_pretraining(tmp_path, "--do_eval")
        self.assertRegex(_shown(refused.exception, _pretraining_flags(tmp_path)),
                         f"--output_dir={tmp_path} holds no checkpoint; "
                         "pass --init_checkpoint or --do_train")
        _check_pretraining(tmp_path, "--do_eval", "--init_checkpoint=phase1")
        _check_pretraining(tmp_path, "--do_eval", "--do_train")
        (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-3"\n')
        (tmp_path / "ckpt-3.index").write_bytes(b"")
        _check_pretraining(tmp_path, "--do_eval")  # resumes from the run in --output_dir

    def test_pretraining_accepts_the_defaults_and_zero_warmup(self):
        _check_pretraining(self.tmp_path(), "--do_train", "--num_warmup_steps=0",
                           "--gradient_accumulation_steps=4")

    @parameterized.parameters(*FINETUNING_REFUSALS)
    def test_finetuning_refuses_out_of_range_flags(self, arguments, message):
        values = _finetuning_flags(*arguments)
        with self.assertRaises(ValueError) as refused:
            runner_flags.training_configs(values)
        self.assertRegex(_shown(refused.exception, values), message)

    def test_finetuning_epochs_only_matter_when_training(self):
        runner_flags.training_configs(_finetuning_flags("--do_eval", "--num_train_epochs=0",
                                                        "--init_checkpoint=model.ckpt"))
        runner_flags.training_configs(_finetuning_flags("--do_train", "--train_batch_size=32",
                                                        "--gradient_accumulation_steps=4"))

    @parameterized.parameters(
        (["--do_eval"], "--do_eval"),
        (["--do_predict"], "--do_predict"),
        (["--do_eval", "--do_predict"], "--do_eval and --do_predict"),
    )
    def test_finetuning_eval_alone_needs_weights_to_evaluate(self, arguments, refused):
        values = _finetuning_flags(*arguments)
        with self.assertRaises(ValueError) as error:
            runner_flags.training_configs(values)
        self.assertRegex(_shown(error.exception, values),
                         f"^{refused} without --do_train would evaluate random weights; pass "
                         "--init_checkpoint or --do_train")
        runner_flags.training_configs(_finetuning_flags(*arguments, "--init_checkpoint=model.ckpt"))
        runner_flags.training_configs(_finetuning_flags(*arguments, "--do_train"))

    def test_learning_rate_lists_are_checked_element_by_element(self):
        from tasks.driver import FineTuningSettings

        values = _finetuning_flags("--learning_rates=5e-5, 3e-5", "--num_restarts=2")
        settings = runner_flags.task_from_flags(values, FineTuningSettings)
        self.assertEqual((settings.learning_rates, settings.num_restarts), ((5e-5, 3e-5), 2))
        with self.assertRaisesRegex(flags.IllegalFlagValueError,
                                    "--learning_rates=5e-5,fast: 'fast' is not a number"):
            _finetuning_flags("--learning_rates=5e-5,fast")
        for rates, refused in (("5e-5,-5e-5", "-5e-05"), ("inf", "inf"), ("nan", "nan")):
            with self.assertRaisesRegex(ValueError, "^learning_rates: every rate must be a "
                                                    f"positive finite number, got {refused}$"):
                runner_flags.task_from_flags(_finetuning_flags(f"--learning_rates={rates}"),
                                             FineTuningSettings)

    def test_output_dir_that_cannot_be_created_names_the_flag(self):
        tmp_path = self.tmp_path()
        (tmp_path / "file").write_text("not a folder")
        with self.assertRaisesRegex(OSError,
                                    f"--output_dir={tmp_path}/file/out: cannot write there"):
            runner_flags.check_output_dir(str(tmp_path / "file" / "out"))
        runner_flags.check_output_dir(str(tmp_path / "new" / "out"))
        self.assertEqual(os.listdir(tmp_path / "new" / "out"), [])  # the probe file is gone

    def test_read_only_output_dir_names_the_flag(self):
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            self.skipTest("root may write into a read-only folder")
        folder = self.tmp_path() / "read_only"
        folder.mkdir(mode=0o555)
        with self.assertRaisesRegex(OSError, f"--output_dir={folder}: cannot write there"):
            runner_flags.check_output_dir(str(folder))

    @parameterized.parameters(*RUNNER_REFUSALS)
    def test_runners_check_before_reading_anything(self, script, arguments, message):
        tmp_path = self.tmp_path()
        with self.assertRaisesRegex(ValueError, re.escape(message)):
            run_main(script, {"data_dir": tmp_path / "missing",
                              "bert_config_file": tmp_path / "missing.json",
                              "vocab_file": tmp_path / "vocab", "output_dir": tmp_path / "out",
                              **arguments})
        self.assertFalse(os.path.exists(tmp_path / "out"))


if __name__ == "__main__":
    tf.test.main()
