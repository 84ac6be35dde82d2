"""SWAG CSV reading in the distribution's layout, and [N, 4, S] multiple-choice features."""

import numpy as np
import tensorflow as tf

from data_prep.datasets.swag import MultipleChoiceExample, convert_multiple_choice, read_swag
from tests.fixtures import TestCase
from text.tokenization import FullTokenizer

HEADER = (",video-id,fold-ind,startphrase,sent1,sent2,gold-source,"
          "ending0,ending1,ending2,ending3")
WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "away", "home", "it", "."]


def write(path, lines, crlf=False):
    ending = "\r\n" if crlf else "\n"
    path.write_bytes((ending.join(lines) + ending).encode("utf-8"))
    return str(path)


class SwagTest(TestCase):

    def setUp(self):
        super().setUp()
        vocab = self.tmp_path() / "vocab.txt"
        vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
        self.tokenizer = FullTokenizer(str(vocab), do_lower_case=True)

    def test_train_file_with_quoted_fields_and_crlf(self):
        tmp_path = self.tmp_path()
        path = write(tmp_path / "train.csv", [
            HEADER + ",label",
            '0,lsmdc1_x,4,"A man, tired. He","A man, tired.",He,gold,"says ""no"".",runs.,sits.,'
            '"eats, a lot",2',
            "1,anetv_y,17,The cat sat. It,The cat sat.,It,gen,ran.,sat.,slept.,ate.,0",
        ], crlf=True)
        examples = read_swag(path, has_label=True)
        self.assertEqual(examples, [
            MultipleChoiceExample("4", "A man, tired.", "He",
                                  ['says "no".', "runs.", "sits.", "eats, a lot"], 2),
            MultipleChoiceExample("17", "The cat sat.", "It", ["ran.", "sat.", "slept.", "ate."],
                                  0)])

    def test_test_file_has_no_label(self):
        tmp_path = self.tmp_path()
        path = write(tmp_path / "test.csv", [HEADER, "0,v,3,a b,a,b,gold,c,d,e,f"])
        self.assertEqual(read_swag(path, has_label=False), [
            MultipleChoiceExample("3", "a", "b", ["c", "d", "e", "f"], None)])

    def test_reading_errors_name_file_and_line(self):
        tmp_path = self.tmp_path()
        with self.assertRaisesRegex(FileNotFoundError,
                                    r"val\.csv: no such file; SWAG's distribution"):
            read_swag(str(tmp_path / "val.csv"), has_label=True)
        path = write(tmp_path / "val.csv", [HEADER, "0,v,3,a b,a,b,gold,c,d,e,f"])
        with self.assertRaisesRegex(ValueError, r"val\.csv: header lacks SWAG columns label"):
            read_swag(path, has_label=True)
        path = write(tmp_path / "val.csv", [HEADER + ",label", "0,v,3,a b,a,b,gold,c,d,e,f,4"])
        with self.assertRaisesRegex(ValueError, r"val\.csv:2: label '4' is not one of 0\.\.3"):
            read_swag(path, has_label=True)
        path = write(tmp_path / "val.csv", [HEADER + ",label", "0,v,3,a b,a,b,gold,c,d,1"])
        with self.assertRaisesRegex(ValueError, r"val\.csv:2: 10 columns, at least 12 needed"):
            read_swag(path, has_label=True)
        path = write(tmp_path / "val.csv", [HEADER + ",label"])
        with self.assertRaisesRegex(ValueError, r"val\.csv: holds no examples"):
            read_swag(path, has_label=True)

    def test_each_choice_is_context_then_start_and_ending(self):
        vocab = self.tokenizer.vocab
        examples = [MultipleChoiceExample("0", "The cat sat.", "It",
                                          ["ran away.", "sat.", "ran home.", "sat on a mat."], 3),
                    MultipleChoiceExample("1", "Dog.", "It", ["ran.", "sat.", "ran.", "sat."],
                                          None)]
        features = convert_multiple_choice(examples, self.tokenizer, 9)
        self.assertEqual({name: (array.shape, array.dtype) for name, array in features.items()}, {
            "input_ids": ((2, 4, 9), np.int32), "input_mask": ((2, 4, 9), np.int32),
            "segment_ids": ((2, 4, 9), np.int32), "label_ids": ((2,), np.int32)})
        ids = lambda *tokens: [vocab[t] for t in tokens]  # noqa: E731
        # 4 + 4 tokens for 6 places: on a tie the continuation loses first.
        self.assertEqual(features["input_ids"][0, 0].tolist(), ids("[CLS]", "the", "cat", "sat",
                                                                   "[SEP]",
                                                                   "it", "ran", "away", "[SEP]"))
        self.assertEqual(features["segment_ids"][0, 1].tolist(), [0] * 5 + [1] * 4)
        # Context 4 tokens, continuation 6 ("it sat on a mat ."): 6 places, the longer one is cut.
        self.assertEqual(features["input_ids"][0, 3].tolist(), ids("[CLS]", "the", "cat", "sat",
                                                                   "[SEP]",
                                                                   "it", "sat", "on", "[SEP]"))
        self.assertEqual(features["input_mask"][1, 0].tolist(), [1] * 8 + [0])
        self.assertEqual(features["label_ids"].tolist(), [3, 0])

    def test_conversion_rejects_uneven_choices_and_bad_labels(self):
        with self.assertRaisesRegex(ValueError, "example 1: 3 endings, the first example has 4"):
            convert_multiple_choice([MultipleChoiceExample("0", "a", "b", ["c"] * 4, 0),
                                     MultipleChoiceExample("1", "a", "b", ["c"] * 3,
                                                           0)], self.tokenizer, 8)
        with self.assertRaisesRegex(ValueError, r"label 4 is not a choice index 0\.\.3"):
            convert_multiple_choice([MultipleChoiceExample("0", "a", "b", ["c"] * 4, 4)],
                                    self.tokenizer, 8)
        with self.assertRaisesRegex(ValueError, "no examples"):
            convert_multiple_choice([], self.tokenizer, 8)


if __name__ == "__main__":
    tf.test.main()
