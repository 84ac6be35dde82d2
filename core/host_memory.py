"""Host memory: keep the heap's freed pages for the next training step.

Every training step allocates and frees the same temporaries (TensorFlow's
tensors, XLA's buffers). With its default padding, glibc's malloc hands
the freed space at the top of each heap back to the kernel, so the next
step asks for it again and the kernel faults in and zeroes every page
anew: the small model's compiled pre-training step took 23,000 page faults
(about 90 MiB) per step on a 2-core CPU. With a padding of tens of
megabytes malloc keeps that space and a step reuses it: 160-280 faults per
step, and the step 1.08-1.12x faster (A/B of `benchmarks/training_speed.py`
workers; any padding from 32 MiB to 512 MiB gave the same). keras-hub's
`fit` step gained nothing from it (0.995x), so this is about our step's
allocations, not the machine.

It has to be set before TensorFlow starts its threads, which create their
own heaps: set after the model was built, the same padding made that step
fault more (34,000 per step) and slower. So every command's program edge
sets it first thing (`core.program.run_command`).

The padding bounds what malloc keeps unused at the top of each heap; memory
in use is unchanged. Other C libraries (musl, macOS) have no such setting
and are left alone, as is a process whose user set `MALLOC_TOP_PAD_`.
"""

from __future__ import annotations

import ctypes
import os
import sys

# `mallopt` parameter number of M_TOP_PAD in glibc's <malloc.h>.
_M_TOP_PAD = -2
DEFAULT_TOP_PAD_BYTES = 64 * 1024 * 1024


def keep_freed_heap_pages(top_pad_bytes: int = DEFAULT_TOP_PAD_BYTES) -> bool:
    """Sets glibc malloc's top padding; True if it was set, False where it cannot be."""
    if not 0 <= top_pad_bytes < 2**31:  # mallopt takes a C int
        raise ValueError(f"top_pad_bytes must be in [0, 2**31), got {top_pad_bytes}")
    if not sys.platform.startswith("linux") or "MALLOC_TOP_PAD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # a C library without mallopt
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt(_M_TOP_PAD, top_pad_bytes) == 1
