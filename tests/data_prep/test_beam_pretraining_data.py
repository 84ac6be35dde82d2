"""The Beam pipeline (DirectRunner) writes the same records as the local tool."""

import glob

import apache_beam as beam
import pytest
import tensorflow as tf

from core.arguments import FieldFileNotFoundError
from data_prep import beam_pretraining_data
from data_prep.pretraining.local import create_pretraining_data
from tests.data_prep.synthetic_corpus import make_corpus, settings_for
from tests.fixtures import TestCase, run_main

pytestmark = pytest.mark.slow


def _records(paths):
    return sorted(record for path in paths
                  for record in tf.data.TFRecordDataset(path).as_numpy_iterator())


class BeamPretrainingDataTest(TestCase):

    def setUp(self):
        super().setUp()
        self.folder = self.tmp_path()
        self.corpus = make_corpus(self.folder)

    def test_direct_runner_matches_local_output(self):
        tmp_path = self.folder
        local = settings_for(self.corpus, tmp_path / "local" / "out.tfrecord")
        create_pretraining_data(local)
        beam_settings = settings_for(self.corpus, tmp_path / "beam" / "out")
        with beam.Pipeline(runner="DirectRunner") as pipeline:
            beam_pretraining_data.build_pipeline(pipeline, beam_settings,
                                                 str(tmp_path / "beam" / "out"),
                                                 num_shards=2)
        beam_files = glob.glob(str(tmp_path / "beam" / "out-*-of-00002"))
        local_files = glob.glob(str(tmp_path / "local" / "out-*-of-00003.tfrecord"))
        self.assertLen(local_files, 3)
        self.assertLen(beam_files, 2)
        local_records = _records(local_files)
        self.assertTrue(local_records)
        self.assertEqual(_records(beam_files), local_records)

    def test_cli_reports_bad_input(self):
        # In this process: the edge turns a FieldMessage into `error: ...` and exit status 1
        # for every command alike (tests/core/test_faults.py).
        tmp_path = self.folder
        folder, vocab = self.corpus
        with self.assertRaisesRegex(FieldFileNotFoundError,
                                    rf"^--input_file={tmp_path}/nothing-\*\.txt matches no files"):
            run_main("data_prep.beam_pretraining_data.py",
                     {"input_file": f"{tmp_path}/nothing-*.txt", "output_file": tmp_path / "out",
                      "vocab_file": vocab, "runner": "DirectRunner"})
        self.assertFalse(list(tmp_path.glob("out*")))


if __name__ == "__main__":
    tf.test.main()
