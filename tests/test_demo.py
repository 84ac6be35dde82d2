"""demo.py's scheduling: the low-priority runner that fills pre-training's idle time."""

import time
from pathlib import Path

import tensorflow as tf

import demo


def _job(tmp_path, name, code="pass"):
    return ["-c", code], tmp_path / name / "log.txt"


class DemoTest(tf.test.TestCase):

    def test_idle_time_runner_runs_in_order_and_hands_back_what_it_did_not_start(self):
        tmp_path = Path(self.create_tempdir().full_path)
        jobs = [_job(tmp_path, f"job{i}", f"import time; time.sleep(0.5); print('ran {i}')")
                for i in range(20)]
        runner = demo.IdleTimeRunner(jobs)
        time.sleep(1.5)
        left = runner.stop()
        started = [job for job in jobs if job[1].exists()]
        self.assertTrue(1 <= len(started) < len(jobs))
        self.assertEqual(jobs[:len(started)], started)
        self.assertEqual(left, jobs[len(started):])
        self.assertTrue(all(job[1].read_text().strip() == f"ran {i}" for i,
                            job in enumerate(started)))

    def test_idle_time_runner_raises_a_failed_job_at_stop(self):
        tmp_path = Path(self.create_tempdir().full_path)
        runner = demo.IdleTimeRunner([_job(tmp_path, "bad", "raise SystemExit(3)"),
                                      _job(tmp_path, "never")])
        runner.thread.join()
        with self.assertRaisesRegex(RuntimeError, "exit 3"):
            runner.stop()
        self.assertFalse((tmp_path / "never").exists())

    def test_outputs_of_another_recipe_are_removed_and_nothing_else(self):
        tmp_path = Path(self.create_tempdir().full_path)
        (tmp_path / "pretraining_1").mkdir()
        (tmp_path / "pretraining_1" / "ckpt-4500.index").write_text("old")
        (tmp_path / "vocab.txt").write_text("old")
        (tmp_path / "notes.txt").write_text("the user's")
        demo.clear_other_recipes(tmp_path)
        self.assertEqual(sorted(path.name for path in tmp_path.iterdir()),
                         ["notes.txt", "recipe.json"])
        # Same recipe again: the outputs are kept, so the tools resume from them.
        (tmp_path / "pretraining_1").mkdir()
        demo.clear_other_recipes(tmp_path)
        self.assertTrue((tmp_path / "pretraining_1").is_dir())


if __name__ == "__main__":
    tf.test.main()
