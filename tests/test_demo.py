"""demo.py's scheduling: the low-priority runner that fills pre-training's idle time."""

import time

import pytest

import demo


def _job(tmp_path, name, code="pass"):
    return ["-c", code], tmp_path / name / "log.txt"


def test_idle_time_runner_runs_in_order_and_hands_back_what_it_did_not_start(tmp_path):
    jobs = [_job(tmp_path, f"job{i}", f"import time; time.sleep(0.5); print('ran {i}')")
            for i in range(20)]
    runner = demo.IdleTimeRunner(jobs)
    time.sleep(1.5)
    left = runner.stop()
    started = [job for job in jobs if job[1].exists()]
    assert 1 <= len(started) < len(jobs)
    assert jobs[:len(started)] == started and left == jobs[len(started):]
    assert all(job[1].read_text().strip() == f"ran {i}" for i, job in enumerate(started))


def test_idle_time_runner_raises_a_failed_job_at_stop(tmp_path):
    runner = demo.IdleTimeRunner([_job(tmp_path, "bad", "raise SystemExit(3)"),
                                  _job(tmp_path, "never")])
    runner.thread.join()
    with pytest.raises(RuntimeError, match="exit 3"):
        runner.stop()
    assert not (tmp_path / "never").exists()


def test_outputs_of_another_recipe_are_removed_and_nothing_else(tmp_path):
    (tmp_path / "pretraining_1").mkdir()
    (tmp_path / "pretraining_1" / "ckpt-4500.index").write_text("old")
    (tmp_path / "vocab.txt").write_text("old")
    (tmp_path / "notes.txt").write_text("the user's")
    demo.clear_other_recipes(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes.txt", "recipe.json"]
    # Same recipe again: the outputs are kept, so the tools resume from them.
    (tmp_path / "pretraining_1").mkdir()
    demo.clear_other_recipes(tmp_path)
    assert (tmp_path / "pretraining_1").is_dir()
