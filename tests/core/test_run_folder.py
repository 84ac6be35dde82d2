"""core.run_folder: one live run per output folder, and one task and model config per folder."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import tensorflow as tf
from absl.testing import parameterized

from core import run_folder
from tests.fixtures import REPO

_CONFIG = {"hidden_size": 128, "num_hidden_layers": 2, "vocab_size": 99}
_HOLDER = """
import sys, time
from core import run_folder
run_folder.lock(sys.argv[1])
print("locked", flush=True)
time.sleep(600)
"""


class LockTest(tf.test.TestCase):

    def _hold(self, folder: str) -> subprocess.Popen:
        holder = subprocess.Popen([sys.executable, "-c", _HOLDER, folder], cwd=REPO,
                                  env=dict(os.environ, PYTHONPATH=REPO),
                                  stdout=subprocess.PIPE, text=True)
        self.addCleanup(holder.wait)
        self.addCleanup(lambda: holder.poll() is None and holder.kill())
        self.assertEqual(holder.stdout.readline().strip(), "locked")
        return holder

    def test_a_second_run_is_refused_naming_the_folder_and_the_holder(self):
        folder = self.get_temp_dir()
        holder = self._hold(folder)
        with self.assertRaisesRegex(run_folder.FolderInUse,
                                    f"^{folder} is in use by another run \\(PID {holder.pid} "
                                    "on .*, started "):
            run_folder.lock(folder)

    def test_the_lock_of_a_killed_run_is_taken_over_with_a_message(self):
        folder = self.get_temp_dir()
        holder = self._hold(folder)
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        self.addCleanup(run_folder.release, folder)
        with self.assertLogs(level="WARNING") as logs:
            run_folder.lock(folder)
        self.assertRegex(logs.output[0], f"Took over the lock of {folder} from "
                                         f"PID {holder.pid} on .*, which no longer runs")
        written = json.loads(Path(folder, run_folder.LOCK_NAME).read_text())
        self.assertEqual(written["pid"], os.getpid())

    def test_a_finished_run_leaves_the_lock_free_and_clean(self):
        folder = self.get_temp_dir()
        run_folder.lock(folder)
        run_folder.release(folder)
        holder = self._hold(folder)  # no message: nothing was left by a stopped run
        self.assertIsNone(holder.poll())


class OwnerTest(tf.test.TestCase, parameterized.TestCase):

    def _folder_of(self, task: str, config: dict) -> str:
        folder = self.get_temp_dir()
        self.addCleanup(run_folder.release, folder)
        run_folder.claim(folder, task, config)
        with open(os.path.join(folder, "eval_results.txt"), "w") as writer:
            writer.write("eval_accuracy = 0.5\n")
        return folder

    def test_the_same_task_and_config_resume(self):
        folder = self._folder_of("pretraining:mlm_nsp", _CONFIG)
        run_folder.claim(folder, "pretraining:mlm_nsp", dict(_CONFIG))
        owner = run_folder.read_owner(folder)
        self.assertEqual(owner["task"], "pretraining:mlm_nsp")
        self.assertEqual(owner["config"], _CONFIG)
        self.assertEqual(owner["config_sha256"], run_folder.config_hash(_CONFIG))

    @parameterized.parameters(
        ("classification:mrpc", _CONFIG,
         ("holds a classification:sst-2 run \\(from run_owner.json\\); this is a "
          "classification:mrpc run")),
        ("pretraining:mlm_nsp", _CONFIG,
         "holds a classification:sst-2 run .*; this is a pretraining:mlm_nsp run"),
        ("classification:sst-2", {**_CONFIG, "hidden_size": 256},
         ("holds a classification:sst-2 run with hidden_size=128 .*; this is a "
          "classification:sst-2 run with hidden_size=256")),
    )
    def test_another_task_or_config_is_refused_naming_both(self, task, config, message):
        folder = self._folder_of("classification:sst-2", _CONFIG)
        with self.assertRaisesRegex(run_folder.FolderOwned, f"^{folder} {message}"):
            run_folder.check_owner(folder, task, config)

    def test_a_setting_a_run_does_not_give_is_kept_and_still_checked(self):
        folder = self._folder_of("classification:sst-2", {**_CONFIG, "class_weights": "1:3"})
        run_folder.claim(folder, "classification:sst-2", dict(_CONFIG))  # evaluates only
        self.assertEqual(run_folder.read_owner(folder)["config"]["class_weights"], "1:3")
        with self.assertRaisesRegex(run_folder.FolderOwned, "with class_weights=1:3 .*this is "
                                    "a classification:sst-2 run with class_weights=none"):
            run_folder.claim(folder, "classification:sst-2", {**_CONFIG,
                                                              "class_weights": "none"})

    def test_a_folder_without_work_goes_to_the_next_run(self):
        folder = self.get_temp_dir()
        run_folder.check_owner(folder, "squad", _CONFIG)
        with open(os.path.join(folder, run_folder.OWNER_NAME), "w") as writer:
            json.dump({"task": "ner:fine_tune", "config": _CONFIG}, writer)
        run_folder.check_owner(folder, "squad", {**_CONFIG, "hidden_size": 64})

    def _claim_then_fail(self, folder: str) -> None:
        with self.assertRaisesRegex(ValueError, "refused"):
            with run_folder.removed_unless_used(folder):
                os.makedirs(folder, exist_ok=True)
                run_folder.claim(folder, "squad", _CONFIG)
                raise ValueError("refused")

    def test_a_failed_run_removes_the_folder_it_made_and_nothing_else(self):
        root = self.get_temp_dir()
        made = os.path.join(root, "new", "deeper", "run")
        self._claim_then_fail(made)
        self.assertEqual(os.listdir(root), [])  # "new" and "deeper" were made for the run too
        had = os.path.join(root, "had")
        os.mkdir(had)
        self._claim_then_fail(had)  # the user's folder stays, with the stamp of the attempt
        self.assertTrue(os.path.isdir(had))
        with_work = os.path.join(root, "with_work")
        with self.assertRaisesRegex(ValueError, "refused"):
            with run_folder.removed_unless_used(with_work):
                os.makedirs(os.path.join(with_work, "logs"))
                raise ValueError("refused")
        self.assertEqual(os.listdir(with_work), ["logs"])  # work is kept for a resume
        with run_folder.removed_unless_used(os.path.join(root, "done")):
            os.mkdir(os.path.join(root, "done"))
        self.assertTrue(os.path.isdir(os.path.join(root, "done")))

    def _unstamped(self, *markers: str, config: dict | None = None) -> str:
        folder = self.get_temp_dir()
        for marker in markers:
            with open(os.path.join(folder, marker), "w") as writer:
                writer.write("x")
        if config is not None:
            with open(os.path.join(folder, "bert_config.json"), "w") as writer:
                json.dump(config, writer)
        return folder

    def test_an_unstamped_folder_is_known_by_its_files(self):
        classifier = self._unstamped("sweep_results.tsv", "model.ckpt.index", config=_CONFIG)
        with self.assertRaisesRegex(run_folder.FolderOwned,
                                    "holds a classification run \\(from its files\\); this is "
                                    "a pretraining:mlm_nsp run"):
            run_folder.check_owner(classifier, "pretraining:mlm_nsp", _CONFIG)
        with self.assertRaisesRegex(run_folder.FolderOwned, "num_hidden_layers=2 .*; this is a "
                                                            "classification:sst-2 run with "
                                                            "num_hidden_layers=4"):
            run_folder.check_owner(classifier, "classification:sst-2",
                                   {**_CONFIG, "num_hidden_layers": 4})
        self.addCleanup(run_folder.release, classifier)
        run_folder.claim(classifier, "classification:sst-2", _CONFIG)  # adopted and stamped
        self.assertEqual(run_folder.read_owner(classifier)["task"], "classification:sst-2")

    def test_an_unstamped_pretraining_folder_resumes(self):
        folder = self._unstamped("checkpoint", "ckpt-3.index")
        run_folder.check_owner(folder, "pretraining:mlm_nsp", _CONFIG)
        with self.assertRaisesRegex(run_folder.FolderOwned, "holds a pretraining run"):
            run_folder.check_owner(folder, "squad", _CONFIG)


class RunnerStartTest(tf.test.TestCase):
    """The runners' start (`cli.runner_flags.start_run`) claims the output folder."""

    def test_pretraining_into_a_classifier_folder_is_refused_before_any_write(self):
        from absl import flags

        import run_pretraining
        from cli import runner_flags
        from network.config import BertConfig

        folder = self.get_temp_dir()
        config_file = os.path.join(folder, "bert_config.json")
        BertConfig.preset("L2_H128").to_json_file(config_file)
        for name in ("sweep_results.tsv", "model.ckpt.index"):
            with open(os.path.join(folder, name), "w") as writer:
                writer.write("x")
        before = Path(config_file).read_text()
        values = flags.FlagValues()
        run_pretraining.define_flags(values)
        values(["run_pretraining.py", "--input_file=records", f"--output_dir={folder}",
                f"--bert_config_file={config_file}", "--do_train"])
        _, training, *_ = runner_flags.training_configs(values, run_pretraining.REQUIRED)
        with self.assertRaisesRegex(run_folder.FolderOwned, "holds a classification run"):
            runner_flags.start_run(values, training, "pretraining:mlm_nsp",
                                   BertConfig.from_json_file(config_file))
        run_folder.release(folder)
        self.assertEqual(Path(config_file).read_text(), before)
        self.assertFalse(os.path.exists(os.path.join(folder, run_folder.OWNER_NAME)))
        self.assertEqual(sorted(os.listdir(folder)), [run_folder.LOCK_NAME, "bert_config.json",
                                                      "model.ckpt.index", "sweep_results.tsv"])


if __name__ == "__main__":
    tf.test.main()
