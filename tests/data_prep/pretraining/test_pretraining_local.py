"""The local writer when a chunk fails part way: finished shards stay, nothing half-written does."""

import io

import pytest

from data_prep.pretraining import local
from tests.data_prep.conftest import settings_for


def test_failure_mid_run_keeps_finished_shards_and_removes_temporaries(corpus, tmp_path,  # noqa: F811
                                                                       monkeypatch):
    stage_chunk = local._stage_chunk

    def failing_at_chunk_4(task):
        if task.index == 4:
            raise OSError("disk full")
        return stage_chunk(task)

    monkeypatch.setattr(local, "_stage_chunk", failing_at_chunk_4)
    folder = tmp_path / "out"
    settings = settings_for(corpus, folder / "data.tfrecord")  # 7 chunks over 3 shards
    with pytest.raises(OSError, match="disk full"):
        local.create_pretraining_data(settings, io.StringIO())
    # Chunks 0-2 fill shard 0; chunk 3 started shard 1, which chunk 4 would have continued.
    assert sorted(path.name for path in folder.iterdir()) == [
        ".data-00000-of-00003.tfrecord.complete.json", "data-00000-of-00003.tfrecord"]
    monkeypatch.setattr(local, "_stage_chunk", stage_chunk)
    rerun = local.create_pretraining_data(settings, io.StringIO())
    assert (rerun.shards_written, rerun.shards_skipped) == (2, 1)
