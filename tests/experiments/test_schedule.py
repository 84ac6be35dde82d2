"""The grid's background lane: runs one at a time in idle CPU time, stopped between runs."""

import os
import sys
import threading
import time
from pathlib import Path

import tensorflow as tf

from experiments import jobs, schedule


class IdleTimeRunnerTest(tf.test.TestCase):

    def test_runs_in_order_and_hands_back_what_it_did_not_start(self):
        done = []

        def run(item):
            time.sleep(0.2)
            done.append(item)

        items = list(range(20))
        runner = schedule.IdleTimeRunner(items, run)
        time.sleep(0.5)
        left = runner.stop()
        self.assertTrue(1 <= len(done) < len(items))
        self.assertEqual(items[:len(done)], done)  # in order, and the one in hand finished
        self.assertEqual(left, items[len(done):])
        self.assertEqual(runner.items, items)

    def test_a_failed_run_is_raised_at_stop_and_nothing_more_starts(self):
        started = []

        def run(item):
            started.append(item)
            raise jobs.JobFailed(f"{item} exited with status 3")

        runner = schedule.IdleTimeRunner(["bad", "never"], run)
        runner.thread.join()
        with self.assertRaisesRegex(jobs.JobFailed, "bad exited with status 3"):
            runner.stop()
        self.assertEqual(started, ["bad"])


def _job(name: str, **inputs) -> jobs.Job:
    return jobs.Job("run_classifier.py", {"task_name": name}, inputs)


class RunInIdleTimeTest(tf.test.TestCase):

    def test_runs_what_is_not_cached_on_one_thread_into_the_cache(self):
        cache = jobs.Cache(self.get_temp_dir())
        ran = []

        def runner(arguments, log, environment):
            ran.append((arguments[1], environment.get("TF_NUM_INTRAOP_THREADS"),
                        threading.current_thread() is not threading.main_thread()))
            Path(arguments[-1].split("=", 1)[1], "eval_results.txt").write_text("eval_f1 = 0.5\n")

        cached, fresh = _job("cached"), _job("fresh")
        jobs.run_job(cached, cache, runner)
        ran.clear()
        schedule.run_in_idle_time([cached, fresh], cache, runner).stop()
        self.assertEqual(ran, [("--task_name=fresh", "1", True)])
        self.assertEqual(cache.result(fresh)["eval_results"], {"eval_f1": 0.5})

    def test_a_resumed_run_says_its_times_are_the_last_attempts(self):
        cache = jobs.Cache(self.get_temp_dir())
        fresh = _job("fresh")
        continued = jobs.Job("run_classifier.py", {"task_name": "continued"}, resumable=True)
        (cache.output(continued)).mkdir(parents=True)
        (cache.output(continued) / "model.ckpt-50.index").write_text("left by a killed run")

        def runner(arguments, log, environment):
            Path(arguments[-1].split("=", 1)[1], "eval_results.txt").write_text("eval_f1 = 0.5\n")
            return 2.0

        self.assertNotIn("resumed", jobs.run_job(fresh, cache, runner))
        result = jobs.run_job(continued, cache, runner)
        self.assertTrue(result["resumed"])
        self.assertEqual(result["cpu_seconds"], 2.0)

    def test_refuses_runs_whose_inputs_are_not_made_yet(self):
        cache = jobs.Cache(self.get_temp_dir())
        reader = _job("reader", init_checkpoint=jobs.Output(_job("maker")))
        with self.assertRaisesRegex(ValueError, "reads the output of run_classifier.py"):
            schedule.run_in_idle_time([reader], cache, lambda *_: None)

    def test_the_idle_runner_runs_the_tool_at_the_lowest_priority(self):
        log = Path(self.get_temp_dir(), "log.txt")
        schedule.idle_runner(["-c", "import os; print(os.nice(0))"], log, dict(os.environ))
        expected = schedule.LOWEST_PRIORITY if sys.platform != "win32" else 0
        self.assertEqual(int(log.read_text().split()[-1]), max(expected, os.nice(0)))


if __name__ == "__main__":
    tf.test.main()
