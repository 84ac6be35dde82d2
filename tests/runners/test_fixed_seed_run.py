"""A fixed-seed fine-tuning run and its export give the very outputs recorded before.

The run (`run_classifier.py` in this process, on SST-2-shaped sentences
written here, with a tiny random model) writes `eval_results.txt` and a
prediction file; `export_model` then writes the model for TF Serving, whose
numeric SavedModel gives logits on fixed ids. A change meant to move code,
not to change what it computes, must leave all three as
`tests/golden/fixed_seed_run.json` recorded them.

Byte identity holds only on the CPU the golden file was recorded on: oneDNN
and Eigen pick their kernels by instruction set (AVX2, AVX-512, AMX), and
the threads' share of a reduction by the number of cores, so another machine
sums in another order and differs in the last bits, which training then
carries on. The file names the recording machine's instruction sets and core
count; where both match, the files' digests and the logits' bytes must be
equal; elsewhere the numbers must agree within `RTOL`/`ATOL` and every
predicted label must be the same.

To record the file again (only when a change is meant to alter the outputs):
`BERT_RECORD_GOLDEN=1 python -m pytest tests/runners/test_fixed_seed_run.py`.
"""

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from evaluation.results import read_eval_results
from export.model_exports import export_model
from tests.fixtures import GOLDEN, TestCase, run_main, write_tiny_config

pytestmark = pytest.mark.slow

GOLDEN_FILE = GOLDEN / "fixed_seed_run.json"
RECORD = "BERT_RECORD_GOLDEN"
RTOL, ATOL = 1e-4, 1e-4
# The instruction sets oneDNN and Eigen choose their CPU kernels by.
KERNEL_ISAS = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl",
               "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile",
               "amx_bf16", "amx_int8")
GOOD = ["a warm and lovely tale", "the cast shines", "lovely music and a warm heart",
        "a bright clever story", "the cast is lovely"]
BAD = ["a cold and tired tale", "the plot drags", "tired jokes and a cold heart",
       "a dim clumsy story", "the plot is tired"]
OUTPUT_FILES = ("eval_results.txt", "submission/SST-2.tsv")
SERVED_TEXTS = ("a warm tale", "the plot drags", "lovely jokes", "a cold cast")
SERVED_LENGTH = 8


def cpu_signature() -> dict:
    """The kernel instruction sets this CPU has, and its core count (see the module)."""
    flags = set()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo", encoding="utf-8") as reader:
            for line in reader:
                if line.startswith("flags"):
                    flags = set(line.partition(":")[2].split())
                    break
    return {"isa": sorted(flags & set(KERNEL_ISAS)), "cpus": os.cpu_count()}


def _write_sst2(folder: Path) -> list[str]:
    """SST-2's three files under `folder/SST-2` and a tiny config; returns the vocabulary
    written beside them."""
    data = folder / "SST-2"
    data.mkdir(parents=True)
    rows = [(text, 1) for text in GOOD] + [(text, 0) for text in BAD]
    (data / "train.tsv").write_text("sentence\tlabel\n" + "".join(
        f"{text}\t{label}\n" for text, label in rows * 2))
    (data / "dev.tsv").write_text("sentence\tlabel\n" + "".join(
        f"{text}\t{label}\n" for text, label in rows))
    (data / "test.tsv").write_text("index\tsentence\n" + "".join(
        f"{index}\t{text}\n" for index, (text, _) in enumerate(rows)))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
             *sorted(set(" ".join(GOOD + BAD).split()))]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    write_tiny_config(folder / "bert_config.json", vocab_size=len(vocab))
    return vocab


def _served_ids(vocab: list[str]) -> dict[str, tf.Tensor]:
    """`[CLS] text [SEP]` of each of SERVED_TEXTS as ids, padded to SERVED_LENGTH."""
    ids = np.zeros((len(SERVED_TEXTS), SERVED_LENGTH), np.int32)
    for row, text in enumerate(SERVED_TEXTS):
        pieces = ["[CLS]", *text.split(), "[SEP]"]
        ids[row, :len(pieces)] = [vocab.index(piece) for piece in pieces]
    return {"input_ids": tf.constant(ids), "input_mask": tf.constant((ids > 0).astype(np.int32)),
            "segment_ids": tf.zeros_like(ids)}


def fixed_seed_outputs(root: Path) -> dict:
    """The run's files' digests and numbers, and the exported model's logits (see the module)."""
    vocab = _write_sst2(root)
    output = root / "run"
    run_main("run_classifier.py", {
        "task_name": "SST-2", "data_dir": root / "SST-2", "vocab_file": root / "vocab.txt",
        "bert_config_file": root / "bert_config.json", "output_dir": output,
        "do_train": True, "do_eval": True, "do_predict": True, "max_seq_length": 16,
        "train_batch_size": 4, "num_train_epochs": 8, "learning_rate": 2e-3,
        "random_seed": 7, "export_saved_model": False, "log_every": 100})
    export = export_model(output, root / "export", "tf_serving")
    served = tf.saved_model.load(str(export / "model" / "1"))
    logits = served.signatures["serving_default"](**_served_ids(vocab))["logits"]
    logits = logits.numpy().astype(np.float32)
    predictions = (output / OUTPUT_FILES[1]).read_text(encoding="utf-8").splitlines()[1:]
    return {"sha256": {name: hashlib.sha256((output / name).read_bytes()).hexdigest()
                       for name in OUTPUT_FILES},
            "eval_results": read_eval_results(output / OUTPUT_FILES[0]),
            "predicted_labels": [line.split("\t")[1] for line in predictions],
            "logits": logits.tolist(),
            "logits_sha256": hashlib.sha256(logits.tobytes()).hexdigest()}


class FixedSeedRunTest(TestCase):

    def test_outputs_are_the_recorded_ones(self):
        outputs = fixed_seed_outputs(self.tmp_path())
        if os.environ.get(RECORD):
            GOLDEN_FILE.write_text(json.dumps({"cpu": cpu_signature(), **outputs}, indent=1)
                                   + "\n")
            self.skipTest(f"{RECORD} is set: recorded {GOLDEN_FILE.name}, nothing compared")
        golden = json.loads(GOLDEN_FILE.read_text())
        self.assertEqual(outputs["predicted_labels"], golden["predicted_labels"])
        self.assertEqual(set(outputs["eval_results"]), set(golden["eval_results"]))
        if cpu_signature() == golden["cpu"]:
            self.assertEqual(outputs["sha256"], golden["sha256"])
            self.assertEqual(outputs["logits_sha256"], golden["logits_sha256"])
        for key, value in golden["eval_results"].items():
            self.assertAllClose(outputs["eval_results"][key], value, rtol=RTOL, atol=ATOL,
                                msg=key)
        self.assertAllClose(outputs["logits"], golden["logits"], rtol=RTOL, atol=ATOL)
        self.assertEqual(np.argmax(outputs["logits"], -1).tolist(),
                         np.argmax(golden["logits"], -1).tolist())


if __name__ == "__main__":
    tf.test.main()
