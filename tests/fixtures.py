"""The tests' base TestCase and the small synthetic inputs the tests share."""

import csv
import importlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Mapping

import numpy as np
import tensorflow as tf
from absl import flags

from core.arguments import FieldMessage
from network.config import BertConfig

REPO = Path(__file__).resolve().parents[1]
# Beside the code but not of it: the tests, and what `pip install .` or `python -m build` leave.
NOT_PRODUCT = ("tests", "build", "dist")


def product_files() -> list[Path]:
    """The project's own Python files: no tests, no build output, nothing in a dot folder."""
    return [path for path in sorted(REPO.rglob("*.py"))
            if not any(part.startswith(".") or part in NOT_PRODUCT or part.endswith(".egg-info")
                       for part in path.relative_to(REPO).parts[:-1])]

# Sets a file-size limit (if one is given) and SIGINT's default action, then becomes the command.
# Under a limit, the tests' shared XLA cache (conftest.py) is left out: a compiled program
# written there would meet the limit before the write the test is about.
_LAUNCHER = ("import os, re, resource, signal, sys\n"
             "limit = int(sys.argv[1])\n"
             "if limit >= 0:\n"
             "    resource.setrlimit(resource.RLIMIT_FSIZE,\n"
             "                       (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))\n"
             "    os.environ['TF_XLA_FLAGS'] = re.sub(r'--tf_xla_persistent_cache_directory=\\S*',\n"
             "                                        '', os.environ.get('TF_XLA_FLAGS', ''))\n"
             "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
             "os.execv(sys.argv[2], sys.argv[2:])\n")


def launched(command: list[str], file_size_limit: int | None = None) -> list[str]:
    """`command` behind a tiny launcher that sets its file-size limit and SIGINT's default action.

    subprocess's `preexec_fn` would do the same between fork and exec, but a
    test process already holds TensorFlow's and gRPC's threads, and a child
    forked from them can abort before it execs (gRPC's poller did, in one
    suite run). The launcher is a fresh process, so nothing runs in a fork.
    (A process started in the background has SIGINT ignored, and Python then
    leaves it ignored: the launcher restores the default a terminal gives.)
    """
    limit = -1 if file_size_limit is None else file_size_limit
    return [sys.executable, "-c", _LAUNCHER, str(limit), *command]
GOLDEN = REPO / "tests" / "golden"
# What chooses TensorFlow's kernels and splits its sums among threads: a child process whose
# float32 outputs are compared with this one's to 1e-6 is given the same (sums added in
# another order differ by more).
SAME_KERNELS = {name: os.environ[name] for name in (
    "TF_ENABLE_ONEDNN_OPTS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
    if name in os.environ}
TINY_CONFIG = {"vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2,
               "num_attention_heads": 2, "intermediate_size": 64,
               "max_position_embeddings": 64}


def tiny_config(**changes) -> BertConfig:
    """A BertConfig small enough to build and run in a unit test; `changes` override fields."""
    return BertConfig(**{**TINY_CONFIG, **changes})


class TestCase(tf.test.TestCase):
    """The test tree's base class: tf.test's, with its temporary folders as `Path`s."""

    def tmp_path(self) -> Path:
        """A new empty folder for this test, removed after it."""
        return Path(self.create_tempdir().full_path)

    @classmethod
    def class_folder(cls) -> Path:
        """A new empty folder for the whole class, removed after its last test.

        For inputs a `setUpClass` writes once and every test only reads;
        `tmp_path` lives for one test.
        """
        folder = Path(tempfile.mkdtemp())
        cls.addClassCleanup(shutil.rmtree, folder, ignore_errors=True)
        return folder

    def check_sweep(self, output_dir: Path, finished: str, diverged: str
                    ) -> tuple[list[dict[str, str]], dict[str, str]]:
        """`sweep_results.tsv` of a runner's sweep `learning_rates=finished,diverged` with two
        restarts: four rows in order, the diverged rate's two rows `diverged at step N` and
        never chosen, one run starred, the better finished one on dev. Returns the rows and
        the chosen one.
        """
        with open(Path(output_dir) / "sweep_results.tsv", encoding="utf-8") as reader:
            table = list(csv.DictReader(reader, delimiter="\t"))
        self.assertEqual([(row["learning_rate"], row["restart"]) for row in table],
                         [(rate, restart) for rate in (finished, diverged)
                          for restart in ("0", "1")])
        self.assertEqual([row["status"] for row in table[:2]], ["finished"] * 2)
        for row in table[2:]:  # a rate that diverges costs its rows, not the sweep
            self.assertRegex(row["status"], r"\Adiverged at step \d+\Z")
            self.assertEqual((row["dev_score"], row["chosen"]), ("nan", ""))
        chosen = max(table[:2], key=lambda row: float(row["dev_score"]))
        self.assertEqual([row["chosen"] for row in table].count("*"), 1)
        self.assertEqual(chosen["chosen"], "*")
        return table, chosen


def write_tiny_config(path: Path, **changes) -> Path:
    path.write_text(json.dumps({**TINY_CONFIG, **changes}))
    return path


def write_pretraining_records(path: Path, count: int, max_seq_length: int = 32,
                              max_predictions_per_seq: int = 5, seed: int = 0,
                              masked: bool = True) -> Path:
    """Records in the original schema: random ids, 3 masked positions, random NSP labels.

    `masked=False`: no masked position, as `--masked_lm_prob=0` writes them for LTR.
    """
    generator = np.random.default_rng(seed)

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(count):
            length = int(generator.integers(10, max_seq_length + 1))
            ids = np.zeros(max_seq_length, int)
            ids[:length] = generator.integers(5, TINY_CONFIG["vocab_size"], length)
            mask = (np.arange(max_seq_length) < length).astype(int)
            segments = ((np.arange(max_seq_length) >= length // 2) & (mask == 1)).astype(int)
            positions = np.zeros(max_predictions_per_seq, int)
            positions[:3] = np.sort(generator.choice(np.arange(1, length - 1), 3, replace=False))
            masked_ids = np.zeros(max_predictions_per_seq, int)
            masked_ids[:3] = ids[positions[:3]]
            weights = np.zeros(max_predictions_per_seq)
            if masked:
                ids[positions[:3]] = 4
                weights[:3] = 1.0
            else:
                positions[:], masked_ids[:] = 0, 0
            features = {"input_ids": ints(ids), "input_mask": ints(mask),
                        "segment_ids": ints(segments), "masked_lm_positions": ints(positions),
                        "masked_lm_ids": ints(masked_ids),
                        "masked_lm_weights": tf.train.Feature(
                            float_list=tf.train.FloatList(value=weights)),
                        "next_sentence_labels": ints([generator.integers(0, 2)])}
            example = tf.train.Example(features=tf.train.Features(feature=features))
            writer.write(example.SerializeToString())
    return path


def event_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """The (step, value) points of each scalar TensorBoard would plot from `folder`."""
    scalars = {}
    for path in sorted(Path(folder).glob("events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(str(path)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append(
                    (event.step, float(tf.make_ndarray(value.tensor))))
    return scalars


def run_main(script: str, arguments: Mapping[str, object]) -> None:
    """A runner's `main` in this process, its flags parsed into a fresh `FlagValues`.

    For runs that must be refused: the error its entry point would print as
    `script: error: ...` (exit status 1) is raised here, without the cost of
    a new process, its message as the edge writes it (the runner's flags as
    `--flag`). Arguments that are None are left out.
    """
    module = importlib.import_module(script.removesuffix(".py"))
    values = flags.FlagValues()
    module.define_flags(values)
    values([script, *(f"--{key}={value}" for key, value in arguments.items()
                      if value is not None)])
    try:
        module.main([script], values)
    except Exception as error:  # FieldMessage is a mixin: caught through the exception
        if isinstance(error, FieldMessage):
            error.args = (error.render(values),)
        raise
