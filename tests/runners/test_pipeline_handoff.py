"""The README's pre-training commands in order, each run starting from the previous one's output.

Text -> records at a short length -> phase 1 -> records at a longer length
-> phase 2 from phase 1's `--output_dir` -> fine-tuning from phase 2's, and
features from one of its `ckpt-N` prefixes: the checks are that each run
reads every weight its predecessor wrote, not only that it runs. The
commands run in this process (their flags parsed as on the command line):
the handoffs, not the processes, are the subject. No step is compiled with
XLA: the handoffs do not depend on it, and the runner tests cover it.
"""

import json
import random
import re
from pathlib import Path

import pytest
import tensorflow as tf
from absl import flags as absl_flags

from data_prep import create_pretraining_data
from data_prep.pretraining.local import create_pretraining_data as write_records
from tests.fixtures import TestCase, run_main, write_tiny_config
from tests.runners.shared_runs import run_logged

pytestmark = pytest.mark.slow

WORDS = ["the", "cat", "dog", "sat", "on", "mat", "walk", "run", "jump", "blue", "red", "green",
         "house", "tree", "river", "stone", "light", "night", "day", "sun", "good", "bad"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *WORDS, "##s", "##ing", "##ed"]
SHORT, LONG = 32, 64  # the paper's 128 and 512, scaled down


def _sentences(rng: random.Random, count: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) + rng.choice(["", "s", "ing", "ed"])
                     for _ in range(rng.randint(3, 12))) + " ." for _ in range(count)]


def _records(folder, corpus, vocab, length: int, predictions: int) -> str:
    """`python -m data_prep.create_pretraining_data` with these flags, in this process."""
    output = folder / f"data{length}" / "wiki.tfrecord"
    values = absl_flags.FlagValues()
    create_pretraining_data.define_flags(values)
    values(["create_pretraining_data", f"--input_file={corpus}", f"--output_file={output}",
            "--num_output_shards=2", f"--vocab_file={vocab}", f"--max_seq_length={length}",
            f"--max_predictions_per_seq={predictions}", "--dupe_factor=2", "--num_workers=1"])
    write_records(create_pretraining_data.settings_from_flags(values))
    return str(output.parent / "wiki-*.tfrecord")  # shards: wiki-00000-of-00002.tfrecord


def _pretrain(folder, records, length: int, predictions: int, output, **flags) -> str:
    return run_logged("run_pretraining.py", {
        "do_train": True, "input_file": records, "bert_config_file": folder / "bert_config.json",
        "output_dir": output, "vocab_file": folder / "vocab.txt", "train_batch_size": 8,
        "max_seq_length": length, "max_predictions_per_seq": predictions,
        "num_train_steps": 6, "num_warmup_steps": 2, "learning_rate": 1e-3,
        "save_checkpoints_steps": 3, "log_every": 3, "jit_compile": False, **flags}).stderr


def _loaded(log: str, source) -> int:
    """How many tensors the run's load report says it took from `source`."""
    match = re.search(rf"loaded (\d+) tensors from {re.escape(str(source))} \(own format\)", log)
    assert match, f"no load report for {source} in:\n{log[-3000:]}"
    return int(match.group(1))


def _run_pipeline(folder: Path) -> tuple[Path, Path, str]:
    """Text, records and both pre-training phases in `folder`; phase 2's log."""
    rng = random.Random(0)
    corpus = folder / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(_sentences(rng, rng.randint(2, 8)))
                                  for _ in range(40)) + "\n", encoding="utf-8")
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    write_tiny_config(folder / "bert_config.json", vocab_size=len(VOCAB))
    phase1, phase2 = folder / "phase1", folder / "phase2"
    _pretrain(folder, _records(folder, corpus, vocab, SHORT, 5), SHORT, 5, phase1)
    log = _pretrain(folder, _records(folder, corpus, vocab, LONG, 10), LONG, 10, phase2,
                    init_checkpoint=phase1)
    return phase1, phase2, log


def _checkpoint_variables(folder, model_class: str) -> list[str]:
    from modeling import pretrainer
    from network import encoder
    from network.config import BertConfig

    config = BertConfig.from_json_file(folder / "bert_config.json")
    model = {"encoder": encoder.BertEncoder, "pretrainer": pretrainer.BertPretrainer}[model_class]
    return sorted(model(config).checkpoint_variables())


class PipelineHandoffTest(TestCase):

    @classmethod
    def setUpClass(cls):
        """Runs the two pre-training phases once for the tests below."""
        super().setUpClass()
        cls.folder = cls.class_folder()
        cls.phase1, cls.phase2, cls.log = _run_pipeline(cls.folder)

    def test_phase_two_starts_from_all_of_phase_one(self):
        # Phase 1 ended at step 6; its output folder stands for that checkpoint.
        self.assertEqual(_loaded(self.log, self.phase1 / "ckpt-6"),
                         len(_checkpoint_variables(self.folder, "pretrainer")))
        self.assertNotIn("not in the checkpoint", self.log)
        self.assertNotIn("not used by the model", self.log)
        self.assertTrue((self.phase2 / "ckpt-6.index").exists())

    def test_fine_tuning_starts_from_phase_two(self):
        folder, phase2, tmp_path = self.folder, self.phase2, self.tmp_path()
        rng = random.Random(1)
        data = tmp_path / "SST-2"
        data.mkdir()
        rows = [(sentence, index % 2) for index, sentence in enumerate(_sentences(rng, 24))]
        for name in ("train.tsv", "dev.tsv"):
            (data / name).write_text("sentence\tlabel\n" + "".join(f"{text}\t{label}\n"
                                                                   for text, label in rows))
        log = run_logged("run_classifier.py", {
            "do_train": True, "do_eval": True, "export_saved_model": False, "task_name": "SST-2",
            "data_dir": data, "vocab_file": folder / "vocab.txt",
            "bert_config_file": folder / "bert_config.json", "init_checkpoint": phase2,
            "output_dir": tmp_path / "out", "max_seq_length": 16, "train_batch_size": 8,
            "num_train_epochs": 1, "learning_rate": 1e-3, "jit_compile": False}).stderr
        self.assertEqual(_loaded(log, phase2 / "ckpt-6"),
                         len(_checkpoint_variables(folder, "encoder")))
        # Only the new classifier layer starts from scratch.
        missing = re.search(r"(\d+) not in the checkpoint, left as initialized: (.*)", log)
        self.assertIsNotNone(missing, log[-3000:])
        self.assertEqual(missing.group(1), "2", log[-3000:])
        for name in missing.group(2).split(", "):
            self.assertStartsWith(name, "output_")

    def test_features_from_a_checkpoint_prefix(self):
        from network.checkpoints import load_weights
        from network.config import BertConfig
        from network.encoder import BertEncoder
        from text.sentence_pairs import pack
        from text.tokenization import FullTokenizer

        folder, phase2, tmp_path = self.folder, self.phase2, self.tmp_path()
        prefix = phase2 / "ckpt-3"  # not the newest: a prefix means itself
        text = "the cat sat on the mat ."
        (tmp_path / "input.txt").write_text(text + "\n", encoding="utf-8")
        # Feature extraction masks nothing, so a vocabulary without [MASK] must do.
        vocab = tmp_path / "vocab.txt"
        vocab.write_text("\n".join("[unused0]" if token == "[MASK]" else token
                                   for token in VOCAB) + "\n", encoding="utf-8")
        output = tmp_path / "features.jsonl"
        run_main("extract_features.py", {
            "input_file": tmp_path / "input.txt", "output_file": output, "vocab_file": vocab,
            "bert_config_file": folder / "bert_config.json", "init_checkpoint": prefix,
            "layers": -1, "max_seq_length": 16})
        features = json.loads(output.read_text(encoding="utf-8"))["features"]

        encoder = BertEncoder(BertConfig.from_json_file(folder / "bert_config.json"))
        self.assertEmpty(load_weights(encoder, prefix).missing)
        tokenizer = FullTokenizer(str(vocab), do_lower_case=True)
        packed = pack(tokenizer.tokenize(text), None, 16, tokenizer.vocab)
        outputs = encoder({"input_ids": tf.constant([packed.input_ids]),
                           "input_mask": tf.constant([packed.input_mask]),
                           "segment_ids": tf.constant([packed.segment_ids])}, training=False)
        expected = outputs["sequence_output"].numpy()[0]
        self.assertEqual([feature["token"] for feature in features][:3], ["[CLS]", "the", "cat"])
        for position, feature in enumerate(features):
            self.assertAllClose(feature["layers"][0]["values"], expected[position],
                                atol=1e-4, rtol=1e-7, msg=feature["token"])


if __name__ == "__main__":
    tf.test.main()
