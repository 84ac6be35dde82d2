"""A damaged checkpoint is named, with the byte its data file ends at when it was cut short."""

import os
import re
import types

import numpy as np
import tensorflow as tf

from network.checkpoints import CheckpointError, read_checkpoint, save_checkpoint


def write_checkpoint(prefix: str) -> str:
    """A checkpoint of this project's format with two weights; returns its data file."""
    weights = {"bert/embeddings/word_embeddings": tf.Variable(np.arange(4096, dtype="float32")
                                                              .reshape(64, 64)),
               "bert/pooler/dense/bias": tf.Variable(np.ones(64, dtype="float32"))}
    save_checkpoint(types.SimpleNamespace(checkpoint_variables=lambda: weights), prefix)
    (data_file,) = tf.io.gfile.glob(prefix + ".data-*")
    return data_file


class DamagedCheckpointTest(tf.test.TestCase):

    def test_a_cut_data_file_is_named_with_the_byte_it_ends_at(self):
        prefix = os.path.join(self.get_temp_dir(), "cut", "ckpt-3")
        data_file = write_checkpoint(prefix)
        self.assertAllEqual(read_checkpoint(prefix).tensors["bert/pooler/dense/bias"],
                            np.ones(64))
        os.truncate(data_file, 1000)
        with self.assertRaisesRegex(
                CheckpointError, f"^{re.escape(data_file)} is cut short: it ends at byte 1000, "
                r"before the end of the tensors its index lists \(at least 16640 bytes\); "
                "TensorFlow: Read less bytes than requested; the checkpoint cannot be read"):
            read_checkpoint(prefix)

    def test_a_damaged_byte_names_the_data_file(self):
        prefix = os.path.join(self.get_temp_dir(), "flipped", "ckpt-3")
        data_file = write_checkpoint(prefix)
        with open(data_file, "r+b") as file:
            file.seek(100)
            byte = file.read(1)
            file.seek(100)
            file.write(bytes([byte[0] ^ 0xFF]))
        size = os.path.getsize(data_file)
        with self.assertRaisesRegex(CheckpointError, f"^damaged data in {re.escape(data_file)} "
                                                     rf"\({size} bytes\); TensorFlow: .*Checksum"):
            read_checkpoint(prefix)


if __name__ == "__main__":
    tf.test.main()
