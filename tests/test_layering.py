"""The floors import only downward, so each can be read, tested and reused without those above.

ground (`text`, `core`) < `modeling` < the siblings `data_prep`, `training`,
`evaluation` (which never import each other) < `tasks` < `cli` < the
runners, experiments, benchmarks, demo and tools. The test reads every
import statement, including those inside functions, since a deferred
import still ties the lower floor to the upper one.
"""

import ast
from pathlib import Path

import tensorflow as tf

REPO = Path(__file__).resolve().parents[1]
FLOORS = {"text": 0, "core": 0, "modeling": 1, "data_prep": 2, "training": 2, "evaluation": 2,
          "tasks": 3, "cli": 4}
TOP = 5
TOP_LEVEL = {"experiments", "benchmarks", "tools", "demo", "run_pretraining", "run_classifier",
             "run_squad", "run_ner", "extract_features", "export_model"}
SIBLING_FLOORS = {0, 2}  # text/core and data_prep/training/evaluation import none of each other


def floor_of(module: str) -> int | None:
    package = module.split(".")[0]
    if package in FLOORS:
        return FLOORS[package]
    return TOP if package in TOP_LEVEL else None


def imported_modules(path: Path) -> list[str]:
    modules = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.append(node.module)
    return modules


def upward_imports() -> list[str]:
    found = []
    for path in sorted(REPO.rglob("*.py")):
        relative = path.relative_to(REPO)
        if relative.parts[0] in ("tests", ".venv", ".git") or relative.parts[0].startswith("."):
            continue
        package = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        own = floor_of(package)
        if own is None:
            continue
        for module in imported_modules(path):
            target, other = floor_of(module), module.split(".")[0]
            if target is None or other == package:
                continue
            if target > own or (target == own and own in SIBLING_FLOORS):
                found.append(f"{relative} imports {module}")
    return found


class LayeringTest(tf.test.TestCase):

    def test_every_import_points_down(self):
        self.assertEqual(upward_imports(), [])

    def test_the_check_sees_an_upward_import(self):
        self.assertEqual(floor_of("training.loop"), 2)
        self.assertGreater(floor_of("tasks.squad"), floor_of("modeling.encoder"))
        self.assertIn("data_prep.datasets.conll", imported_modules(
            REPO / "tasks" / "tagging.py"))


if __name__ == "__main__":
    tf.test.main()
