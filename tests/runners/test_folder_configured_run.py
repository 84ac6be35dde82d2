"""run_classifier.py with only `--init_checkpoint=<Hugging Face folder>`: no config or
vocabulary flag, evaluation scores in TensorBoard, no TensorFlow C++ start-up lines."""

import os
import re
import subprocess
import sys

import pytest

from evaluation.results import read_eval_results
from tests.fixtures import REPO, TestCase, event_scalars, write_tiny_config
from tests.runners.test_run_classifier import BAD, GOOD

pytestmark = pytest.mark.slow


@pytest.mark.long
class FolderConfiguredRunTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        from network.checkpoints.writing import export_huggingface
        from network.config import BertConfig
        from modeling.pretrainer import BertPretrainer

        cls.root = cls.class_folder()
        data = cls.root / "SST-2"
        data.mkdir()
        rows = [(text, 1) for text in GOOD] + [(text, 0) for text in BAD]
        (data / "train.tsv").write_text("sentence\tlabel\n" + "".join(
            f"{text}\t{label}\n" for text, label in rows * 4))
        (data / "dev.tsv").write_text("sentence\tlabel\n" + "".join(
            f"{text}\t{label}\n" for text, label in rows))
        tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                  *sorted(set(" ".join(GOOD + BAD).split()))]
        config = BertConfig.from_json_file(write_tiny_config(cls.root / "bert_config.json",
                                                             vocab_size=len(tokens)))
        # Hugging Face's layout: config.json, vocab.txt, model.safetensors.
        cls.model = export_huggingface(BertPretrainer(config), cls.root / "hf", config)
        (cls.model / "vocab.txt").write_text("\n".join(tokens) + "\n")

    def test_folder_alone_configures_the_run_and_scores_reach_tensorboard(self):
        output = self.root / "out"
        environment = {key: value for key, value in os.environ.items()
                       if key != "TF_CPP_MIN_LOG_LEVEL"}
        command = [sys.executable, str(REPO / "run_classifier.py"), "--task_name=SST-2",
                   f"--data_dir={self.root / 'SST-2'}", f"--init_checkpoint={self.model}",
                   f"--output_dir={output}", "--do_train", "--do_eval", "--max_seq_length=16",
                   "--train_batch_size=8", "--num_train_epochs=2", "--learning_rate=2e-3",
                   "--noexport_saved_model"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=600,
                                env=environment)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertIn(f"From init_checkpoint={self.model}: "
                      f"bert_config_file={self.model / 'config.json'} "
                      f"vocab_file={self.model / 'vocab.txt'} do_lower_case=true",
                      result.stderr)
        self.assertIn("loaded 39 tensors", result.stderr)
        # TensorFlow's C++ start-up lines are hidden by default.
        self.assertNotRegex(result.stderr, r"\w+\.cc:\d+\]|absl::InitializeLog")

        results = read_eval_results(output / "eval_results.txt")
        evaluated = event_scalars(output / "logs" / "eval")
        trained = event_scalars(output / "logs" / "train")
        updates = 40 * 2 // 8
        [(step, accuracy)] = evaluated["eval_accuracy"]
        self.assertEqual(step, updates)
        self.assertAllClose(accuracy, results["eval_accuracy"])  # TensorBoard keeps float32
        self.assertEqual(trained["loss"][-1][0], updates)
        self.assertTrue(re.search(rf"step {updates}/{updates} ", result.stderr))
