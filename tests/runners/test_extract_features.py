"""extract_features.py: layer selection, bad inputs, and output equal to the reference."""

import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from tests.fixtures import REPO, TestCase, run_main
from tests.runners.shared_runs import run_logged

pytestmark = [pytest.mark.slow, pytest.mark.assets]
GOLDEN = os.path.join(REPO, "tests", "golden")


def _arguments(tmp_path, lines, **flags) -> dict:
    from data_prep.corpora.assets import minilm_dir

    folder = minilm_dir()
    input_file = tmp_path / "input.txt"
    if isinstance(lines, bytes):
        input_file.write_bytes(lines)
    else:
        input_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    arguments = {"input_file": input_file, "output_file": tmp_path / "out" / "features.jsonl",
                 "vocab_file": folder / "vocab.txt", "bert_config_file": folder / "config.json",
                 "init_checkpoint": folder, "max_seq_length": 24, "layers": "-1,-4",
                 "batch_size": 3}
    arguments.update(flags)
    return arguments


class ExtractFeaturesTest(TestCase, parameterized.TestCase):

    def test_features_equal_pytorch_reference(self):
        with open(os.path.join(GOLDEN, "minilm_reference.json"), encoding="utf-8") as reader:
            texts = json.load(reader)
        golden = np.load(os.path.join(GOLDEN, "minilm_reference.npz"))
        lines = [a if b is None else f"{a} ||| {b}"
                 for a, b in zip(texts["text_a"], texts["text_b"])]
        arguments = _arguments(self.tmp_path(), lines)
        log = run_logged("extract_features.py", arguments).stderr  # in this process
        output = arguments["output_file"]
        records = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
        self.assertEqual([record["linex_index"] for record in records], list(range(len(lines))))
        recorded = list(golden["hidden_state_layers"])
        for row, record in enumerate(records):
            length = int(golden["input_mask"][row].sum())
            self.assertLen(record["features"], length)
            self.assertEqual(record["features"][0]["token"], "[CLS]")
            self.assertEqual(record["features"][-1]["token"], "[SEP]")
            for position, feature in enumerate(record["features"]):
                by_index = {layer["index"]: layer["values"] for layer in feature["layers"]}
                # -1 is the last of 6 blocks, -4 the third (hidden state 3 after the embeddings).
                for index, hidden_state in ((-1, 6), (-4, 3)):
                    expected = golden["hidden_states"][recorded.index(hidden_state)][row,
                                                                                     position]
                    self.assertAllClose(by_index[index], expected, atol=1e-4, rtol=1e-7)
        self.assertIn("loaded 103 tensors", log)
        self.assertEmpty([name for name in os.listdir(output.parent) if name.startswith(".")])

    @parameterized.parameters(
        ("bad_utf8", "input.txt:2: not valid UTF-8"),
        ("missing_vocab", "no such file"),
        ("bad_layers", "out of range"),
        ("bad_config", "num_attention_heads"),
    )
    def test_bad_inputs_fail_cleanly(self, case, message):
        tmp_path = self.tmp_path()
        lines, flags = ["fine line", "also fine"], {}
        if case == "bad_utf8":
            lines = b"fine line\ncaf\xe9 latin-1\n"
        elif case == "missing_vocab":
            flags["vocab_file"] = tmp_path / "nowhere.txt"
        elif case == "bad_layers":
            flags["layers"] = "-9"
        elif case == "bad_config":
            config = tmp_path / "config.json"
            config.write_text(json.dumps({"vocab_size": 30522, "hidden_size": 384,
                                          "num_hidden_layers": 6, "num_attention_heads": 7,
                                          "intermediate_size": 1536}))
            flags["bert_config_file"] = config
        arguments = _arguments(tmp_path, lines, **flags)
        with self.assertRaisesRegex((ValueError, OSError), re.escape(message)):
            run_main("extract_features.py", arguments)
        output = arguments["output_file"]
        self.assertTrue(not output.parent.exists() or not os.listdir(output.parent))

    def test_checkpoint_of_another_size_is_refused(self):
        tmp_path = self.tmp_path()
        config = tmp_path / "config.json"
        config.write_text(json.dumps({"vocab_size": 30522, "hidden_size": 256,
                                      "num_hidden_layers": 6, "num_attention_heads": 4,
                                      "intermediate_size": 1024}))
        arguments = _arguments(tmp_path, ["a line"], bert_config_file=config)
        with self.assertRaisesRegex(ValueError, re.escape(
                "has shape [30522, 384], the model expects [30522, 256]")):
            run_main("extract_features.py", arguments)
        self.assertFalse(arguments["output_file"].exists())


if __name__ == "__main__":
    tf.test.main()
