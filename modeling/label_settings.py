"""How a fine-tuned classifier reads its labels, kept beside `labels.txt` so a reload reads them alike.

`labels.txt` names a head's output units, but not whether they are one
softmax (one label per text) or a sigmoid each (`multi_label`, a label set
per text, cut at `threshold`). A multi-label run's folder without that
would reload as a single-label model, answering one label where it was
trained and scored on sets. So such a folder also holds
`label_settings.json`, `{"multi_label": true, "threshold": 0.5}`, written
whole (`core.atomic`); a folder without it (single-label, and every folder
written before it existed) loads as before.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from core.atomic import write_atomically
from modeling.config import ConfigError
from modeling.multi_label import check_threshold

SETTINGS_FILE = "label_settings.json"


def label_settings(model: Any) -> dict[str, Any]:
    """The settings of `model`'s head that its folder must keep; none for a single-label head.

    Args:
      model: a task model (a `BertClassifier` has `multi_label` and `threshold`).
    """
    if not getattr(model, "multi_label", False):
        return {}
    return {"multi_label": True, "threshold": float(model.threshold)}


def save_label_settings(folder: str | os.PathLike, settings: dict[str, Any]) -> Path | None:
    """Writes `settings` (from `label_settings`) to the folder's file, atomically.

    With no settings, an earlier run's file is removed instead: it would
    describe another head. Returns the path written, or None.

    Args:
      folder: the model's folder, where `labels.txt` is.
      settings: what `label_settings` gave for the model saved there.
    """
    path = Path(folder) / SETTINGS_FILE
    if not settings:
        path.unlink(missing_ok=True)
        return None
    write_atomically(path, json.dumps(settings, indent=2, sort_keys=True) + "\n")
    return path


def read_label_settings(folder: Path) -> dict[str, Any] | None:
    """The settings in `folder`'s file, checked; None when it has none.

    Raises ConfigError naming the file for one that is not what
    `save_label_settings` writes.
    """
    path = folder / SETTINGS_FILE
    if not path.is_file():
        return None
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}: invalid JSON at line {error.lineno}: {error.msg}") from None
    if (not isinstance(settings, dict) or settings.get("multi_label") is not True
            or set(settings) != {"multi_label", "threshold"}):
        raise ConfigError(f"{path}: expected {{\"multi_label\": true, \"threshold\": T}} with "
                          f"T in (0, 1), got {settings!r}")
    try:
        settings["threshold"] = check_threshold(settings["threshold"])
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{path}: {error}") from None
    return settings
