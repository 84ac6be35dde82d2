"""The training benchmark's and profiler's own logic: data, FLOPs, checks, tables, op classes."""

import os
import sys
from pathlib import Path
from unittest import mock

import tensorflow as tf
from absl.testing import parameterized

from benchmarks import profile_training_step, training_speed
from tests.fixtures import TestCase


class TrainingSpeedTest(TestCase, parameterized.TestCase):

    def test_every_process_builds_the_same_batch(self):
        case = training_speed.CASES["pretrain_small"]
        first, second = training_speed.batch_arrays(case), training_speed.batch_arrays(case)
        self.assertEqual(first.keys(), second.keys())
        for key in first:
            self.assertAllEqual(first[key], second[key])
        positions = first["masked_lm_positions"]
        self.assertEqual(positions.shape, (32, 20))
        self.assertTrue((positions >= 1).all())
        self.assertTrue((positions < 128).all())
        self.assertTrue(all(len(set(row)) == 20 and list(row) == sorted(row) for row in positions))
        self.assertGreaterEqual(first["input_ids"].min(), 1)
        self.assertLess(first["input_ids"].max(), training_speed.VOCAB)
        labels = training_speed.batch_arrays(training_speed.CASES["finetune_minilm_64"])["label_ids"]
        self.assertEqual(labels.shape, (32,))
        self.assertLessEqual(set(labels), {0, 1})

    def test_step_flops_count_what_the_heads_read_three_times(self):
        case = dict(task="pretrain", layers=2, hidden=8, heads=2, intermediate=32, batch=3,
                    length=5, predictions=2)
        keys_values = 2 * 2 * 64  # per position, in every block
        rest = 2 * (2 * 64 + 2 * 8 * 32) + 4 * 5 * 8  # query, output, feed-forward, attention
        # The first block at all 5 positions; the last at [CLS] and 2 masked positions.
        encoder = 3 * (5 * (keys_values + rest) + 5 * keys_values + 3 * rest)
        heads = 3 * 2 * 2 * 8 * (8 + training_speed.VOCAB) + 3 * 4 * 8
        self.assertEqual(training_speed.step_flops(case), 3 * (encoder + 3 * 2 * 64 + heads))
        classify = dict(case, task="classify")
        encoder = 3 * (5 * (keys_values + rest) + 5 * keys_values + 1 * rest)
        self.assertEqual(training_speed.step_flops(classify),
                         3 * (encoder + 3 * 2 * 64 + 3 * 4 * 8))

    def test_every_timed_round_follows_one_untimed_step(self):
        calls = []

        def run(steps):
            calls.append(steps)
            return float(len(calls))

        answers = list(training_speed.timed_rounds(run, ["4\n", "3\n"]))
        self.assertEqual(calls, [1, 4, 1, 3])
        self.assertEqual([answer["loss"] for answer in answers],
                         [2.0, 4.0])  # the timed calls' losses
        self.assertTrue(all(answer["seconds"] >= 0 for answer in answers))

    def test_a_system_whose_loss_does_not_fall_is_refused(self):
        measured = {"pretrain_small": {"losses": {"ours": [11.0, 9.0], "peer": [10.0, 10.0],
                                                  "matmul": [5.0, 6.0]}}}
        with self.assertRaisesRegex(RuntimeError, "peer's loss did not fall"):
            training_speed.check_trained(measured)
        measured["pretrain_small"]["losses"]["peer"] = [10.0, 9.5]
        training_speed.check_trained(measured)

    def test_report_gives_rates_mfu_losses_and_ratios(self):
        case = training_speed.CASES["finetune_minilm_64"]
        matmul_seconds = 2 * training_speed.MATMUL_SIZE ** 3 / 100e9  # 100 GFLOP/s
        steps, batch = case["steps"], case["batch"]
        measured = {"finetune_minilm_64": {
            "seconds": {"ours": [steps * 0.5] * 3, "ours_flipped": [steps * 1.0] * 3,
                        "hf_torch": [steps * 2.0] * 3, "matmul": [matmul_seconds] * 3},
            "losses": {"ours": [0.7, 0.1], "ours_flipped": [0.7, 0.2], "hf_torch": [0.8, 0.3],
                       "matmul": [1.0, 1.0]},
            "xla": {"ours": False, "ours_flipped": True, "hf_torch": None, "matmul": None}}}
        text = training_speed.report(measured, ((1.0, 2.0, 3.0), (4.0, 5.0, 6.0)),
                                     "mixed_bfloat16")
        rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()
                if line.startswith("| ")}
        mfu = batch / 0.5 / batch * training_speed.step_flops(case) / 100e9
        self.assertIn(f"{batch / 0.5:.1f}", rows["ours (default: no XLA)"])
        self.assertIn(f"{mfu:.0%}", rows["ours (default: no XLA)"])
        self.assertIn("2.00x", rows["ours, --jit_compile"])
        self.assertIn("4.00x", rows["HF PyTorch"])  # the default's 64/s against 16/s
        self.assertIn("0.800 -> 0.300", rows["HF PyTorch"])
        self.assertIn("1.00, 2.00, 3.00", text)
        self.assertIn("mixed_bfloat16 matmul 100 GFLOP/s", text)

    def test_the_torch_worker_imports_this_checkout(self):
        """The torch environment does not install the project, yet its worker imports
        `benchmarks.harness`: the checkout goes on its PYTHONPATH."""
        log_dir = self.tmp_path()
        with mock.patch.dict(os.environ), \
                mock.patch.object(training_speed, "REF_PYTHON", Path(sys.executable)), \
                mock.patch("subprocess.Popen") as popen:
            os.environ.pop("PYTHONPATH", None)
            training_speed.Worker("hf_torch", "finetune_minilm_64", "float32", 1, log_dir).close()
        environment = popen.call_args.kwargs["env"]
        self.assertIn(str(training_speed.ROOT), environment["PYTHONPATH"].split(os.pathsep))
        self.assertEqual(environment["OMP_WAIT_POLICY"], "PASSIVE")

    @parameterized.parameters([
        ("bert_pretrainer_1/bert_1/layer_0_1/attention_1/MatMul", "_MklBatchMatMulV2", "attention"),
        ("bert_pretrainer_1/bert_1/layer_0_1/attention_1/Tensordot/MatMul", "_MklMatMul",
         "matmuls"),
        ("gradient_tape/bert_1/layer_0_1/intermediate_1/Tensordot/MatMul/MatMul", "_MklMatMul",
         "matmuls"),
        ("bert_1/layer_0_1/attention_1/Softmax", "_MklSoftmax", "softmax / LayerNorm"),
        ("bert_1/layer_0_1/output_LayerNorm_1/mul/Sum_1", "Sum", "softmax / LayerNorm"),
        ("bert_adam_w/AssignVariableOp_8", "AssignVariableOp", "optimizer update"),
        ("global_norm/L2Loss", "L2Loss", "optimizer update"),
        ("gradient_tape/bert_1/ArithmeticOptimizer/FoldTransposeIntoMatMul_MatMul", "_MklMatMul",
         "matmuls"),
        ("bert_1/embeddings_1/GatherV2", "GatherV2", "gathers"),
        ("CpuExecutable", "XLA", "XLA-compiled code"),
        ("bert_1/layer_0_1/intermediate_1/Gelu/Erfc", "Erfc", "everything else"),
    ])
    def test_op_classes(self, name, op_type, expected):
        self.assertEqual(profile_training_step.op_class(name, op_type), expected)

    def test_profile_sections_replace_their_own_label_only(self):
        tmp_path = self.tmp_path()
        path = tmp_path / "profile.md"
        profile_training_step.write_section("before", "## before\n\nold numbers\n", path)
        profile_training_step.write_section("after", "## after\n\nfirst try\n", path)
        profile_training_step.write_section("after", "## after\n\nsecond try\n", path)
        text = path.read_text()
        self.assertIn("old numbers", text)
        self.assertIn("second try", text)
        self.assertNotIn("first try", text)
        self.assertLess(text.index("## before"), text.index("## after"))

    @parameterized.parameters([
        ("MatMul.72", "matmuls"), ("dot.1", "matmuls"), ("multiply_add_fusion.52", "XLA fusions"),
        ("gather.3", "gathers"), ("bitcast_concatenate_fusion.4", "XLA fusions"),
        ("copy.9", "everything else")])
    def test_xla_instruction_classes(self, name, expected):
        self.assertEqual(profile_training_step.op_class(name, "HLO"), expected)


if __name__ == "__main__":
    tf.test.main()
