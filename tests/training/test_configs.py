"""training.configs: a refused setting is a FieldError naming its field, bare from Python and
`--field` where a command line renders it."""

import math

import tensorflow as tf
from absl.testing import parameterized

from core.arguments import FieldError
from tests.fixtures import TestCase
from training.configs import (DistributionConfig, OptimizationConfig, TrainingConfig,
                              check_batch_split, check_weights_to_evaluate)


class ConfigRefusalsTest(TestCase, parameterized.TestCase):

    @parameterized.parameters(
        (OptimizationConfig, {"learning_rate": 0},
         "learning_rate must be a positive finite number, got 0"),
        (OptimizationConfig, {"learning_rate": math.nan},
         "learning_rate must be a positive finite number, got nan"),
        (OptimizationConfig, {"optimizer": "sgd"},
         "optimizer must be one of adamw, lamb, got 'sgd'"),
        (OptimizationConfig, {"gradient_accumulation_steps": 0},
         "gradient_accumulation_steps must be a positive integer, got 0"),
        (OptimizationConfig, {"num_train_steps": 2.5},
         "num_train_steps must be a positive integer, got 2.5"),
        (OptimizationConfig, {"num_warmup_steps": -1},
         "num_warmup_steps must be an integer >= 0, got -1"),
        (OptimizationConfig, {"num_train_epochs": 0.0},
         "num_train_epochs must be a positive finite number, got 0.0"),
        (OptimizationConfig, {"warmup_proportion": 1.5},
         "warmup_proportion must be a finite number in [0, 1], got 1.5"),
        (TrainingConfig, {"output_dir": "out", "max_seq_length": 127.5},
         "max_seq_length must be a positive integer, got 127.5"),
        (TrainingConfig, {"output_dir": "out", "train_batch_size": True},
         "train_batch_size must be a positive integer, got True"),
        (TrainingConfig, {"output_dir": "out", "dtype": "float64"},
         "dtype must be one of float32, mixed_float16, mixed_bfloat16, got 'float64'"),
        (TrainingConfig, {"output_dir": "out", "random_seed": -1},
         "random_seed must be an integer >= 0, got -1"),
        (TrainingConfig, {"output_dir": "out", "random_seed": 2**32},
         "random_seed must be at most 2**32 - 1, got 4294967296"),
        (DistributionConfig, {"num_gpus": -1}, "num_gpus must be an integer >= 0, got -1"),
        (DistributionConfig, {"distribution_strategy": "horovod"},
         "distribution_strategy must be one of"),
    )
    def test_a_refused_value_names_its_field(self, config_class, settings, message):
        with self.assertRaises(FieldError) as raised:
            config_class(**settings)
        self.assertStartsWith(str(raised.exception), message)
        field = raised.exception.fields[0]
        self.assertIn(field, settings)
        self.assertStartsWith(raised.exception.render({field}), f"--{message}")

    def test_micro_batches_that_do_not_split_the_batch_are_refused(self):
        with self.assertRaises(FieldError) as raised:
            check_batch_split(TrainingConfig("out", train_batch_size=32),
                              OptimizationConfig(gradient_accumulation_steps=3))
        self.assertEqual(raised.exception.render({"train_batch_size",
                                                  "gradient_accumulation_steps"}),
                         "--train_batch_size=32 is not divisible by "
                         "--gradient_accumulation_steps=3")

    def test_a_schedule_without_a_length_names_both_fields(self):
        optimization = OptimizationConfig(num_train_epochs=None)
        with self.assertRaises(FieldError) as raised:
            optimization.schedule(None, 8)
        self.assertEqual(str(raised.exception), "neither num_train_steps nor num_train_epochs "
                                                "says how long to train")
        self.assertEqual(raised.exception.render({"num_train_steps", "num_train_epochs"}),
                         "neither --num_train_steps nor --num_train_epochs says how long to train")

    def test_scoring_random_weights_is_refused_naming_the_fields(self):
        folder = self.tmp_path()
        with self.assertRaises(FieldError) as raised:
            check_weights_to_evaluate(("do_eval", "do_predict"), False, None)
        self.assertEqual(str(raised.exception), "do_eval and do_predict without do_train would "
                                                "evaluate random weights; pass init_checkpoint "
                                                "or do_train")
        with self.assertRaises(FieldError) as raised:
            check_weights_to_evaluate(("do_eval",), False, None, str(folder))
        self.assertEqual(raised.exception.render({"do_eval", "do_train", "output_dir",
                                                  "init_checkpoint"}),
                         f"--do_eval without --do_train would evaluate random weights: "
                         f"--output_dir={folder} holds no checkpoint; pass --init_checkpoint "
                         "or --do_train")
        check_weights_to_evaluate(("do_eval",), False, "model.ckpt")
        check_weights_to_evaluate(("do_eval",), True, None)


if __name__ == "__main__":
    tf.test.main()
