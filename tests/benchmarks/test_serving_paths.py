"""The served paths' own logic: LiteRT's in-graph packing."""

import tensorflow as tf

from benchmarks import serving_paths
from tests.fixtures import TestCase
from text.sentence_pairs import pack_ragged
from text.tokenization import FullTokenizer

# The original tokenizer's unit-test vocabulary.
VOCAB = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", ","]


class ServingPathsTest(TestCase):

    def test_litert_packing_gives_the_ids_and_mask_of_our_packing_cut_to_the_longest_row(self):
        path = self.tmp_path() / "vocab.txt"
        path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
        tokenizer = FullTokenizer(str(path), do_lower_case=True)
        texts = tf.constant(["UNwant\u00e9d,running", "want", "", "want want want want"])
        packed = serving_paths.fast_bert_packing(tokenizer, 6)(texts)
        ids, _ = tokenizer.tokenize_batch(texts)
        expected = pack_ragged(ids, None, 6, tokenizer.cls_id, tokenizer.sep_id)
        longest = 6  # the first and last texts fill the 6 positions
        for name in ("input_ids", "input_mask", "segment_ids"):
            self.assertAllEqual(packed[name], expected[name][:, :longest])
        self.assertAllEqual(packed["input_ids"][1], [1, 3, 2, 0, 0, 0])
        short = serving_paths.fast_bert_packing(tokenizer, 6)(tf.constant(["want", ""]))
        self.assertAllEqual(short["input_ids"], [[1, 3, 2], [1, 2, 0]])  # the longest row: 3
        self.assertAllEqual(short["input_mask"], [[1, 1, 1], [1, 1, 0]])


if __name__ == "__main__":
    tf.test.main()
