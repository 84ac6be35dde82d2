"""`pip install .` brings every package the installed code imports; each extra, its feature's.

requirements.txt, the lock that `make test` installs, can hold a package
that pyproject.toml lacks, and then every test passes while the installed
commands die at their first import (TensorBoard and crcmod did). So the test
reads the code, not an environment: every import statement of every module
that pyproject.toml packages (deferred imports inside functions included),
and every use of an API implemented by another distribution than the one
imported (`tf.summary` is TensorBoard's since TensorFlow 2.21), each mapped
to its distribution and checked against pyproject.toml.

The rule for extras: each extra belongs to one feature (`EXTRA_FEATURES`);
only that feature's modules may import its packages, and they do so inside
`core.extras.needed("<extra>")`, so a user without them is told which extra
to install.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import setuptools
import tensorflow as tf
from packaging.requirements import Requirement
from packaging.version import Version

from core import extras
from tests.fixtures import TestCase

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))

# Extra -> the modules (files, or folders ending in "/") of the feature it installs.
EXTRA_FEATURES = {
    "beam": ("data_prep/beam_pretraining_data.py",),
    "experiments": ("experiments/",),
    "benchmarks": ("benchmarks/",),
}
# APIs whose implementation another distribution provides, by their full dotted name.
RUNTIME_NEEDS = {
    "tensorflow.summary": "tensorboard",  # TBNotInstalledError without it since TF 2.21
    "keras.callbacks.TensorBoard": "tensorboard",
}
# Import names this environment cannot map to a distribution (not installed by the test
# lock, or a namespace several distributions share), longest dotted prefix first.
DISTRIBUTION_OF = {
    "google.protobuf": "protobuf",
    "keras_hub": "keras-hub",
    "tf_keras": "tf-keras",
    "tokenizers": "tokenizers",
    "torch": "torch",
    "transformers": "transformers",
    "official": "tf-models-official",
    "onnxruntime": "onnxruntime",
    "onnx": "onnx",
    "ai_edge_litert": "ai-edge-litert",
}
# Distributions a feature imports that no extra installs, and why.
ELSEWHERE = {
    # The PyTorch references run under their own interpreter (`make real-check`'s
    # .venv-ref), never beside this package.
    "torch": ("benchmarks/", "benchmarks/peers/requirements-torch.txt"),
    "transformers": ("benchmarks/", "benchmarks/peers/requirements-torch.txt"),
    "onnxruntime": ("benchmarks/", "benchmarks/peers/requirements-torch.txt"),
    "onnx": ("benchmarks/", "benchmarks/peers/requirements-torch.txt"),
    # The Model Garden's modules: read out of its wheel at run time, never installed.
    "tf-models-official": ("benchmarks/", "benchmarks/training_speed.py"),
}


@dataclass(frozen=True)
class Need:
    """One place in the code that needs a third-party distribution."""

    path: str  # relative to the repository, with "/"
    line: int
    name: str  # the dotted name imported or used
    extra: str | None  # the `extras.needed(...)` block it sits in, if any
    is_import: bool

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name}"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def packaged_files() -> list[Path]:
    """The .py files `pip install .` installs: pyproject's packages and py-modules."""
    options = PYPROJECT["tool"]["setuptools"]
    packages = setuptools.find_packages(where=str(REPO), include=options["packages"]["find"]
                                        ["include"])
    files = [path for package in packages
             for path in sorted((REPO / package.replace(".", "/")).glob("*.py"))]
    return files + [REPO / f"{module}.py" for module in options["py-modules"]]


@functools.cache
def installed_distributions() -> dict[str, list[str]]:
    return metadata.packages_distributions()


@functools.cache
def own_top_levels() -> frozenset[str]:
    return frozenset(path.relative_to(REPO).parts[0].removesuffix(".py")
                     for path in packaged_files())


class _Reader(ast.NodeVisitor):
    """Collects a module's imports and RUNTIME_NEEDS uses, with the `needed` block of each."""

    def __init__(self, path: str):
        self.path, self.needs, self.aliases, self.extra = path, [], {}, None

    def visit_With(self, node: ast.With) -> None:
        declared = [item.context_expr.args[0].value for item in node.items
                    if isinstance(item.context_expr, ast.Call)
                    and ast.unparse(item.context_expr.func) in ("extras.needed", "needed")
                    and item.context_expr.args
                    and isinstance(item.context_expr.args[0], ast.Constant)]
        outer, self.extra = self.extra, declared[0] if declared else self.extra
        self.generic_visit(node)
        self.extra = outer

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.aliases[(alias.asname or alias.name).split(".")[0]] = (
                alias.name if alias.asname else alias.name.split(".")[0])
            self._need(node, alias.name, is_import=True)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        self._need(node, node.module, is_import=True)
        for alias in node.names:  # `from tensorflow import summary` uses tensorflow.summary
            self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            self._use(node, f"{node.module}.{alias.name}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        parts, inner = [node.attr], node.value
        while isinstance(inner, ast.Attribute):
            parts.append(inner.attr)
            inner = inner.value
        if isinstance(inner, ast.Name) and inner.id in self.aliases:
            self._use(node, ".".join([self.aliases[inner.id], *reversed(parts)]))
        self.generic_visit(node)

    def _use(self, node: ast.AST, dotted: str) -> None:
        for api in RUNTIME_NEEDS:
            if dotted == api or dotted.startswith(api + "."):
                self._need(node, api, is_import=False)

    def _need(self, node: ast.AST, name: str, is_import: bool) -> None:
        self.needs.append(Need(self.path, node.lineno, name, self.extra, is_import))


def needs_of(path: Path, root: Path = REPO) -> list[Need]:
    """Every third-party import and RUNTIME_NEEDS use in one file, deduplicated."""
    reader = _Reader(path.relative_to(root).as_posix())
    reader.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    # A script run as a file (a benchmark's worker) imports its siblings by their bare names.
    siblings = {sibling.stem for sibling in path.parent.glob("*.py")}
    own = own_top_levels() | siblings
    return sorted({need for need in reader.needs
                   if need.name.split(".")[0] not in own | set(sys.stdlib_module_names)},
                  key=lambda need: (need.line, need.name))


def distribution_of(name: str) -> str:
    """The distribution `pip install` needs for an import name or a RUNTIME_NEEDS api."""
    if name in RUNTIME_NEEDS:
        return RUNTIME_NEEDS[name]
    for prefix in sorted(DISTRIBUTION_OF, key=len, reverse=True):
        if name == prefix or name.startswith(prefix + "."):
            return DISTRIBUTION_OF[prefix]
    found = installed_distributions().get(name.split(".")[0], [])
    if len(set(map(canonical, found))) != 1:
        raise AssertionError(f"cannot tell which distribution provides {name!r} (found "
                             f"{found or 'none installed'}): add it to DISTRIBUTION_OF")
    return canonical(found[0])


def declared() -> tuple[set[str], dict[str, set[str]]]:
    """(the base dependencies, {extra: its distributions}) of pyproject.toml, canonical names."""
    project = PYPROJECT["project"]
    names = lambda specs: {canonical(Requirement(spec).name) for spec in specs}  # noqa: E731
    return names(project["dependencies"]), {extra: names(specs) for extra, specs
                                            in project["optional-dependencies"].items()}


def within(path: str, places: tuple[str, ...]) -> bool:
    return any(path == place or place.endswith("/") and path.startswith(place)
               for place in places)


def problems(needs: list[Need]) -> list[str]:
    """What pyproject.toml and the `needed` blocks fail to say about `needs`."""
    base, optional = declared()
    found = []
    for need in needs:
        distribution = distribution_of(need.name)
        feature = next((extra for extra, places in EXTRA_FEATURES.items()
                        if within(need.path, places)), None)
        if distribution in base:
            continue
        if feature and distribution in optional.get(feature, ()):
            if need.is_import and need.extra != feature:
                found.append(f"{need} is in extra [{feature}]: import it inside "
                             f"`with extras.needed({feature!r}):`")
        elif distribution in ELSEWHERE and within(need.path, ELSEWHERE[distribution][:1]):
            continue
        else:
            extras_with_it = [extra for extra, names in optional.items()
                              if distribution in names]
            found.append(f"{need} needs {distribution}, which pyproject.toml lists "
                         + (f"only in [{', '.join(extras_with_it)}], an extra of another "
                            f"feature" if extras_with_it else "nowhere"))
    return found


class DependencyTest(TestCase):

    def test_every_extra_has_its_feature(self):
        _, optional = declared()
        self.assertCountEqual(optional, EXTRA_FEATURES)
        for places in EXTRA_FEATURES.values():
            for place in places:
                self.assertTrue((REPO / place).exists(), place)

    def test_the_package_reads_its_own_name(self):
        self.assertEqual(extras.DISTRIBUTION, PYPROJECT["project"]["name"])

    def test_the_reader_sees_deferred_imports_aliases_and_runtime_needs(self):
        root = self.tmp_path()
        path = root / "sample.py"
        path.write_text("import tensorflow as tf\nfrom tensorflow import summary as s\n"
                        "from core import extras\n\n"
                        "def f():\n    import sklearn.metrics\n    tf.summary.scalar('a', 1)\n"
                        "    with extras.needed('experiments'):\n        import matplotlib\n")
        self.assertEqual([(need.line, need.name, need.extra, need.is_import)
                          for need in needs_of(path, root)],
                         [(1, "tensorflow", None, True), (2, "tensorflow", None, True),
                          (2, "tensorflow.summary", None, False),
                          (6, "sklearn.metrics", None, True),
                          (7, "tensorflow.summary", None, False),
                          (9, "matplotlib", "experiments", True)])
        self.assertEqual(distribution_of("sklearn.metrics"), "scikit-learn")
        self.assertEqual(distribution_of("tensorflow.summary"), "tensorboard")

    def test_a_missing_dependency_and_an_unguarded_extra_are_named(self):
        needs = [Need("training/loop.py", 3, "tensorflow.summary", None, False),
                 Need("training/loop.py", 4, "matplotlib", None, True),
                 Need("experiments/report.py", 5, "matplotlib", None, True),
                 Need("benchmarks/x.py", 6, "torch", None, True),
                 Need("modeling/x.py", 7, "torch", None, True)]
        self.assertEqual(problems(needs), [
            "training/loop.py:4: matplotlib needs matplotlib, which pyproject.toml lists only "
            "in [experiments, benchmarks], an extra of another feature",
            "experiments/report.py:5: matplotlib is in extra [experiments]: import it inside "
            "`with extras.needed('experiments'):`",
            "modeling/x.py:7: torch needs torch, which pyproject.toml lists nowhere"])

    def test_every_import_and_runtime_need_is_declared(self):
        files = packaged_files()
        self.assertIn(REPO / "training" / "loop.py", files)
        self.assertIn(REPO / "run_classifier.py", files)
        needs = [need for path in files for need in needs_of(path)]
        self.assertIn("training/loop.py", {need.path for need in needs
                                           if need.name == "tensorflow.summary"})
        self.assertEqual(problems(needs), [])

    def test_the_test_lock_pins_what_pyproject_requires(self):
        """requirements.txt (what `make test` installs) holds every base and tested extra
        package, at a version pyproject.toml allows."""
        pins = {}
        for line in (REPO / "requirements.txt").read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                requirement = Requirement(line)
                pins[canonical(requirement.name)] = Version(
                    str(requirement.specifier).removeprefix("=="))
        project = PYPROJECT["project"]
        specs = project["dependencies"] + [spec for extra in ("beam", "experiments")
                                           for spec in project["optional-dependencies"][extra]]
        for spec in map(Requirement, specs):
            self.assertIn(canonical(spec.name), pins, f"requirements.txt does not pin {spec}")
            self.assertIn(pins[canonical(spec.name)], spec.specifier,
                          f"requirements.txt pins {spec.name} outside {spec}")


if __name__ == "__main__":
    tf.test.main()
