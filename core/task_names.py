"""Task names as users type them ("SST2", "sts_b") mapped to one canonical key ("sst-2").

The data readers and the metrics both key their tables by task, and neither
may import the other, so the one spelling rule lives below both.
"""

from __future__ import annotations

ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "diagnostic": "ax"}


def canonical_key(task_name: str) -> str:
    """The canonical key for a task name in any case or alias ("SST2" -> "sst-2")."""
    key = task_name.strip().lower().replace("_", "-")
    return ALIASES.get(key, key)
