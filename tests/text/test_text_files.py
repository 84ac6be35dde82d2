"""Strict UTF-8 line reading: line ends, and errors that say which file, line and byte."""

from __future__ import annotations

import re

import tensorflow as tf

from tests.fixtures import TestCase
from text.text_files import decode_line, read_utf8_lines


def _file(tmp_path, data: bytes, name: str = "input.txt") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


class TextFilesTest(TestCase):

    def test_lf_and_crlf_line_ends_are_removed(self):
        tmp_path = self.tmp_path()
        path = _file(tmp_path, b"one\r\ntwo\nthree\r\n\r\nlast")
        self.assertEqual(list(read_utf8_lines(path)), ["one", "two", "three", "", "last"])

    def test_carriage_returns_and_unicode_separators_inside_lines_stay(self):
        """Only "\\n" ends a line, as with the original's readline(); the tokenizer treats the rest."""
        tmp_path = self.tmp_path()
        path = _file(tmp_path, "a\rb\nc\u2028d\u0085e\n".encode("utf-8"))
        self.assertEqual(list(read_utf8_lines(path)), ["a\rb", "c\u2028d\u0085e"])

    def test_empty_file_has_no_lines(self):
        tmp_path = self.tmp_path()
        self.assertEqual(list(read_utf8_lines(_file(tmp_path, b""))), [])

    def test_path_objects_are_accepted(self):
        tmp_path = self.tmp_path()
        _file(tmp_path, "caf\u00e9\n".encode("utf-8"))
        self.assertEqual(list(read_utf8_lines(tmp_path / "input.txt")), ["caf\u00e9"])

    def test_bad_utf8_names_path_line_and_column(self):
        tmp_path = self.tmp_path()
        path = _file(tmp_path, b"good line\nalso fine\nbad \xff here\nnever read\n")
        lines = read_utf8_lines(path)
        self.assertEqual([next(lines), next(lines)],
                         ["good line", "also fine"])  # read lazily up to the error
        expected = rf"^{re.escape(path)}:3: not valid UTF-8 at byte column 5 \(bytes ff"
        with self.assertRaisesRegex(ValueError, expected):
            next(lines)

    def test_latin1_and_truncated_sequences_are_refused(self):
        tmp_path = self.tmp_path()
        with self.assertRaisesRegex(ValueError,
                                    r"latin1.txt:1: not valid UTF-8 at byte column 4 \(bytes e9"):
            list(read_utf8_lines(_file(tmp_path, b"caf\xe9\n", "latin1.txt")))
        with self.assertRaisesRegex(ValueError, r"cut.txt:2: not valid UTF-8 at byte column 4"):
            list(read_utf8_lines(_file(tmp_path, b"ok\ncaf\xc3", "cut.txt")))

    def test_decode_line_alone(self):
        self.assertEqual(decode_line(b"x\r\n", "f.txt", 7), "x")
        with self.assertRaisesRegex(ValueError, r"^f.txt:7: not valid UTF-8 at byte column 2"):
            decode_line(b"x\x80\n", "f.txt", 7)

    def test_missing_file_is_named(self):
        tmp_path = self.tmp_path()
        missing = tmp_path / "absent.txt"
        with self.assertRaisesRegex(FileNotFoundError, f"{re.escape(str(missing))}: no such file"):
            list(read_utf8_lines(str(missing)))

    def test_directory_is_refused_by_name(self):
        tmp_path = self.tmp_path()
        expected = f"{re.escape(str(tmp_path))}: is a folder, not a text file"
        with self.assertRaisesRegex(IsADirectoryError, expected):
            list(read_utf8_lines(str(tmp_path)))


if __name__ == "__main__":
    tf.test.main()
