"""The original BasicTokenizer's character rules as TensorFlow ops: deletions, casing, words.

Invisible characters, combining marks and look-alikes are written as escapes.
"""

from __future__ import annotations

import tensorflow as tf
from absl.testing import parameterized

from text.normalization import _normalize_unicode, normalize, split_words


def _normalized(text: str, lower_case: bool) -> str:
    return normalize(tf.constant([text]), lower_case).numpy()[0].decode("utf-8")


def _words(text: str, lower_case: bool = True) -> list[str]:
    words = split_words(tf.constant([text]), lower_case).to_list()[0]
    return [word.decode("utf-8") for word in words]


class NormalizationTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters(True, False)
    def test_controls_format_chars_nul_and_replacement_char_are_deleted(self, lower_case):
        text = ("a\x00b\x07c\x0bd\x0ce\x1cf\x7fg\x85h\x9fi\u200bj\u200dk\u200el\u202am\ufeffn"
                "\u00ado\ufffdp")
        self.assertEqual(_normalized(text, lower_case), "abcdefghijklmnop")

    @parameterized.parameters(True, False)
    def test_tab_newline_return_and_other_whitespace_are_kept(self, lower_case):
        """They separate words; the WordPiece step splits on them, so deleting them would join words."""
        text = "a\tb\nc\rd e\u00a0f\u3000g\u2028h\u2029i"
        self.assertEqual(_normalized(text, lower_case), text)

    def test_uncased_lowercases_and_strips_accents_like_python(self):
        self.assertEqual(_normalized("HéLLO Wörld Ça e\u0301cole Tiếng", True),
                         "hello world ca ecole tieng")
        self.assertEqual(_normalized("İstanbul", True),
                         "istanbul")  # lower() gives i + U+0307, a mark
        # Devanagari vowel signs are spacing marks (Mc) and stay; the virama (Mn) goes.
        hindi = "\u0939\u093f\u0928\u094d\u0926\u0940"
        self.assertEqual(_normalized(hindi, True), hindi.replace("\u094d", ""))

    def test_uncased_lowercasing_is_not_case_folding(self):
        """str.lower() keeps ß and ligatures and maps full-width letters to full-width ones."""
        self.assertEqual(_normalized("Straße ﬁnance ＡＢ Ⅰ", True), "straße ﬁnance ａｂ ⅰ")

    def test_cased_keeps_case_and_accents(self):
        text = "HéLLO e\u0301cole ΟΔΟΣ"
        self.assertEqual(_normalized(text, False), text)

    @parameterized.parameters([
        ("ΟΔΟΣ ΣΟΦΟΣ", "οδος σοφος"),
        ("ΑΣ.Β", "ασ.β"),  # "." is case-ignorable and a letter follows it
        ("ΑΣ, Β", "ας, β"),
        ("Σ", "σ"),  # no cased letter before it
        ("1Σ", "1σ"),
        ("ΑΣ中", "ας中"),
        ("ΑΣ\u200bΒ", "ασβ"),  # the deleted zero-width space must not make the sigma final
    ])
    def test_final_sigma_as_python_lowercases_it(self, text, expected):
        self.assertEqual(_normalized(text, True), expected)
        self.assertEqual(expected, text.replace("\u200b", "").lower())

    def test_split_words_on_whitespace_punctuation_and_cjk(self):
        self.assertEqual(_words("Hello, World!"), ["hello", ",", "world", "!"])
        self.assertEqual(_words("Hello, World!", lower_case=False), ["Hello", ",", "World", "!"])
        # Uncased, NFD turns the compatibility ideograph U+F900 into its unified twin U+8C48.
        self.assertEqual(_words("ab中文cd \uf900x"), ["ab", "中", "文", "cd", "\u8c48", "x"])
        self.assertEqual(_words("\uf900x", lower_case=False), ["\uf900", "x"])
        self.assertEqual(_words("a\tb\nc\u00a0d\u3000e\u2028f\u2029g\r\nh"), list("abcdefgh"))
        self.assertEqual(_words("  \t\n "), [])
        self.assertEqual(_words(""), [])

    def test_split_words_punctuation_is_ascii_symbols_and_unicode_p(self):
        self.assertEqual(_words("a$b^c`d+e"), ["a", "$", "b", "^", "c", "`", "d", "+", "e"])
        self.assertEqual(_words("a…b«c—d¿e"), ["a", "…", "b", "«", "c", "—", "d", "¿", "e"])
        self.assertEqual(_words("a©b€c´d"), ["a©b€c´d"])  # symbols outside ASCII stay inside words
        self.assertEqual(_words("!!a.."), ["!", "!", "a", ".", "."])

    def test_split_words_is_per_text_and_deletes_controls_first(self):
        words = split_words(tf.constant(["one two", "", "thr\u200bee\x00, four"]), lower_case=True)
        self.assertEqual(words.to_list(), [[b"one", b"two"], [], [b"three", b",", b"four"]])

    @parameterized.parameters(True, False)
    def test_ascii_shortcut_equals_the_unicode_path_and_keeps_order_and_shape(self, lower_case):
        every_ascii = "".join(map(chr, range(128)))
        texts = [every_ascii, "Caf\u00e9 AU LAIT", "ASCII\nthen \u00c0 after a newline", "",
                 "MiXeD\x7f\x01 Case\t", "\u03a3\u0391\u03a3 x", "plain ascii, Words."]
        batch = tf.constant([[text.encode("utf-8") for text in texts[:4]] + [b"A\xffB"],
                             [text.encode("utf-8") for text in texts[4:]] + [b"", b"Z"]])
        fast = normalize(batch, lower_case)
        self.assertEqual(fast.shape, batch.shape)
        self.assertEqual(fast.numpy().tolist(),
                         _normalize_unicode(batch, lower_case).numpy().tolist())
        kept = "".join(c for c in every_ascii if c in "\t\n\r" or 32 <= ord(c) < 127)
        self.assertEqual(fast[0, 0].numpy().decode(), kept.lower() if lower_case else kept)


if __name__ == "__main__":
    tf.test.main()
