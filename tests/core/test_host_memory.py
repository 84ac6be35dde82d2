"""Commands keep freed heap pages instead of faulting them in again every step."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path
from unittest import mock

import tensorflow as tf
from absl.testing import parameterized

from core import host_memory, program

ROOT = Path(__file__).resolve().parents[2]

# Allocates 16 MiB in 64 KiB blocks (below malloc's mmap threshold, so on the
# heap), touches and frees them, then prints the page faults of five more rounds.
_HEAP_ROUNDS = textwrap.dedent("""
    import ctypes, resource, sys
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    if sys.argv[1] == "keep":
        from core.host_memory import keep_freed_heap_pages
        assert keep_freed_heap_pages()
    def one_round():
        blocks = [libc.malloc(64 * 1024) for _ in range(256)]
        for block in blocks:
            ctypes.memset(block, 1, 64 * 1024)
        for block in reversed(blocks):
            libc.free(block)
    one_round()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        one_round()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def _page_faults(mode: str) -> int:
    environment = {key: value for key, value in os.environ.items()
                   if key != "MALLOC_TOP_PAD_"}
    environment["PYTHONPATH"] = str(ROOT)
    result = subprocess.run([sys.executable, "-c", _HEAP_ROUNDS, mode], env=environment,
                            capture_output=True, text=True, check=True)
    return int(result.stdout)


class HostMemoryTest(tf.test.TestCase, parameterized.TestCase):

    def test_freed_heap_pages_are_reused_instead_of_faulted_in_again(self):
        if platform.libc_ver()[0] != "glibc":
            self.skipTest("the padding is a glibc malloc setting")
        default = _page_faults("default")
        kept = _page_faults("keep")
        # 5 rounds x 4096 pages would be faulted in again if each round's 16 MiB went back.
        self.assertGreater(default, 5 * 1000)
        self.assertLess(kept, 100)

    @parameterized.parameters(-1, 2**31)
    def test_a_padding_outside_a_c_int_is_refused(self, top_pad_bytes):
        with self.assertRaisesRegex(ValueError, "top_pad_bytes"):
            host_memory.keep_freed_heap_pages(top_pad_bytes)

    def test_a_users_own_setting_is_left_alone(self):
        self.enter_context(mock.patch.dict(os.environ, {"MALLOC_TOP_PAD_": "0"}))
        self.assertIs(host_memory.keep_freed_heap_pages(), False)

    def test_the_program_edge_sets_it_before_flags_and_main(self):
        calls = []
        self.enter_context(mock.patch.object(program, "keep_freed_heap_pages",
                                             lambda: calls.append("keep")))
        self.enter_context(mock.patch.object(program.app, "run",
                                             lambda main: calls.append("main")))
        program.run_command(lambda: calls.append("flags"), lambda argv: None, __name__)
        self.assertEqual(calls, ["keep", "flags", "main"])


if __name__ == "__main__":
    tf.test.main()
