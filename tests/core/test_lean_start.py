"""`held_back`: a package is not importable inside the block, and as before after it."""

import sys

from core.lean_start import held_back
from tests.fixtures import TestCase

ABSENT = "a_package_nobody_has_imported"


class HeldBackTest(TestCase):

    def test_import_fails_inside_and_the_entry_is_gone_after(self):
        self.assertNotIn(ABSENT, sys.modules)
        with held_back([ABSENT]):
            with self.assertRaisesRegex(ImportError, ABSENT):
                __import__(ABSENT)
        self.assertNotIn(ABSENT, sys.modules)

    def test_a_package_already_imported_is_left_importable(self):
        json_module = sys.modules["json"]
        with held_back(["json", ABSENT]):
            self.assertIs(__import__("json"), json_module)
        self.assertIs(sys.modules["json"], json_module)

    def test_the_entry_is_removed_when_the_block_fails(self):
        with self.assertRaises(RuntimeError):
            with held_back([ABSENT]):
                raise RuntimeError("the block's own error")
        self.assertNotIn(ABSENT, sys.modules)
