"""The Beam pipeline (DirectRunner) writes the same records as the local tool."""

import glob
import subprocess
import sys

import apache_beam as beam
import pytest
import tensorflow as tf

from data_prep import beam_pretraining_data
from data_prep.pretraining.local import create_pretraining_data
from tests.data_prep.synthetic_corpus import make_corpus, settings_for
from tests.fixtures import TestCase

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
        tmp_path = self.folder
        folder, vocab = self.corpus
        command = [sys.executable, "-m", "data_prep.beam_pretraining_data",
                   f"--input_file={tmp_path}/nothing-*.txt", f"--output_file={tmp_path}/out",
                   f"--vocab_file={vocab}", "--runner=DirectRunner"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 1)
        self.assertIn("matches no files", result.stderr)


if __name__ == "__main__":
    tf.test.main()
