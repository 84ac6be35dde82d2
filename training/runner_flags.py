"""Flags that every training runner shares, and the strategy they describe.

Defining them once keeps the names and defaults identical across
`run_pretraining.py`, `run_classifier.py`, `run_squad.py` and `run_ner.py`.
"""

from __future__ import annotations

from absl import flags

from training.distribution import PRECISIONS, STRATEGIES

FLAGS = flags.FLAGS


def define_distribution_flags() -> None:
    flags.DEFINE_enum("distribution_strategy", "one_device", list(STRATEGIES),
                      "tf.distribute strategy; multi_worker_mirrored reads TF_CONFIG.")
    flags.DEFINE_integer("num_gpus", 0, "GPUs for one_device / mirrored.")
    flags.DEFINE_string("tpu", None, "TPU name or grpc:// address (with "
                        "--distribution_strategy=tpu); unset on a TPU VM.")
    flags.DEFINE_integer("tpu_timeout_s", 120, "Give up connecting to the TPU after this long.")
    flags.DEFINE_integer("cpu_replicas", 0, "Split the CPU into this many logical devices, so "
                         "`mirrored` can be tried without GPUs (testing and debugging).")
    flags.DEFINE_enum("dtype", "float32", list(PRECISIONS), "Compute precision.")
    flags.DEFINE_bool("jit_compile", False, "Compile the training step with XLA.")


def strategy_from_flags():
    """The strategy and precision policy the flags ask for; call before any other TF work."""
    import tensorflow as tf

    from training import distribution

    if FLAGS.cpu_replicas:
        if FLAGS.cpu_replicas < 1:
            raise ValueError(f"--cpu_replicas must be positive, got {FLAGS.cpu_replicas}")
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * FLAGS.cpu_replicas)
    strategy = distribution.get_strategy(FLAGS.distribution_strategy, FLAGS.num_gpus, FLAGS.tpu,
                                         FLAGS.tpu_timeout_s)
    distribution.set_precision(FLAGS.dtype)
    return strategy


def weights_checksum(model) -> float:
    """Sum of |w| over all weights: equal on every worker of a run in lockstep."""
    return float(sum(abs(variable.numpy()).sum() for variable in model.weights))
