"""The local writer when a chunk fails part way: finished shards stay, nothing half-written does."""

import io
from unittest import mock

import tensorflow as tf

from data_prep.pretraining import local
from tests.data_prep.synthetic_corpus import make_corpus, settings_for
from tests.fixtures import TestCase


class PretrainingLocalTest(TestCase):

    def setUp(self):
        super().setUp()
        self.folder = self.tmp_path()
        self.corpus = make_corpus(self.folder)

    def test_failure_mid_run_keeps_finished_shards_and_removes_temporaries(self):
        tmp_path = self.folder
        stage_chunk = local._stage_chunk

        def failing_at_chunk_4(task):
            if task.index == 4:
                raise OSError("disk full")
            return stage_chunk(task)

        self.enter_context(mock.patch.object(local, "_stage_chunk", failing_at_chunk_4))
        folder = tmp_path / "out"
        settings = settings_for(self.corpus, folder / "data.tfrecord")  # 7 chunks over 3 shards
        with self.assertRaisesRegex(OSError, "disk full"):
            local.create_pretraining_data(settings, io.StringIO())
        # Chunks 0-2 fill shard 0; chunk 3 started shard 1, which chunk 4 would have continued.
        self.assertEqual(sorted(path.name for path in folder.iterdir()), [
            ".data-00000-of-00003.tfrecord.complete.json", "data-00000-of-00003.tfrecord"])
        self.enter_context(mock.patch.object(local, "_stage_chunk", stage_chunk))
        rerun = local.create_pretraining_data(settings, io.StringIO())
        self.assertEqual((rerun.shards_written, rerun.shards_skipped), (2, 1))


if __name__ == "__main__":
    tf.test.main()
