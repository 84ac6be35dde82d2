"""The rule-based sentence splitter: where it splits, and where it must not."""

import tensorflow as tf
from absl.testing import parameterized

from text.sentence_split import split_sentences


class SentenceSplitTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters([
        ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
        ("Mr. Smith met Dr. Jones at St. Paul's. They talked.",
         ["Mr. Smith met Dr. Jones at St. Paul's.", "They talked."]),
        ("Tools, e.g. Hammers, and i.e. Nails. Done.", ["Tools, e.g. Hammers, and i.e. Nails.",
                                                        "Done."]),
        ("The U.S. Army left. It rained.", ["The U.S. Army left.", "It rained."]),
        ("J. R. R. Tolkien wrote it. See p. 12 and No. 5 later.",
         ["J. R. R. Tolkien wrote it.", "See p. 12 and No. 5 later."]),
        ("It grew 3.5 percent to 1.25 million. Then 2001 came.",
         ["It grew 3.5 percent to 1.25 million.", "Then 2001 came."]),
        ("Prices fell in 2001. 2002 was worse.", ["Prices fell in 2001.", "2002 was worse."]),
    ])
    def test_abbreviations_initials_and_numbers(self, text, expected):
        self.assertEqual(split_sentences(text), expected)

    @parameterized.parameters([
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        ('"Is it?" she asked. "Yes." The end.', ['"Is it?" she asked.', '"Yes."', "The end."]),
        ("It ended (mostly). Next one.", ["It ended (mostly).", "Next one."]),
        ("It ended. (Mostly.) Next one.", ["It ended.", "(Mostly.)", "Next one."]),
        ("Wait... What now?", ["Wait...", "What now?"]),
    ])
    def test_quotes_brackets_and_ellipses(self, text, expected):
        self.assertEqual(split_sentences(text), expected)

    def test_lowercase_continuation_does_not_split(self):
        self.assertEqual(split_sentences("It costs approx. five dollars. ok. Fine."), [
            "It costs approx. five dollars. ok.", "Fine."])

    def test_accented_capital_starts_a_sentence_and_blank_text_gives_nothing(self):
        self.assertEqual(split_sentences("Vive la France. Étienne agreed."), [
            "Vive la France.", "Étienne agreed."])
        self.assertEqual(split_sentences("  \n "), [])


if __name__ == "__main__":
    tf.test.main()
