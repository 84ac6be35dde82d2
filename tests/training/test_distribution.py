"""training.distribution: strategies from flags, the TPU timeout, precision policies.

Logical CPU devices and a hanging TPU connection must not touch the test
process' own TensorFlow runtime, so those cases run in subprocesses.
"""

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import types

import keras
import pytest
import tensorflow as tf
from absl.testing import parameterized

from tests.fixtures import REPO
from training.distribution import (
    XLA_CPU_MAX_HIDDEN_SIZE,
    default_jit_compile,
    get_strategy,
    set_precision,
    tpu_address,
)

pytestmark = pytest.mark.slow



def run_python(code: str, timeout: float) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter at the repository root, killed after `timeout`."""
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=REPO)
    env.pop("TF_CONFIG", None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _one_device(device: str):
    """A strategy stand-in on one device, for the devices this machine may lack."""
    return types.SimpleNamespace(num_replicas_in_sync=1,
                                 extended=types.SimpleNamespace(worker_devices=(device,)))


class DistributionTest(tf.test.TestCase, parameterized.TestCase):

    def test_one_device_uses_the_cpu_without_gpus(self):
        strategy = get_strategy("one_device")
        self.assertIsInstance(strategy, tf.distribute.OneDeviceStrategy)
        self.assertEqual(strategy.num_replicas_in_sync, 1)
        self.assertTrue(strategy.extended.worker_devices[0].endswith("CPU:0"))

    def test_unknown_strategy_lists_the_choices(self):
        with self.assertRaisesRegex(ValueError, "one_device, mirrored, multi_worker_mirrored, tpu"):
            get_strategy("horovod")

    def test_more_gpus_than_present_is_an_error(self):
        visible = len(tf.config.list_physical_devices("GPU"))
        with self.assertRaisesRegex(ValueError, f"num_gpus={visible + 1}"):
            get_strategy("mirrored", num_gpus=visible + 1)

    @pytest.mark.long
    def test_mirrored_and_single_worker_over_logical_cpus(self):
        result = run_python("""
        import json, os
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        from training.distribution import default_jit_compile, get_strategy
        # Collective ops are configured once, before TensorFlow runs any op.
        os.environ["TF_CONFIG"] = json.dumps(
            {"cluster": {"worker": ["127.0.0.1:0"]}, "task": {"type": "worker", "index": 0}})
        worker = get_strategy("multi_worker_mirrored")
        mirrored = get_strategy("mirrored")
        total = mirrored.reduce("SUM", mirrored.run(
            lambda: tf.distribute.get_replica_context().replica_id_in_sync_group + 1), None)
        print(json.dumps({"replicas": mirrored.num_replicas_in_sync, "total": int(total),
                          "devices": list(mirrored.extended.worker_devices),
                          "worker": isinstance(worker, tf.distribute.MultiWorkerMirroredStrategy),
                          "task": worker.cluster_resolver.task_type,
                          "xla": default_jit_compile(mirrored, "float32", 128)}))
        """, timeout=120)
        self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
        report = json.loads(result.stdout.strip().splitlines()[-1])
        self.assertEqual(report["replicas"], 2)
        self.assertEqual(report["total"], 3)
        self.assertEqual([device[-5:] for device in report["devices"]], ["CPU:0", "CPU:1"])
        self.assertTrue(report["worker"])
        self.assertEqual(report["task"], "worker")
        self.assertFalse(report["xla"])  # replicas all-reduce inside the step: only by the flag

    def test_xla_by_default_where_it_was_measured_to_be_faster(self):
        cpu = get_strategy("one_device")
        self.assertTrue(default_jit_compile(cpu, "float32", 256))
        self.assertTrue(default_jit_compile(cpu, "float32", XLA_CPU_MAX_HIDDEN_SIZE))
        self.assertTrue(default_jit_compile(cpu, "float32", 768))  # BERT-Base
        self.assertFalse(default_jit_compile(cpu, "float32", 1024))  # not measured
        self.assertFalse(default_jit_compile(cpu, "mixed_bfloat16",
                                             256))  # oneDNN's bfloat16 is faster
        # The Python API's default strategy (no `tf.distribute` scope) has no device list.
        on_gpu = bool(tf.config.list_logical_devices("GPU"))
        self.assertTrue(default_jit_compile(tf.distribute.get_strategy(), "float32", 256))
        self.assertEqual(default_jit_compile(tf.distribute.get_strategy(), "float32", 1024), on_gpu)
        gpu = _one_device("/job:localhost/replica:0/task:0/device:GPU:0")
        self.assertTrue(default_jit_compile(gpu, "float32", 768))
        self.assertTrue(default_jit_compile(gpu, "mixed_float16", 1024))

    @parameterized.parameters("grpc://", "")
    @pytest.mark.long
    def test_a_tpu_address_that_never_answers_times_out_with_a_clear_error(self, scheme):
        # A port that accepts TCP connections (the kernel completes them) but never speaks gRPC.
        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(8)
            port = silent.getsockname()[1]
            result = run_python(f"""
            import time
            from training.distribution import default_jit_compile, get_strategy
            start = time.monotonic()
            try:
                get_strategy("tpu", tpu="{scheme}127.0.0.1:{port}", tpu_timeout_s=3)
            except TimeoutError as error:
                print(f"{{time.monotonic() - start:.1f}} {{error}}")
            """, timeout=90)
        self.assertEqual(result.returncode, 0, msg=result.stderr[-3000:])
        seconds, message = result.stdout.strip().splitlines()[-1].split(" ", 1)
        self.assertTrue(message.startswith(f"no TPU answered at grpc://127.0.0.1:{port} within "
                                           "3 s (tpu_timeout_s=3)"), message)
        self.assertTrue(2.5 < float(seconds) < 20)

    @parameterized.parameters([
        ("127.0.0.1:8470", "grpc://127.0.0.1:8470"), ("tpu-host.internal:8470",
                                                      "grpc://tpu-host.internal:8470"),
        ("[::1]:8470", "grpc://[::1]:8470"), ("grpc://10.0.0.2:8470", "grpc://10.0.0.2:8470"),
        ("my-tpu", "my-tpu"), ("local", "local"), (None, None)])
    def test_host_and_port_is_a_grpc_address_not_a_tpu_name(self, tpu, address):
        self.assertEqual(tpu_address(tpu), address)

    def test_set_precision_policies(self):
        try:
            policy = set_precision("mixed_bfloat16")
            self.assertEqual((policy.compute_dtype, policy.variable_dtype), ("bfloat16", "float32"))
            self.assertEqual(keras.layers.Dense(2).dtype_policy.compute_dtype, "bfloat16")
            self.assertEqual(set_precision("mixed_float16").compute_dtype, "float16")
            with self.assertRaisesRegex(ValueError, "float32, mixed_float16, mixed_bfloat16"):
                set_precision("float16")
        finally:
            set_precision("float32")
        self.assertEqual(keras.mixed_precision.dtype_policy().name, "float32")


class UnreachableTpuTest(tf.test.TestCase):
    """A closed port or an unknown host fails at once, naming the address and the timeout."""

    def test_a_closed_port_fails_within_the_timeout(self):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        start = time.monotonic()
        with self.assertRaisesRegex(ConnectionError,
                                    rf"could not reach a TPU at grpc://127\.0\.0\.1:{port} "
                                    r"within 2 s \(tpu_timeout_s=2\): Connection refused"
                                    r"; check tpu and") as raised:
            get_strategy("tpu", tpu=f"127.0.0.1:{port}", tpu_timeout_s=2)
        self.assertLess(time.monotonic() - start, 2.0)
        self.assertRegex(raised.exception.render({"tpu", "tpu_timeout_s"}),
                         r"\(--tpu_timeout_s=2\): Connection refused; check --tpu and")

    def test_an_unknown_host_fails_within_the_timeout(self):
        start = time.monotonic()
        with self.assertRaisesRegex(ConnectionError, r"grpc://tpu\.invalid:8470 within 2 s "
                                                     r"\(tpu_timeout_s=2\)"):
            get_strategy("tpu", tpu="tpu.invalid:8470", tpu_timeout_s=2)
        self.assertLess(time.monotonic() - start, 2.0)


if __name__ == "__main__":
    tf.test.main()
