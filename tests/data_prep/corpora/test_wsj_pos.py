"""The WSJ part-of-speech data: parsing, the fixed split, atomic writes, the real file."""

import pytest
import tensorflow as tf
from absl.testing import parameterized

from data_prep.corpora import wsj_pos
from data_prep.corpora.wsj_pos import parse_tagged_line, read_sentences, tag_set, write_conll_dir
from tests.fixtures import TestCase

pytestmark = pytest.mark.assets

SENTENCES = max(end for _, end in wsj_pos.SPLITS.values())


class WsjPosTest(TestCase, parameterized.TestCase):

    def test_parse_tagged_line_splits_at_the_last_slash(self):
        self.assertEqual(parse_tagged_line("Rates/NNS rose/VBD 1/2/CD ./.", "x"), [
            ("Rates", "NNS"), ("rose", "VBD"), ("1/2", "CD"), (".", ".")])

    @parameterized.parameters("rose", "/VBD", "rose/")
    def test_parse_tagged_line_names_the_line_and_token(self, token):
        with self.assertRaisesRegex(ValueError,
                                    rf"corpus.txt line 7: '{token}' is not of the form"):
            parse_tagged_line(f"Rates/NNS {token}", "corpus.txt line 7")

    def test_split_is_fixed_disjoint_and_complete(self):
        tmp_path = self.tmp_path()
        lines = [f"word{i}/NN ,/, end/VB" for i in range(SENTENCES)]
        folder = write_conll_dir(lines, tmp_path / "wsj", "handmade")
        splits = {name: read_sentences(folder / f"{name}.txt") for name in wsj_pos.SPLITS}
        self.assertEqual({name: len(rows) for name, rows in splits.items()}, {
            "train": 801, "valid": 100, "test": 100})
        firsts = [sentence[0][0] for name in ("train", "valid",
                                              "test") for sentence in splits[name]]
        self.assertEqual(firsts,
                         [f"word{i}" for i in range(SENTENCES)])  # file order, each line once
        self.assertEqual(splits["valid"][0], [("word801", "B-NN"), (",", "B-,"), ("end", "B-VB")])
        self.assertEqual(tag_set(folder), ["B-,", "B-NN", "B-VB"])
        again = write_conll_dir(lines, tmp_path / "wsj", "handmade")
        self.assertEqual((again / "test.txt").read_text(), (folder / "test.txt").read_text())

    @parameterized.parameters([
        (["a/DT"] * 5, "handmade: 5 sentences, expected 1001"),
        (["a/DT"] * 500 + ["a DT"] + ["a/DT"] * 500, r"handmade line 501: 'a' is not"),
    ])
    def test_bad_input_writes_nothing(self, lines, message):
        tmp_path = self.tmp_path()
        with self.assertRaisesRegex(ValueError, message):
            write_conll_dir(lines, tmp_path / "wsj", "handmade")
        self.assertEqual(list(tmp_path.iterdir()), [])

    def test_real_wsj_sentences(self):
        folder = wsj_pos.wsj_conll_dir()
        splits = {name: read_sentences(folder / f"{name}.txt") for name in wsj_pos.SPLITS}
        self.assertEqual([len(splits[name]) for name in ("train", "valid", "test")],
                         [801, 100, 100])
        texts = {name: {" ".join(word for word, _ in s) for s in rows} for name,
                 rows in splits.items()}
        self.assertFalse(texts["valid"] & texts["test"])
        tags = tag_set(folder)
        self.assertLessEqual({"B-NN", "B-VBD", "B-LS", "B-SYM"}, set(tags))
        self.assertLen(tags, 44)


if __name__ == "__main__":
    tf.test.main()
