"""text.whitespace_words: the original SQuAD reader's words, in Python and in the graph."""

import tensorflow as tf

from text.whitespace_words import split_words, whitespace_words

TEXTS = [" ab  c\u202fd\te\n", "5\u00a0km and\u3000more", "a \u3000 b", "x\u2028y\x85z", "",
         "\t\n", "caf\u00e9\r\nna\u00efve"]


class WhitespaceWordsTest(tf.test.TestCase):

    def test_words_map_every_character_to_its_word(self):
        words, char_to_word = whitespace_words(" ab  c\u202fd\te\n")
        self.assertEqual(words, ["ab", "c", "d", "e"])
        self.assertEqual(char_to_word, [-1, 0, 0, 0, 0, 1, 1, 2, 2, 3, 3])

    def test_only_the_five_characters_separate_words(self):
        """U+00A0, U+3000, U+2028 and U+0085 belong to words, as in the original reader."""
        self.assertEqual(whitespace_words("5\u00a0km and\u3000more")[0], ["5\u00a0km",
                                                                         "and\u3000more"])
        self.assertEqual(whitespace_words("a \u3000 b")[0], ["a", "\u3000", "b"])
        self.assertEqual(whitespace_words("x\u2028y\x85z")[0], ["x\u2028y\x85z"])

    def test_the_graph_split_gives_the_same_words(self):
        words, starts, ends = split_words(tf.constant(TEXTS))
        for row, text in enumerate(TEXTS):
            expected = whitespace_words(text)[0]
            self.assertEqual([word.decode() for word in words[row].numpy()], expected)
            encoded = text.encode()
            self.assertEqual([encoded[start:end].decode() for start, end
                              in zip(starts[row].numpy(), ends[row].numpy())], expected)


if __name__ == "__main__":
    tf.test.main()
