"""The floors import only downward, so each can be read, tested and reused without those above.

ground (`text`, `core`) < `modeling` < the siblings `data_prep`, `training`,
`evaluation` (which never import each other) < `tasks` < `cli` < the
runners, experiments, benchmarks, demo and tools. The test reads every
import statement, including those inside functions, since a deferred
import still ties the lower floor to the upper one. Within a floor, no
module imports one that imports it back, even only for type hints: a
circle leaves neither side readable without the other.
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


def code_files() -> list[Path]:
    """The project's Python files, tests left out."""
    return [path for path in sorted(REPO.rglob("*.py"))
            if not (path.relative_to(REPO).parts[0] in ("tests", ".venv", ".git")
                    or path.relative_to(REPO).parts[0].startswith("."))]


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each project module -> the project modules it imports.

    `from a import b` imports module a.b when there is one (not package a's
    other modules), else a name defined in a.
    """
    files = code_files()
    modules = {module_name(path) for path in files}
    graph = {}
    for path in files:
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    targets.add(submodule if submodule in modules else node.module)
        graph[module_name(path)] = {target for target in targets
                                    if target in modules and target != module_name(path)}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm), sorted."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(circles)


def upward_imports() -> list[str]:
    found = []
    for path in code_files():
        relative = path.relative_to(REPO)
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

    def test_no_module_imports_one_that_imports_it_back(self):
        self.assertEqual(import_circles(import_graph()), [])

    def test_the_circle_check_sees_a_circle(self):
        self.assertEqual(import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}),
                         [["a", "b", "c"]])
        self.assertIn("experiments.cells", import_graph()["experiments.tables"])

    def test_the_check_sees_an_upward_import(self):
        self.assertEqual(floor_of("training.loop"), 2)
        self.assertGreater(floor_of("tasks.squad"), floor_of("modeling.encoder"))
        self.assertIn("data_prep.datasets.conll", imported_modules(
            REPO / "tasks" / "tagging.py"))


if __name__ == "__main__":
    tf.test.main()
