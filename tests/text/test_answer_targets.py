"""Where a training answer lies: words from characters, pieces from words, positions per window."""

import tensorflow as tf

from text.answer_targets import answer_pieces, answer_words, improve_answer_span, window_target
from text.whitespace_words import whitespace_words


class AnswerTargetsTest(tf.test.TestCase):

    def test_answer_words_trust_the_offset_only_where_the_text_is(self):
        context = "In (1990) the  cat\tsat."
        words, char_to_word = whitespace_words(context)
        self.assertEqual(answer_words(words, char_to_word, "1990", 4), (1, 1))
        self.assertEqual(answer_words(words, char_to_word, "the  cat", 10), (2, 3))
        self.assertIsNone(answer_words(words, char_to_word, "the cat", 4))  # not there
        self.assertIsNone(answer_words(words, char_to_word, "sat.", 21))  # past the end
        self.assertIsNone(answer_words(words, char_to_word, " ", 9))  # blank

    def test_pieces_of_the_words_narrowed_to_the_answer(self):
        pieces = ["in", "(", "1990", ")", "the", "cat"]
        first_pieces = [0, 1, 4, 5]  # in / (1990) / the / cat
        self.assertEqual(answer_pieces(first_pieces, 6, 1, 1), (1, 3))
        self.assertEqual(answer_pieces(first_pieces, 6, 2, 3), (4, 5))
        self.assertEqual(improve_answer_span(pieces, 1, 3, ["1990"]), (2, 2))
        self.assertEqual(improve_answer_span(pieces, 1, 3, ["1991"]), (1, 3))

    def test_a_window_without_the_whole_answer_points_at_cls(self):
        self.assertEqual(window_target((5, 6), 4, 3, 7), (8, 9))
        self.assertEqual(window_target((5, 7), 4, 3, 7), (0, 0))  # cut by the window's end
        self.assertEqual(window_target((3, 4), 4, 3, 7), (0, 0))  # cut by its start
        self.assertEqual(window_target(None, 4, 3, 7), (0, 0))


if __name__ == "__main__":
    tf.test.main()
