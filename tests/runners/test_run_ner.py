"""run_ner.py end to end on tiny CoNLL files: fine-tuning, the cached feature-based mode
with document context, and the bad inputs a user can make."""

import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from evaluation.results import read_eval_results
from tests.fixtures import REPO, TestCase, event_scalars, run_main, write_tiny_config

pytestmark = pytest.mark.slow

SCRIPT = os.path.join(REPO, "run_ner.py")

PEOPLE = [["john"], ["mary"], ["peter", "johnson"], ["anna"]]
PLACES = [["paris"], ["london"], ["new", "york"], ["rome"]]
ORGANIZATIONS = [["google"], ["siemens"], ["fifa"], ["nato"]]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "john", "mary", "peter", "##son",
         "anna", "paris", "london", "new", "york", "rome", "google", "siemens", "fifa", "nato",
         "lives", "in", "works", "for", "visited", "met", "and", "."]


def _entity(words: list[str], kind: str) -> list[tuple[str, str]]:
    return [(word.capitalize(), ("B-" if k == 0 else "I-") + kind)
            for k, word in enumerate(words)]


def _sentence(index: int) -> list[tuple[str, str]]:
    person, place = PEOPLE[index % 4], PLACES[(index // 2) % 4]
    organization = ORGANIZATIONS[(index // 3) % 4]
    shape = index % 3
    if shape == 0:
        middle = _entity(person, "PER") + [("lives", "O"), ("in", "O")] + _entity(place, "LOC")
    elif shape == 1:
        middle = _entity(person, "PER") + [("works", "O"), ("for", "O")] + \
            _entity(organization, "ORG")
    else:
        middle = _entity(organization, "ORG") + [("met", "O")] + _entity(person, "PER") + \
            [("in", "O")] + _entity(place, "LOC")
    return middle + [(".", "O")]


def _conll(sentences: list[list[tuple[str, str]]], per_document: int = 4) -> str:
    lines = []
    for index, sentence in enumerate(sentences):
        if index % per_document == 0:
            lines += ["-DOCSTART- -X- -X- O", ""]
        lines += [f"{word} NNP B-NP {tag}" for word, tag in sentence] + [""]
    return "\n".join(lines) + "\n"


def _write_assets(folder: Path) -> Path:
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    write_tiny_config(folder / "bert_config.json", vocab_size=len(VOCAB))
    data = folder / "data"
    data.mkdir()
    train = _conll([_sentence(index) for index in range(24)])
    (data / "train.txt").write_text(train)
    (data / "valid.txt").write_text(_conll([_sentence(index) for index in range(24, 32)]))
    (data / "test.txt").write_text(train)
    return folder


def _write_checkpoint(assets: Path):
    """A random 4-block encoder saved as this project's checkpoint (Table 7 needs 4 blocks)."""
    from network.checkpoints import save_checkpoint
    from network.config import BertConfig
    from network.encoder import BertEncoder

    config_path = write_tiny_config(assets / "bert_config_4.json", vocab_size=len(VOCAB),
                                    num_hidden_layers=4)
    encoder = BertEncoder(BertConfig.from_json_file(config_path))
    return config_path, save_checkpoint(encoder, assets / "encoder" / "model.ckpt")


def _arguments(assets, output_dir, data_dir=None, **flags) -> dict:
    arguments = {"data_dir": data_dir or assets / "data", "vocab_file": assets / "vocab.txt",
                 "bert_config_file": assets / "bert_config.json", "output_dir": output_dir,
                 "do_train": True, "do_eval": True, "do_predict": True, "max_seq_length": 32,
                 "train_batch_size": 8, "learning_rate": 1e-3, "num_train_epochs": 2,
                 "save_checkpoints_steps": 1000, "log_every": 20}
    arguments.update(flags)
    return arguments


def _run(assets, output_dir, data_dir=None, expect=0, **flags):
    arguments = _arguments(assets, output_dir, data_dir, **flags)
    command = [sys.executable, SCRIPT] + [f"--{key}={value}" for key, value in arguments.items()]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert result.returncode == expect, result.stderr[-3000:]
    return result


def _sweep_table(output_dir: Path) -> list[dict[str, str]]:
    with open(output_dir / "sweep_results.tsv", encoding="utf-8") as reader:
        return list(csv.DictReader(reader, delimiter="\t"))


def _replace_line(text: str, number: int, replacement: str) -> str:
    lines = text.split("\n")
    lines[number - 1] = replacement
    return "\n".join(lines)


class RunNerTest(TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        """The vocabulary, config, CoNLL files and a 4-block checkpoint, written once."""
        super().setUpClass()
        cls.assets = _write_assets(cls.class_folder())
        cls.checkpoint = _write_checkpoint(cls.assets)

    def test_fine_tuning_learns_the_training_set(self):
        assets, tmp_path = self.assets, self.tmp_path()
        run_main("run_ner.py", _arguments(assets, tmp_path, num_train_epochs=12,
                                          jit_compile=False))  # not about XLA
        results = read_eval_results(tmp_path / "eval_results.txt")
        self.assertContainsSubset({"eval_precision", "eval_recall", "eval_f1", "eval_accuracy",
                                   "test_precision", "test_recall", "test_f1", "test_f1_PER",
                                   "test_f1_LOC", "test_f1_ORG"}, set(results))
        self.assertGreater(results["test_f1"], 0.6)  # test.txt is the training file
        self.assertGreater(results["eval_f1"], 0.3)
        scalars = event_scalars(tmp_path / "logs" / "eval")
        self.assertAllClose({key: values[-1][1] for key, values in scalars.items()}, results,
                            rtol=1e-6, atol=1e-12)
        lines = (tmp_path / "test_predictions.txt").read_text().splitlines()
        train = (assets / "data" / "train.txt").read_text().splitlines()
        gold = [line.split()[::3] for line in train
                if line and not line.startswith("-DOCSTART-")]
        self.assertEqual([line.split()[:2] for line in lines if line], gold)
        for line in lines:
            if line:
                self.assertLen(line.split(), 3)
        self.assertTrue((tmp_path / "model.ckpt.index").exists())
        self.assertTrue((tmp_path / "valid_predictions.txt").exists())

    @pytest.mark.long
    def test_feature_based_sweep_with_document_context_caches_features_once(self):
        assets, tmp_path = self.assets, self.tmp_path()
        config, init_checkpoint = self.checkpoint
        cache = tmp_path / "cache"
        flags = {"mode": "feature_based", "bert_config_file": config,
                 "init_checkpoint": init_checkpoint, "feature_cache_dir": cache,
                 "feature_layers": "concat_last_four", "lstm_units": 16, "num_train_epochs": 20,
                 "learning_rates": "1e-2,3e-2", "document_context": True}
        first = _run(assets, tmp_path, **flags)
        self.assertLen(re.findall("computing concat_last_four features", first.stderr), 3)
        self.assertIn("valid: 8 sentences in 8 windows", first.stderr)
        files = sorted(os.listdir(cache))
        self.assertEqual([name.split("-")[0] for name in files], ["test", "train", "valid"])
        self.assertEqual(np.load(cache / files[1], mmap_mode="r").shape, (24, 32, 4 * 32))
        times = {name: os.stat(cache / name).st_mtime_ns for name in files}
        trained = read_eval_results(tmp_path / "eval_results.txt")
        self.assertGreater(trained["test_f1"], 0.3)
        self.assertTrue((tmp_path / "feature_tagger.weights.h5").exists())
        # Both rates train on the features computed once; the best on dev is kept.
        table = _sweep_table(tmp_path)
        self.assertEqual([(row["learning_rate"], row["restart"], row["status"]) for row in table],
                         [("0.01", "0", "finished"), ("0.03", "0", "finished")])
        chosen = max(table, key=lambda row: float(row["dev_score"]))
        self.assertEqual([row["chosen"] for row in table].count("*"), 1)
        self.assertEqual(chosen["chosen"], "*")
        self.assertEqual(f"{trained['eval_f1']:.4f}", chosen["eval_f1"])

        # A later run (here: evaluation with the saved tagger, the chosen run's) finds every
        # split in the cache and scores alike.
        second = _run(assets, tmp_path, **{**flags, "do_train": False})
        self.assertLen(re.findall(r"reusing cached features", second.stderr), 2)
        self.assertNotIn("computing", second.stderr)
        self.assertEqual({name: os.stat(cache / name).st_mtime_ns for name in os.listdir(cache)},
                         times)
        reloaded = read_eval_results(tmp_path / "eval_results.txt")
        self.assertEqual(reloaded["eval_f1"], trained["eval_f1"])
        self.assertEqual(reloaded["test_f1"], trained["test_f1"])

    @pytest.mark.long
    def test_causal_fine_tuning_with_a_bilstm_trains_and_has_no_feature_based_mode(self):
        assets, tmp_path = self.assets, self.tmp_path()
        # Table 5's "+ BiLSTM" row: the left-to-right model with a BiLSTM under the tags.
        run_main("run_ner.py", _arguments(assets, tmp_path / "causal", causal=True,
                                          bilstm_units=4, do_predict=False))
        results = read_eval_results(tmp_path / "causal" / "eval_results.txt")
        self.assertBetween(results["eval_f1"], 0.0, 1.0)
        saved = dict(tf.train.list_variables(str(tmp_path / "causal" / "model.ckpt")))
        self.assertEqual(sum("forward_lstm" in name or "backward_lstm" in name
                             for name in saved), 6)
        tags = next(shape for name, shape in saved.items() if "/ner.Soutput_weights/" in name)
        self.assertEqual(tags[1], 8)  # the tags read both directions' 4 units
        with self.assertRaisesRegex(ValueError, "^--causal fine-tunes the left-to-right model"):
            run_main("run_ner.py", _arguments(assets, tmp_path / "features", causal=True,
                                              mode="feature_based"))
        self.assertFalse((tmp_path / "features" / "eval_results.txt").exists())
        with self.assertRaisesRegex(ValueError, "^--bilstm_units is fine-tuned with the encoder"):
            run_main("run_ner.py", _arguments(assets, tmp_path / "lstm", bilstm_units=4,
                                              mode="feature_based"))

    @pytest.mark.long
    def test_sweep_lists_every_run_keeps_the_best_and_resumes_without_retraining(self):
        assets, tmp_path = self.assets, self.tmp_path()
        flags = {"learning_rates": "1e-3,1e6", "num_restarts": 2, "do_predict": False,
                 "export_saved_model": False, "jit_compile": False}
        run_main("run_ner.py", _arguments(assets, tmp_path, **flags))
        table, chosen = self.check_sweep(tmp_path, "0.001", "1e+06")
        results = read_eval_results(tmp_path / "eval_results.txt")
        self.assertEqual(f"{results['eval_f1']:.4f}", chosen["eval_f1"])
        self.assertEqual(chosen["dev_score"], chosen["eval_f1"])
        for row in table[:2]:  # each run's dev scores at its last step, in its own folder
            run = tmp_path / "runs" / f"lr0.001_restart{row['restart']}"
            self.assertEqual(f"{event_scalars(run / 'logs' / 'eval')['eval_f1'][-1][1]:.4f}",
                             row["eval_f1"])
        # The same command again: finished runs are scored, not trained again.
        checkpoints = {path: path.stat().st_mtime_ns for path in tmp_path.glob(
            "runs/*/checkpoints/*")}
        run_main("run_ner.py", _arguments(assets, tmp_path, **flags))
        self.assertEqual([(row["learning_rate"], row["restart"], row["status"][:8],
                           row["eval_f1"]) for row in _sweep_table(tmp_path)],
                         [(row["learning_rate"], row["restart"], row["status"][:8],
                           row["eval_f1"]) for row in table])
        self.assertEqual({path: path.stat().st_mtime_ns for path in checkpoints}, checkpoints)

    @parameterized.parameters(
        ("train", lambda text: _replace_line(text, 4, "Lives NNP O"),
         r"train\.txt:4: 3 columns where the first token line has 4"),
        ("valid", lambda text: "", r"valid\.txt: no sentences"),
        ("dev", lambda text: text.replace("B-ORG", "B-MISC", 1),
         r"dev\.txt:\d+: label 'B-MISC' not seen in training"),
    )
    def test_bad_inputs_exit_1_with_the_place(self, split, change, message):
        tmp_path = self.tmp_path()
        data = tmp_path / "data"
        shutil.copytree(self.assets / "data", data)
        if split == "dev":  # the other name of the validation file
            os.rename(data / "valid.txt", data / "dev.txt")
        path = data / f"{split}.txt"
        path.write_text(change(path.read_text()))
        with self.assertRaisesRegex((ValueError, OSError), message):
            run_main("run_ner.py", _arguments(self.assets, tmp_path / "out", data_dir=data))


if __name__ == "__main__":
    tf.test.main()
