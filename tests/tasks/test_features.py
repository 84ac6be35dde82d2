"""tasks.features: the input-line and layer-index parsing of extract_features.py."""

import tensorflow as tf
from absl.testing import parameterized

from tasks import features
from tasks.model_files import ModelFiles


class FeatureParsingTest(tf.test.TestCase, parameterized.TestCase):

    def test_pair_lines_split_on_the_original_separator(self):
        self.assertEqual(features.parse_line("a b ||| c d"), ("a b", "c d"))
        self.assertEqual(features.parse_line("no pair here"), ("no pair here", None))
        self.assertEqual(features.parse_line("a|||b"), ("a|||b", None))

    @parameterized.parameters("hello world |||", "hello world ||| ", "hello world |||   ")
    def test_an_empty_second_text_is_a_single_text(self, line):
        self.assertEqual(features.parse_line(line.strip()), ("hello world", None))
        self.assertEqual(features.parse_line(line), ("hello world", None))

    def test_an_output_file_that_is_a_folder_is_refused_before_any_work(self):
        tmp_path = self.create_tempdir().full_path
        task = features.FeatureTask(f"{tmp_path}/in.txt", tmp_path)
        files = ModelFiles(f"{tmp_path}/no_config.json", f"{tmp_path}/no_vocab.txt",
                           init_checkpoint=f"{tmp_path}/no_checkpoint")
        with self.assertRaisesRegex(ValueError, f"^output_file={tmp_path} is a folder"):
            features.TASK.prepare(task, files)

    def test_layer_indices_are_checked_against_the_model(self):
        self.assertEqual(features.parse_layer_indices("-1,-2", 6), [-1, -2])
        self.assertEqual(features.parse_layer_indices("0,5", 6), [0, 5])
        with self.assertRaisesRegex(ValueError, "out of range"):
            features.parse_layer_indices("-7", 6)
        with self.assertRaisesRegex(ValueError, "integers"):
            features.parse_layer_indices("-1,last", 6)


if __name__ == "__main__":
    tf.test.main()
