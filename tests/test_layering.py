"""The floors import only downward, so each can be read, tested and reused without those above.

ground (`text`, `core`) < `network` (the encoder, its layers, config,
checkpoints and loading) < the siblings `data_prep`, `training`,
`evaluation` (which never import each other) < `modeling` (the task models,
their preprocessors, losses and `fit`) < `export` < `tasks` < `cli` < the
runners, experiments, benchmarks, demo and tools. `modeling/__init__.py`
alone is a facade on the top floor: `import modeling` gives every public
name wherever it lives, so it imports from every floor, and no module of a
floor below may import it. The test reads every import statement, including
those inside functions, since a deferred import still ties the lower floor
to the upper one. Within a floor, no module imports one that imports it
back, even only for type hints: a circle leaves neither side readable
without the other.

Two sizes keep the house readable: no package has more than
`MAX_PACKAGE_FLOORS` internal floors (the longest chain of imports between
its own modules), and none holds more than `MAX_PACKAGE_SHARE` of the
product's lines (tests left out).
"""

import ast
import functools
from pathlib import Path

import tensorflow as tf

from tests.fixtures import REPO, product_files

FLOORS = {"text": 0, "core": 0, "network": 1, "data_prep": 2, "training": 2, "evaluation": 2,
          "modeling": 3, "export": 4, "tasks": 5, "cli": 6}
TOP = 7
TOP_LEVEL = {"experiments", "benchmarks", "tools", "demo", "run_pretraining", "run_classifier",
             "run_squad", "run_ner", "extract_features", "export_model"}
FACADES = {"modeling"}  # a package's __init__ that re-exports the floors: on the top floor
SIBLING_FLOORS = {0, 2}  # text/core and data_prep/training/evaluation import none of each other
MAX_PACKAGE_FLOORS = 6
MAX_PACKAGE_SHARE = 0.15


def floor_of(module: str) -> int | None:
    if module in FACADES:
        return TOP
    package = module.split(".")[0]
    if package in FLOORS:
        return FLOORS[package]
    return TOP if package in TOP_LEVEL else None


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, modules: set[str] = frozenset()) -> list[str]:
    """The modules `path` imports; `from a import b` is module a.b when `modules` has it
    (not package a's other modules), else a name defined in a."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.append(submodule if submodule in modules else node.module)
    return found


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Each project module -> the project modules it imports."""
    files = product_files()
    modules = {module_name(path) for path in files}
    return {module_name(path): {target for target in imported_modules(path, modules)
                                if target in modules and target != module_name(path)}
            for path in files}


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
    modules = set(import_graph())
    for path in product_files():
        own_module = module_name(path)
        own = floor_of(own_module)
        if own is None:
            continue
        package = own_module.split(".")[0]
        for module in imported_modules(path, modules):
            target = floor_of(module)
            if target is None or (module.split(".")[0] == package
                                  and FACADES.isdisjoint({module, own_module})):
                continue
            if target > own or (target == own and own in SIBLING_FLOORS):
                found.append(f"{path.relative_to(REPO)} imports {module}")
    return found


def package_floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each package -> the most modules on one chain of imports among its own (facades
    left out: they sit on the top floor)."""

    @functools.cache
    def depth(module: str) -> int:
        package = module.split(".")[0]
        inner = [target for target in graph[module]
                 if target.split(".")[0] == package and target not in FACADES]
        return 1 + max(map(depth, inner), default=0)

    floors = {}
    for module in graph:
        if module not in FACADES:
            package = module.split(".")[0]
            floors[package] = max(floors.get(package, 0), depth(module))
    return floors


def package_shares() -> dict[str, float]:
    """Each top-level package (a folder) -> its share of the product's lines."""
    lines = {}
    for path in product_files():
        parts = path.relative_to(REPO).parts
        if len(parts) > 1:
            count = len(path.read_text(encoding="utf-8").splitlines())
            lines[parts[0]] = lines.get(parts[0], 0) + count
    total = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in product_files())
    return {package: count / total for package, count in lines.items()}


class LayeringTest(tf.test.TestCase):

    def test_every_import_points_down(self):
        self.assertEqual(upward_imports(), [])

    def test_no_module_imports_one_that_imports_it_back(self):
        self.assertEqual(import_circles(import_graph()), [])

    def test_no_package_is_more_than_six_floors_deep(self):
        deep = {package: floors for package, floors in package_floors(import_graph()).items()
                if floors > MAX_PACKAGE_FLOORS}
        self.assertEqual(deep, {})

    def test_no_package_holds_more_than_its_share_of_the_product(self):
        large = {package: round(share, 3) for package, share in package_shares().items()
                 if share > MAX_PACKAGE_SHARE}
        self.assertEqual(large, {})

    def test_the_circle_check_sees_a_circle(self):
        self.assertEqual(import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}),
                         [["a", "b", "c"]])
        self.assertIn("experiments.cells", import_graph()["experiments.tables"])

    def test_the_check_sees_an_upward_import(self):
        self.assertEqual(floor_of("training.loop"), 2)
        self.assertGreater(floor_of("tasks.squad"), floor_of("network.encoder"))
        self.assertGreater(floor_of("modeling"), floor_of("export.tf_hub"))
        self.assertGreater(floor_of("export.tf_hub"), floor_of("modeling.classifier"))
        self.assertIn("data_prep.datasets.conll", imported_modules(
            REPO / "tasks" / "tagging.py"))

    def test_the_depth_check_counts_the_longest_chain(self):
        graph = {"a.x": {"a.y"}, "a.y": {"a.z", "b.w"}, "a.z": set(), "b.w": set(),
                 "modeling": {"modeling.q"}, "modeling.q": set()}
        self.assertEqual(package_floors(graph), {"a": 3, "b": 1, "modeling": 1})


if __name__ == "__main__":
    tf.test.main()
