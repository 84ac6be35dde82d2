"""GLUE processors on small files in each task's real layout, feature conversion, submissions."""

import logging
import os

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from data_prep.datasets.glue import (
    InputExample,
    convert_both_orders,
    convert_examples,
    get_processor,
    majority_class,
    write_submission,
)
from tests.fixtures import TestCase
from text.tokenization import FullTokenizer

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "is", "it", "\"", ".", "?", ","]


def write(folder, name, rows, crlf=False, bom=False):
    """Writes tab-separated `rows` (lists of cells, or raw strings) to folder/name."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    ending = "\r\n" if crlf else "\n"
    lines = [row if isinstance(row, str) else "\t".join(row) for row in rows]
    path.write_bytes((("\ufeff" if bom else "") + ending.join(lines) + ending).encode("utf-8"))
    return path


MNLI_HEADER = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
               "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
               "sentence2"]


def _mnli_folder(root):
    mnli = root / "MNLI"
    row = ["0", "1", "1e", "gov", "( ( a", "( b", "(ROOT", "(ROOT", "The cat sat.", "It sat."]
    write(mnli, "train.tsv", [MNLI_HEADER + ["label1", "gold_label"], row + ["neutral", "neutral"]])
    dev_header = MNLI_HEADER + [f"label{i}" for i in range(1, 6)] + ["gold_label"]
    for name, label in (("dev_matched.tsv", "entailment"), ("dev_mismatched.tsv", "contradiction")):
        write(mnli, name, [dev_header, row + [label] * 5 + [label]])
    write(mnli, "test_matched.tsv", [MNLI_HEADER, ["7", *row[1:]]])
    write(mnli, "test_mismatched.tsv", [MNLI_HEADER, ["9", *row[1:]]])
    return mnli


class GlueTest(TestCase, parameterized.TestCase):

    def setUp(self):
        super().setUp()
        vocab = self.tmp_path() / "vocab.txt"
        vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
        self.tokenizer = FullTokenizer(str(vocab), do_lower_case=True)

    def test_cola_headerless_train_and_dev_headed_test(self):
        tmp_path = self.tmp_path()
        rows = [["gj04", "1", "", 'He said "hi and left.'], ["gj04", "0", "*",
                                                             "They drank the pub."],
                ["cj99", "1", "", "The cat sat."]]
        write(tmp_path, "train.tsv", rows, crlf=True)
        write(tmp_path, "dev.tsv", rows[:2])
        write(tmp_path, "test.tsv", [["index", "sentence"], ["0", "A dog ran."], ["1", "It is."]])
        processor = get_processor("CoLA")
        self.assertEqual((processor.name, processor.labels, processor.is_regression),
                         ("CoLA", ["0", "1"],
                                                                              False))
        train = processor.train_examples(str(tmp_path))
        # The unbalanced quote stays in its row; it does not swallow the following lines.
        self.assertEqual(train, [InputExample("train-0", 'He said "hi and left.', None, "1"),
                                 InputExample("train-1", "They drank the pub.", None, "0"),
                                 InputExample("train-2", "The cat sat.", None, "1")])
        self.assertEqual([e.label for e in processor.dev_sets(str(tmp_path))["dev"]], ["1", "0"])
        test = processor.test_sets(str(tmp_path))
        self.assertEqual(list(test), ["CoLA"])
        self.assertEqual([(e.guid, e.text_a, e.label) for e in test["CoLA"]],
                         [("0", "A dog ran.", None),
                                                                       ("1", "It is.", None)])

    def test_mrpc_columns_by_name_bom_and_quotes(self):
        tmp_path = self.tmp_path()
        header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
        write(tmp_path, "train.tsv", [header, ["1", "7", "8", 'He called " the witness " ,',
                                               'A " b'],
                                      ["0", "9", "10", "x", "y"]], bom=True, crlf=True)
        write(tmp_path, "dev.tsv", [header, ["0", "1", "2", "p", "q"]])
        write(tmp_path, "test.tsv", [["index", *header[1:]], ["0", "5", "6", "s", "t"]])
        processor = get_processor("mrpc")
        train = processor.train_examples(str(tmp_path))
        self.assertEqual([(e.text_a, e.text_b, e.label) for e in train], [
            ('He called " the witness " ,', 'A " b', "1"), ("x", "y", "0")])
        self.assertEqual(processor.test_sets(str(tmp_path))["MRPC"],
                         [InputExample("0", "s", "t", None)])

    def test_mnli_splits_and_diagnostic_from_glue_folder(self):
        tmp_path = self.tmp_path()
        mnli = _mnli_folder(tmp_path)
        processor = get_processor("MNLI")
        self.assertEqual(processor.labels, ["contradiction", "entailment", "neutral"])
        train = processor.train_examples(str(mnli))
        self.assertEqual(train, [InputExample("train-0", "The cat sat.", "It sat.", "neutral")])
        dev = processor.dev_sets(str(mnli))
        self.assertEqual({name: [e.label for e in examples] for name, examples in dev.items()}, {
            "dev_matched": ["entailment"], "dev_mismatched": ["contradiction"]})
        self.assertEqual(list(processor.test_sets(str(mnli))), ["MNLI-m", "MNLI-mm"])
        write(tmp_path / "diagnostic", "diagnostic.tsv",
              [["index", "sentence1", "sentence2"], ["0", "A dog ran.", "A cat ran."]])
        test = processor.test_sets(str(mnli))
        self.assertEqual([e.guid for e in test["MNLI-m"]], ["7"])
        self.assertEqual([e.guid for e in test["MNLI-mm"]], ["9"])
        self.assertEqual(test["AX"], [InputExample("0", "A dog ran.", "A cat ran.", None)])

    def test_ax_needs_the_diagnostic_set_and_accepts_ax_tsv(self):
        tmp_path = self.tmp_path()
        mnli = _mnli_folder(tmp_path)
        processor = get_processor("ax")
        self.assertEqual(processor.name, "AX")
        self.assertEqual(processor.labels, ["contradiction", "entailment",
                                            "neutral"])
        with self.assertRaisesRegex(FileNotFoundError,
                                    r"diagnostic\.tsv or .*AX\.tsv.*GLUE layout"):
            processor.test_sets(str(mnli))
        write(mnli, "AX.tsv", [["index", "sentence1", "sentence2"], ["3", "a", "b"]])
        self.assertEqual(processor.test_sets(str(mnli)),
                         {"AX": [InputExample("3", "a", "b", None)]})
        self.assertLen(processor.train_examples(str(mnli)), 1)

    def test_qqp_skips_and_reports_broken_training_rows(self):
        tmp_path = self.tmp_path()
        header = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
        write(tmp_path, "train.tsv", [header, ["1", "2", "3", "Why?", "How?", "0"],
                                      ["4", "5", "6", "Is it a", "broken"], "question?\t1",
                                      ["7", "8", "9", "A?", "B?", "1"]])
        write(tmp_path, "dev.tsv", [header, ["1", "2", "3", "Why?", "How?", "1"], ["4", "5", "6"]])
        write(tmp_path, "test.tsv", [["id", "question1", "question2"], ["0", "c?", "d?"]])
        processor = get_processor("qqp")
        with self.assertLogs(level=logging.WARNING) as logs:
            train = processor.train_examples(str(tmp_path))
        self.assertEqual([(e.guid, e.label) for e in train], [("train-0", "0"), ("train-1", "1")])
        path = os.path.join(str(tmp_path), "train.tsv")
        self.assertEqual(processor.skipped_rows, {path: [3, 4]})
        self.assertIn("skipped 2 rows with too few columns (lines 3, 4)", "\n".join(logs.output))
        with self.assertRaisesRegex(ValueError, r"dev\.tsv:3: 3 tab-separated columns, at least 6"):
            processor.dev_sets(str(tmp_path))
        self.assertEqual(processor.test_sets(str(tmp_path))["QQP"][0].guid, "0")

    def test_stsb_is_regression_with_float_scores(self):
        tmp_path = self.tmp_path()
        header = ["index", "genre", "filename", "year", "old_index", "source1", "source2",
                  "sentence1", "sentence2"]
        row = ["0", "main-captions", "MSRvid", "2012test", "0001", "none", "none", "A cat.",
               "A dog."]
        write(tmp_path, "train.tsv", [header + ["score"], row + ["3.800"]])
        write(tmp_path, "dev.tsv", [header + ["score"], row + ["high"]])
        processor = get_processor("stsb")
        self.assertEqual(processor.name, "STS-B")
        self.assertTrue(processor.is_regression)
        self.assertIsNone(processor.labels)
        self.assertAllClose(processor.train_examples(str(tmp_path))[0].label,
                            3.8, rtol=1e-6, atol=1e-12)
        with self.assertRaisesRegex(ValueError, r"dev\.tsv:2: score 'high' is not a number"):
            processor.dev_sets(str(tmp_path))

    @parameterized.parameters([
        ("SST-2", ["sentence"], "1", "SST-2"),
        ("qnli", ["question", "sentence"], "not_entailment", "QNLI"),
        ("RTE", ["sentence1", "sentence2"], "entailment", "RTE"),
        ("wnli", ["sentence1", "sentence2"], "0", "WNLI"),
        ("sst2", ["sentence"], "0", "SST-2"),
    ])
    def test_headed_tasks_read_their_columns(self, task, columns, label, test_stem):
        tmp_path = self.tmp_path()
        texts = ["The cat sat.", "It ran."][:len(columns)]
        leading = [] if columns == ["sentence"] else ["index"]
        labelled = [leading + columns + ["label"], (["0"] if leading else []) + texts + [label]]
        write(tmp_path, "train.tsv", labelled)
        write(tmp_path, "dev.tsv", labelled)
        write(tmp_path, "test.tsv", [["index", *columns], ["0", *texts]])
        processor = get_processor(task)
        example = processor.dev_sets(str(tmp_path))["dev"][0]
        self.assertEqual((example.text_a, example.text_b, example.label), (
            texts[0], texts[1] if len(texts) > 1 else None, label))
        self.assertEqual(processor.test_sets(str(tmp_path))[test_stem][0].guid, "0")

    def test_reading_errors_name_file_line_and_layout(self):
        tmp_path = self.tmp_path()
        with self.assertRaisesRegex(ValueError, "unknown task 'xnli'.*CoLA.*tsv"):
            get_processor("xnli")
        processor = get_processor("rte")
        with self.assertRaisesRegex(FileNotFoundError,
                                    r"train\.tsv: no such file; expected the GLUE "
                                    r"layout for RTE: <data_dir>/\{train\.tsv, dev"):
            processor.train_examples(str(tmp_path))
        header = ["index", "sentence1", "sentence2", "label"]
        write(tmp_path, "train.tsv", [header, ["0", "a", "b", "entailment"],
                                      ["1", "a", "b", "maybe"]])
        with self.assertRaisesRegex(ValueError, r"train\.tsv:3: label 'maybe' is not one of "
                                                r"\['entailment', 'not_entailment'\]"):
            processor.train_examples(str(tmp_path))
        write(tmp_path, "train.tsv", [header, ["0", "a", "b"]])
        with self.assertRaisesRegex(ValueError,
                                    r"train\.tsv:2: 3 tab-separated columns, at least 4"):
            processor.train_examples(str(tmp_path))
        write(tmp_path, "dev.tsv", [header])
        with self.assertRaisesRegex(ValueError, r"dev\.tsv: holds no examples"):
            processor.dev_sets(str(tmp_path))
        write(tmp_path, "dev.tsv", [["index", "premise", "hypothesis", "label"]])
        with self.assertRaisesRegex(ValueError, r"dev\.tsv: no column 'sentence1' in the header"):
            processor.dev_sets(str(tmp_path))
        (tmp_path / "dev.tsv").write_bytes(b"index\tsentence1\tsentence2\tlabel\n0\ta\xff\tb\t0\n")
        with self.assertRaisesRegex(ValueError, r"dev\.tsv:2: not valid UTF-8"):
            processor.dev_sets(str(tmp_path))

    def test_user_tsv_by_name_with_labels_from_training_data(self):
        tmp_path = self.tmp_path()
        header = ["id", "review", "stars"]
        write(tmp_path, "train.tsv", [header, ["a", "good", "pos"], ["b", "bad", "neg"],
                                      ["c", "fine", "pos"]])
        write(tmp_path, "dev.tsv", [header, ["d", "meh", "mixed"]])
        processor = get_processor("tsv", tsv_text_a_column="review", tsv_label_column="stars")
        self.assertEqual(processor.name, "TSV")
        self.assertFalse(processor.is_regression)
        with self.assertRaisesRegex(RuntimeError, "train_examples"):
            processor.labels
        with self.assertRaisesRegex(ValueError, r"dev\.tsv:2: label 'mixed' is not one of "
                                                r"\['neg', 'pos'\]"):
            processor.dev_sets(str(tmp_path))
        self.assertEqual(processor.labels, ["neg", "pos"])
        self.assertEqual(processor.train_examples(str(tmp_path))[0],
                         InputExample("train-0", "good", None,
                                                                           "pos"))

    def test_user_tsv_headerless_pairs_with_given_labels(self):
        tmp_path = self.tmp_path()
        write(tmp_path, "train.tsv", [["x", "first", "second", "yes"]])
        write(tmp_path, "test.tsv", [["x", "third", "fourth"]])
        processor = get_processor("tsv", tsv_text_a_column="1", tsv_text_b_column=2,
                                  tsv_label_column="3", tsv_labels="yes, no", tsv_has_header=False)
        self.assertEqual(processor.labels, ["yes", "no"])
        self.assertEqual(processor.train_examples(str(tmp_path)), [
            InputExample("train-0", "first", "second", "yes")])
        self.assertEqual(processor.test_sets(str(tmp_path)), {
            "test": [InputExample("test-0", "third", "fourth", None)]})
        with self.assertRaisesRegex(ValueError, "0-based positions"):
            get_processor("tsv", tsv_text_a_column="text", tsv_label_column=0, tsv_has_header=False)
        with self.assertRaisesRegex(ValueError, "label column"):
            get_processor("tsv", tsv_text_a_column="text")

    def test_user_tsv_label_sets_read_and_packed_multi_hot(self):
        tmp_path = self.tmp_path()
        header = ["text", "topics"]
        write(tmp_path, "train.tsv", [header, ["the cat", "pets|cats"], ["a dog", " pets "],
                                      ["it ran", ""], ["the mat", "cats|cats"]])
        write(tmp_path, "dev.tsv", [header, ["a cat", "cats|birds"]])
        processor = get_processor("tsv", tsv_text_a_column="text", tsv_label_column="topics",
                                  tsv_label_delimiter="|")
        train = processor.train_examples(str(tmp_path))
        self.assertEqual([e.label for e in train], [("pets", "cats"), ("pets",), (), ("cats",)])
        self.assertEqual(processor.labels, ["cats", "pets"])  # the training sets' union, sorted
        with self.assertRaisesRegex(ValueError, r"dev\.tsv:2: label 'birds' is not one of "
                                                r"\['cats', 'pets'\]"):
            processor.dev_sets(str(tmp_path))
        features, _ = convert_examples(train, self.tokenizer, 8, processor.labels,
                                       multi_label=True)
        self.assertAllEqual(features["label_ids"], [[1, 1], [0, 1], [0, 0], [1, 0]])
        self.assertEqual(features["label_ids"].dtype, np.float32)
        for delimiter in ("", " ", "\t"):
            with self.assertRaisesRegex(ValueError, "^tsv_label_delimiter must be visible"):
                get_processor("tsv", tsv_text_a_column="text", tsv_label_column="topics",
                              tsv_label_delimiter=delimiter)

    def test_convert_examples_packs_pairs_and_counts_truncation(self):
        vocab = self.tokenizer.vocab
        examples = [InputExample("0", "The cat sat on the mat.", "A dog", "1"),
                    InputExample("1", "cat", "a dog ran on the mat", "0"),
                    InputExample("2", "cat sat", None, None)]
        features, num_truncated = convert_examples(examples, self.tokenizer, 8, ["0", "1"])
        self.assertEqual({name: (array.shape, array.dtype) for name, array in features.items()}, {
            "input_ids": ((3, 8), np.int32), "input_mask": ((3, 8), np.int32),
            "segment_ids": ((3, 8), np.int32), "label_ids": ((3,), np.int32)})
        ids = lambda *tokens: [vocab[t] for t in tokens]  # noqa: E731
        # 7 + 2 tokens for 5 places: the longer text loses tokens until it is no longer longer.
        self.assertEqual(features["input_ids"][0].tolist(), ids("[CLS]", "the", "cat", "sat",
                                                                "[SEP]", "a",
                                                                "dog", "[SEP]"))
        self.assertEqual(features["input_ids"][1].tolist(), ids("[CLS]", "cat", "[SEP]", "a",
                                                                "dog", "ran",
                                                                "on", "[SEP]"))
        self.assertEqual(features["segment_ids"][1].tolist(), [0, 0, 0, 1, 1, 1, 1, 1])
        self.assertEqual(features["input_ids"][2].tolist(),
                         ids("[CLS]", "cat", "sat", "[SEP]") + [0] * 4)
        self.assertEqual(features["input_mask"][2].tolist(), [1] * 4 + [0] * 4)
        self.assertEqual(features["label_ids"].tolist(), [1, 0, 0])
        self.assertEqual(num_truncated, 2)
        with self.assertRaisesRegex(ValueError, "example 0: label '1' is not one of"):
            convert_examples(examples[:1], self.tokenizer, 8, ["neg", "pos"])

    def test_convert_examples_empty_second_text_is_a_single_text(self):
        """As the original's `if example.text_b:`: no second [SEP], no truncation counted."""
        examples = [InputExample("0", "the cat sat on the mat", text_b,
                                 "1") for text_b in ("", " ")]
        features, num_truncated = convert_examples(examples, self.tokenizer, 8, ["0", "1"])
        single, _ = convert_examples([InputExample("0", "the cat sat on the mat", None, "1")],
                                     self.tokenizer, 8, ["0", "1"])
        for row in range(2):
            for name in ("input_ids", "input_mask", "segment_ids"):
                self.assertEqual(features[name][row].tolist(), single[name][0].tolist(), msg=name)
        self.assertEqual(num_truncated, 0)

    def test_convert_examples_regression_labels_are_float(self):
        examples = [InputExample("0", "cat", "dog", 4.25), InputExample("1", "cat", "dog", None)]
        result = convert_examples(examples, self.tokenizer, 6, None)
        self.assertEqual(result.features["label_ids"].dtype, np.float32)
        self.assertEqual(result.features["label_ids"].tolist(), [4.25, 0.0])
        self.assertEqual(result.num_truncated, 0)

    def test_write_submission_layouts(self):
        tmp_path = self.tmp_path()
        path = write_submission(tmp_path / "out", "MNLI-m", [[0.1, 0.7, 0.2], [0.8, 0.1, 0.1]],
                                ["contradiction", "entailment", "neutral"], indices=["5", "9"])
        self.assertEqual(path, os.path.join(str(tmp_path / "out"), "MNLI-m.tsv"))
        with open(path) as handle:
            self.assertEqual(handle.read(), "index\tprediction\n5\tentailment\n9\tcontradiction\n")
        path = write_submission(tmp_path / "STS-B.tsv", "STS-B", [[5.7], [-0.2], [2.34567]], None)
        with open(path) as handle:
            self.assertEqual(handle.read(), "index\tprediction\n0\t5.000\n1\t0.000\n2\t2.346\n")
        path = write_submission(str(tmp_path), "WNLI", [0, 0, 1], ["0", "1"], majority_label="1")
        with open(path) as handle:
            self.assertEqual(handle.read().splitlines()[1:], ["0\t1", "1\t1", "2\t1"])
        self.assertEqual(sorted(os.listdir(tmp_path)),
                         ["STS-B.tsv", "WNLI.tsv", "out"])  # no temporary left
        with self.assertRaisesRegex(ValueError, "2 predictions for 3 indices"):
            write_submission(str(tmp_path), "RTE", [0, 1], ["a", "b"], indices=["0", "1", "2"])
        with self.assertRaisesRegex(ValueError, r"label ids outside 0\.\.1"):
            write_submission(str(tmp_path), "RTE", [0, 2], ["a", "b"])
        with self.assertRaisesRegex(ValueError, "majority label 'x'"):
            write_submission(str(tmp_path), "WNLI", [0], ["0", "1"], majority_label="x")

    def test_majority_class_counts_labels(self):
        examples = [InputExample(str(i), "t", None, label) for i, label in enumerate("10110")]
        self.assertEqual(majority_class(examples), "1")
        self.assertEqual(majority_class(examples[:2]),
                         "0")  # a tie goes to the first label in sorted order
        with self.assertRaisesRegex(ValueError, "no labelled examples"):
            majority_class([InputExample("0", "t", None, None)])

    def test_both_orders_packs_each_pair_forward_and_backward(self):
        examples = [InputExample("0", "the cat sat", "a dog ran", "1"),
                    InputExample("1", "it is", "the mat", "0")]
        both = convert_both_orders(examples, self.tokenizer, 16, ["0", "1"])
        forward = convert_examples(examples, self.tokenizer, 16, ["0", "1"]).features
        swapped = convert_examples([InputExample(e.guid, e.text_b, e.text_a, e.label)
                                    for e in examples], self.tokenizer, 16, ["0", "1"]).features
        for key in ("input_ids", "input_mask", "segment_ids"):
            self.assertEqual(both.features[key].shape, (2, 2, 16))
            self.assertAllEqual(both.features[key][:, 0], forward[key])
            self.assertAllEqual(both.features[key][:, 1], swapped[key])
        self.assertAllEqual(both.features["label_ids"], [1, 0])
        with self.assertRaisesRegex(ValueError, "one text, the first '2'"):
            convert_both_orders([*examples, InputExample("2", "the cat", None, "1")],
                                self.tokenizer, 16,
                                ["0", "1"])


if __name__ == "__main__":
    tf.test.main()
