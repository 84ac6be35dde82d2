"""CoNLL reading, WordPiece windows with first-sub-token labels, and predictions back to words."""

import os

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from data_prep.datasets.conll import (Sentence, build_windows, check_entity_tags, detect_scheme,
                                      label_list, predictions_to_tags, read_conll, read_splits,
                                      windows_to_arrays, write_conll_predictions)
from tests.fixtures import TestCase
from text.tag_schemes import convert_iob1_to_iob2
from text.tokenization import FullTokenizer

pytestmark = pytest.mark.assets

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["john", "##son", "lives", "in", "paris", "."] + [f"w{i}" for i in range(40)]
LABELS = {"O": 0, "B-PER": 1, "I-PER": 2, "B-LOC": 3}


def write(tmp_path, text, name="data.txt", newline="\n"):
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode("utf-8"))
    return str(path)


CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP B-LOC
"""


class ConllTest(TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        """One small vocabulary for the class; no test changes the tokenizer."""
        super().setUpClass()
        root = cls.class_folder()
        vocab = root / "vocab.txt"
        vocab.write_text("\n".join(SPECIAL + WORDS) + "\n", encoding="utf-8")
        cls.tokenizer = FullTokenizer(str(vocab), do_lower_case=True)

    @parameterized.parameters("\n", "\r\n")
    def test_reads_documents_sentences_and_sources(self, newline):
        path = write(self.tmp_path(), CONLL + "\n\n\n", newline=newline)  # trailing blank lines
        sentences = read_conll(path)
        self.assertEqual([s.words for s in sentences], [["EU", "rejects"], ["Peter", "Blackburn"],
                                                        ["BRUSSELS"]])
        self.assertEqual([s.tags for s in sentences],
                         [["B-ORG", "O"], ["B-PER", "I-PER"], ["B-LOC"]])
        self.assertEqual([s.document_index for s in sentences], [0, 0, 1])
        self.assertEqual([s.source for s in sentences], [f"{path}:3", f"{path}:6", f"{path}:11"])
        self.assertEqual(read_conll(path, tag_column=1)[0].tags, ["NNP", "VBZ"])

    def test_counts_of_read_and_skipped_lines_are_logged(self):
        path = write(self.tmp_path(), CONLL)
        with self.assertLogs("absl", "INFO") as logs:
            read_conll(path)
        self.assertRegex(logs.output[-1], f"{path}: read 3 sentences, 5 tokens in 2 "
                                          "document\\(s\\); skipped 2 -DOCSTART- line\\(s\\)")

    def test_splits_under_the_shared_task_s_names_or_the_usual_ones(self):
        folder = self.tmp_path()
        for name in ("eng.train", "eng.testa", "eng.testb"):
            write(folder, CONLL, name=name)
        splits = read_splits(str(folder), ["train", "valid", "test"])
        self.assertEqual({name: split[0].source for name, split in splits.items()},
                         {name: f"{folder}/{file}:3" for name, file in (
                             ("train", "eng.train"), ("valid", "eng.testa"),
                             ("test", "eng.testb"))})
        write(folder, CONLL, name="test.txt")  # the usual name comes first
        self.assertEqual(read_splits(str(folder), ["test"])["test"][0].source,
                         f"{folder}/test.txt:3")
        with self.assertRaisesRegex(FileNotFoundError, "valid split: no file .*valid.txt or "
                                                       ".*dev.txt or .*eng.testa"):
            read_splits(str(self.tmp_path()), ["valid"])

    def test_two_columns_under_a_four_column_docstart_without_final_blank_line(self):
        text = "-DOCSTART- -X- -X- O\nJohn B-PER\nran O\n\n\nHome O"
        sentences = read_conll(write(self.tmp_path(), text))
        self.assertEqual([(s.words, s.tags, s.document_index) for s in sentences], [
            (["John", "ran"], ["B-PER", "O"], 0), (["Home"], ["O"], 0)])

    def test_bad_files_are_named(self):
        tmp_path = self.tmp_path()
        path = write(tmp_path, "EU NNP B-NP B-ORG\nrejects VBZ O\n")
        with self.assertRaisesRegex(ValueError, f"{path}:2: 3 columns where the first token line"):
            read_conll(path)
        for text in ["", "\n\n", "-DOCSTART- -X- -X- O\n\n"]:
            path = write(tmp_path, text, name="empty.txt")
            with self.assertRaisesRegex(ValueError, f"{path}: no sentences"):
                read_conll(path)
        with self.assertRaisesRegex(ValueError, r"one\.txt:1: 1 column"):
            read_conll(write(tmp_path, "word\n", name="one.txt"))

    def test_a_file_without_the_ner_column_is_named_not_trained_on_its_chunks(self):
        tmp_path = self.tmp_path()
        path = write(tmp_path, "-DOCSTART- -X- -X-\n\nEU NNP B-NP\nrejects VBZ B-VP\n"
                               "German JJ B-NP\n", name="train.txt")
        with self.assertRaisesRegex(ValueError,
                                    f"^{path}:3: the tag column \\(column 3 of 3\\) holds chunk "
                                    "tags \\(NP, VP\\), no entity tags: the NER column is "
                                    "missing"):
            read_conll(path)
        entities = read_conll(write(tmp_path, "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n"))
        self.assertEqual(entities[0].tags, ["B-ORG", "O"])
        self.assertEqual(entities[0].columns, 4)

    def test_a_training_file_without_entities_is_refused_naming_it(self):
        path = write(self.tmp_path(), "-DOCSTART- -X- -X- O\n\nEU NNP B-NP O\nrejects VBZ "
                                       "B-VP O\n\nGerman JJ B-NP O\n", name="train.txt")
        sentences = read_conll(path)
        with self.assertRaisesRegex(ValueError, f"^{path}: no entity tag to learn from: all 3 "
                                                r"tags of its 2 sentence\(s\) in the tag column "
                                                r"\(column 4 of 4\) are O; a training file "
                                                "needs B-TYPE / I-TYPE tags"):
            check_entity_tags(sentences, training=True)

    def test_a_dev_file_without_entities_is_kept_with_a_warning(self):
        path = write(self.tmp_path(), "EU O\nrejects O\n", name="valid.txt")
        sentences = read_conll(path)
        with self.assertLogs("absl", "WARNING") as logs:
            check_entity_tags(sentences, training=False)
        self.assertRegex(logs.output[0], f"{path}: no entity tag: all 2 tags of its 1 "
                                          r"sentence\(s\) .*are O; entity precision, recall "
                                          "and F1 on it are 0")
        with self.assertNoLogs("absl", "WARNING"):  # one entity is enough, in any split
            for training in (True, False):
                check_entity_tags(read_conll(write(self.tmp_path(), CONLL)), training)

    def test_labels_and_schemes(self):
        iob1 = [Sentence(["a", "b", "c", "d"], ["I-PER", "I-PER", "B-PER", "O"], 0, "x:1"),
                Sentence(["e", "f"], ["I-LOC", "I-PER"], 0, "x:6")]
        self.assertEqual(label_list(iob1), ["O", "B-PER", "I-LOC", "I-PER"])
        self.assertEqual(detect_scheme(iob1), "IOB1")
        self.assertEqual(convert_iob1_to_iob2(iob1[0].tags), ["B-PER", "I-PER", "B-PER", "O"])
        self.assertEqual(convert_iob1_to_iob2(iob1[1].tags), ["B-LOC", "B-PER"])
        iob2 = [Sentence(s.words, convert_iob1_to_iob2(s.tags), 0, s.source) for s in iob1]
        self.assertEqual(detect_scheme(iob2), "IOB2")

    def test_label_on_first_sub_token_with_real_vocab(self):
        from data_prep.corpora.assets import minilm_dir

        real = FullTokenizer(str(minilm_dir() / "vocab.txt"), do_lower_case=True)
        self.assertEqual(real.tokenize("Johanson"), ["johan", "##son"])
        sentence = Sentence(["Johanson", "visits", "U.S.", "\x01"], ["B-PER", "O", "B-LOC", "O"],
                            0, "t:1")
        [window] = build_windows([sentence], real, 16, LABELS)
        pieces = ["[CLS]", "johan", "##son", "visits", "u", ".", "s", ".", "[UNK]", "[SEP]"]
        self.assertEqual(window.input_ids, real.convert_tokens_to_ids(pieces) + [0] * 6)
        self.assertEqual(window.label_ids, [-1, 1, -1, 0, 3, -1, -1, -1, 0] + [-1] * 7)
        self.assertEqual(window.word_positions, [1, 3, 4, 8])
        self.assertEqual(window.input_mask, [1] * 10 + [0] * 6)
        self.assertEqual(window.segment_ids, [0] * 16)

    def test_long_sentence_is_split_and_each_word_scored_once(self):
        tokenizer = self.tokenizer
        words = [f"w{i}" for i in range(25)]
        words[10] = "Johnson"  # two pieces: 26 sub-tokens in all
        tags = ["B-PER" if i % 3 else "O" for i in range(25)]
        sentences = [Sentence(["Paris"], ["B-LOC"], 0, "t:1"), Sentence(words, tags, 0, "t:3")]
        with self.assertLogs("absl", "INFO") as logs:
            windows = build_windows(sentences, tokenizer, 10, LABELS, stride=4)
        self.assertRegex(logs.output[-1], "1 of 2 sentences are longer than one window "
                                          r"\(8 sub-tokens\): read through overlapping "
                                          "windows, none truncated; 7 windows in all")
        long_windows = [w for w in windows if w.sentence_index == 1]
        # cores start at 0, 4, ..., 20; the last one widened leftwards
        self.assertLen(long_windows, 6)
        for window in long_windows:
            self.assertLen(window.input_ids, 10)
            self.assertEqual(window.input_mask, [1] * 10)
        scored = [(k, w) for w in long_windows for k, p in enumerate(w.word_positions) if p >= 0]
        self.assertEqual(sorted(k for k, _ in scored), list(range(25)))
        for k, window in scored:
            position = window.word_positions[k]
            self.assertEqual(window.label_ids[position], LABELS[tags[k]])
            self.assertEqual(window.input_ids[position],
                             tokenizer.vocab[tokenizer.tokenize(words[k])[0]])
        self.assertEqual(sum(label >= 0 for w in long_windows for label in w.label_ids), 25)
        # Word 6 sits at the right edge of window 0 (one token after it) and in the middle of
        # window 1 (two before, five after): it is scored where its context is larger.
        self.assertEqual(long_windows[0].word_positions[6], -1)
        self.assertEqual(long_windows[1].word_positions[6], 3)
        arrays = windows_to_arrays(windows)
        self.assertEqual(set(arrays), {"input_ids", "input_mask", "segment_ids", "label_ids"})
        for array in arrays.values():
            self.assertEqual(array.dtype, np.int32)
            self.assertEqual(array.shape, (7, 10))
        id_to_label = {i: tag for tag, i in LABELS.items()}
        predicted_ids = np.maximum(arrays["label_ids"], 0)
        self.assertEqual(predictions_to_tags(windows, predicted_ids, sentences, id_to_label),
                         [s.tags for s in sentences])
        logits = np.eye(len(LABELS))[predicted_ids]
        self.assertEqual(predictions_to_tags(windows, logits, sentences, id_to_label)[1], tags)

    def test_document_context_fills_window_but_labels_only_the_target(self):
        tokenizer = self.tokenizer
        doc = [Sentence([f"w{i}", f"w{i + 1}", f"w{i + 2}"], ["O", "B-PER", "O"], 0, f"t:{i}")
               for i in (0, 3, 6, 9, 12)]
        other = Sentence(["Paris"], ["B-LOC"], 1, "u:1")
        windows = build_windows(doc + [other], tokenizer, 2 + 9, LABELS, document_context=True)
        self.assertLen(windows, 6)
        self.assertEqual([w.sentence_index for w in windows], list(range(6)))
        ids = {word: tokenizer.vocab[word] for word in WORDS}
        middle = windows[2]  # target w6 w7 w8, three context tokens on each side
        self.assertEqual(middle.input_ids, [2] + [ids[f"w{i}"] for i in range(3, 12)] + [3])
        self.assertEqual(middle.label_ids, [-1] * 4 + [0, 1, 0] + [-1] * 4)
        self.assertEqual(middle.word_positions, [4, 5, 6])
        self.assertEqual(middle.segment_ids, [0] * 11)
        first = windows[0]  # nothing before: context comes from the right only
        self.assertEqual(first.input_ids, [2] + [ids[f"w{i}"] for i in range(9)] + [3])
        self.assertEqual(first.word_positions, [1, 2, 3])
        # another document adds nothing
        self.assertEqual(windows[5].input_ids[:3], [2, ids["paris"], 3])
        self.assertEqual(windows[5].input_mask, [1] * 3 + [0] * 8)

    @parameterized.parameters(False, True)
    def test_a_sentence_without_words_is_skipped_and_counted(self, document_context):
        sentences = [Sentence(["Paris"], ["B-LOC"], 0, "t:1"), Sentence([], [], 0, "t:3"),
                     Sentence(["john", "lives"], ["B-PER", "O"], 0, "t:4"),
                     Sentence([], [], 0, "t:6")]
        with self.assertLogs("absl", "WARNING") as logs:
            windows = build_windows(sentences, self.tokenizer, 8, LABELS,
                                    document_context=document_context)
        self.assertRegex(logs.output[0], r"2 sentence\(s\) without words skipped "
                                         r"\(nothing to tag\), the first at t:3")
        self.assertEqual([w.sentence_index for w in windows], [0, 2])
        self.assertEqual(windows[1].word_positions,
                         [2, 3] if document_context else [1, 2])
        predicted = np.maximum(windows_to_arrays(windows)["label_ids"], 0)
        id_to_label = {i: tag for tag, i in LABELS.items()}
        self.assertEqual(predictions_to_tags(windows, predicted, sentences, id_to_label),
                         [["B-LOC"], [], ["B-PER", "O"], []])

    def test_unknown_label_names_sentence_and_tag(self):
        sentences = [Sentence(["john"], ["B-MISC"], 0, "test.txt:7")]
        with self.assertRaisesRegex(ValueError,
                                    r"test\.txt:7: label 'B-MISC' not seen in training"):
            build_windows(sentences, self.tokenizer, 8, LABELS)

    def test_unknown_label_names_its_own_line_not_the_sentence_start(self):
        path = write(self.tmp_path(), "Peter B-PER\nvisits O\nParis B-LOC\n\nBonn B-MISC\n")
        sentences = read_conll(path)
        with self.assertRaisesRegex(ValueError,
                                    r"data\.txt:3: label 'B-LOC' not seen in training"):
            build_windows(sentences, self.tokenizer, 8, {"O": 0, "B-PER": 1})

    def test_prediction_file_layout(self):
        tmp_path = self.tmp_path()
        sentences = [Sentence(["EU", "rejects"], ["B-ORG", "O"], 0, "x:1"),
                     Sentence(["Peter"], ["B-PER"], 0, "x:4")]
        path = tmp_path / "predictions.txt"
        write_conll_predictions(path, sentences, [["B-ORG", "B-PER"], ["O"]])
        self.assertEqual(path.read_bytes(),
                         b"EU B-ORG B-ORG\nrejects O B-PER\n\nPeter B-PER O\n\n")
        self.assertEqual(os.listdir(tmp_path), ["predictions.txt"])
        with self.assertRaisesRegex(ValueError, "x:4: 2 predicted tags for 1 words"):
            write_conll_predictions(path, sentences, [["O", "O"], ["O", "O"]])
        self.assertEqual(os.listdir(tmp_path), ["predictions.txt"])


if __name__ == "__main__":
    tf.test.main()
