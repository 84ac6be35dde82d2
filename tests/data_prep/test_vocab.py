"""WordPiece vocabulary learning: Google's layout, size limits, errors, real use."""

import os
from unittest import mock

import tensorflow as tf

from data_prep import vocab
from tests.fixtures import TestCase

STEMS = ["play", "walk", "talk", "jump", "look", "cook", "work", "help", "kick", "pick"]
COUNTS = {stem + suffix: 3 for stem in STEMS for suffix in ("", "ing", "ed", "s")}
COUNTS.update({"the": 500, "zebra": 1})
CHARS = sorted(set("".join(COUNTS)))


class VocabTest(TestCase):

    def test_reserved_layout_matches_google_uncased(self):
        reserved = vocab.reserved_tokens(994)
        self.assertLen(reserved, 999)
        self.assertEqual(reserved[0], "[PAD]")
        self.assertEqual(reserved[1], "[unused0]")
        self.assertEqual(reserved[99], "[unused98]")
        self.assertEqual(reserved[100:104], ["[UNK]", "[CLS]", "[SEP]", "[MASK]"])
        self.assertEqual(reserved[104], "[unused99]")
        self.assertEqual(reserved[998], "[unused993]")

    def test_few_unused_slots_all_come_before_specials(self):
        self.assertEqual(vocab.reserved_tokens(2), ["[PAD]", "[unused0]", "[unused1]",
                                                    "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
        self.assertEqual(vocab.reserved_tokens(0), ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
        with self.assertRaisesRegex(ValueError, "^num_unused must be >= 0, got -1$"):
            vocab.reserved_tokens(-1)

    def test_learned_vocabulary_layout_and_size(self):
        tokens = vocab.learn_vocabulary(COUNTS, vocab_size=8 + 2 * len(CHARS) + 14, num_unused=3)
        self.assertTrue(len(tokens) == len(set(tokens)) == 8 + 2 * len(CHARS) + 14)
        self.assertEqual(tokens[:8], vocab.reserved_tokens(3))
        self.assertEqual(tokens[8:8 + len(CHARS)], CHARS)
        self.assertEqual(tokens[-len(CHARS):], ["##" + char for char in CHARS])
        learned = tokens[8 + len(CHARS):-len(CHARS)]
        self.assertEqual(learned[0], "the")  # by falling count
        self.assertIn("##ing", learned)
        self.assertIn("##ed", learned)
        self.assertNotIn("zebra", learned)
        self.assertNotIn("playing", learned)  # rare whole words lose

    def test_vocabulary_is_smaller_when_the_corpus_cannot_fill_it(self):
        tokens = vocab.learn_vocabulary(COUNTS, vocab_size=5000, num_unused=3, min_count=2)
        self.assertLen(tokens, 8 + 2 * len(CHARS) + 41)  # "the" and the 40 words seen 3 times
        self.assertIn("playing", tokens)
        self.assertNotIn("zebra", tokens)

    def test_vocab_size_errors_name_the_argument(self):
        with self.assertRaisesRegex(ValueError, "^vocab_size=999 leaves no room"):
            vocab.learn_vocabulary(COUNTS, vocab_size=999)
        with self.assertRaisesRegex(ValueError,
                                    rf"^vocab_size=20 is too small.*{len(CHARS)} characters"):
            vocab.learn_vocabulary(COUNTS, vocab_size=20, num_unused=0)
        with self.assertRaisesRegex(ValueError, "no words"):
            vocab.learn_vocabulary({}, vocab_size=2000)

    def test_write_vocab_is_atomic(self):
        tmp_path = self.tmp_path()
        path = tmp_path / "vocab.txt"
        vocab.write_vocab(["[PAD]", "a", "##b"], str(path))
        self.assertEqual(path.read_text(), "[PAD]\na\n##b\n")
        self.enter_context(mock.patch.object(vocab.os, "replace",
                                             lambda *args: (_ for _ in ()).throw(OSError("disk"))))
        with self.assertRaisesRegex(OSError, "disk"):
            vocab.write_vocab(["x"], str(path))
        self.assertEqual(path.read_text(), "[PAD]\na\n##b\n")
        self.assertEqual(os.listdir(tmp_path), ["vocab.txt"])

    def test_unwritable_output_is_named(self):
        tmp_path = self.tmp_path()
        with self.assertRaisesRegex(OSError, "^output_file .*missing"):
            vocab.write_vocab(["x"], str(tmp_path / "missing" / "vocab.txt"))

    def test_input_globs_must_each_match(self):
        tmp_path = self.tmp_path()
        (tmp_path / "a.txt").write_text("x\n")
        (tmp_path / "b.txt").write_text("y\n")
        files = vocab.expand_input_patterns(f"{tmp_path}/*.txt, {tmp_path}/a.txt")
        self.assertEqual(files,
                         [str(tmp_path / "a.txt"), str(tmp_path / "b.txt"),
                          str(tmp_path / "a.txt")])
        with self.assertRaisesRegex(FileNotFoundError, r"^input_file=.*/nothing\*\.txt matches no files$"):
            vocab.expand_input_patterns(f"{tmp_path}/a.txt,{tmp_path}/nothing*.txt")
        with self.assertRaisesRegex(ValueError, "^input_file is empty"):
            vocab.expand_input_patterns(" , ")


if __name__ == "__main__":
    tf.test.main()
