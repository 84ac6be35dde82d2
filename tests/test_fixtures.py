"""The tests' base TestCase: its folders are new, empty, and gone when their test or class is."""

import io
import unittest

import tensorflow as tf

from tests.fixtures import TestCase


class TestCaseTest(TestCase):

    def test_each_tmp_path_is_a_new_empty_folder(self):
        first, second = self.tmp_path(), self.tmp_path()
        self.assertNotEqual(first, second)
        for folder in (first, second):
            self.assertTrue(folder.is_dir())
            self.assertEqual(list(folder.iterdir()), [])

    def test_a_class_folder_lasts_for_the_class_and_no_longer(self):
        class Reader(TestCase):
            @classmethod
            def setUpClass(cls):
                super().setUpClass()
                cls.folder = cls.class_folder()
                (cls.folder / "input.txt").write_text("written once")

            def test_one(self):
                self.assertEqual((self.folder / "input.txt").read_text(), "written once")

            def test_two(self):
                self.assertEqual((self.folder / "input.txt").read_text(), "written once")

        result = unittest.TextTestRunner(stream=io.StringIO()).run(
            unittest.defaultTestLoader.loadTestsFromTestCase(Reader))
        self.assertTrue(result.wasSuccessful(), msg=result.errors + result.failures)
        self.assertFalse(Reader.folder.exists())


if __name__ == "__main__":
    tf.test.main()
