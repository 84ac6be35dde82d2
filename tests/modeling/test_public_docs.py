"""Every public name of `modeling` says what its arguments are and shows a call."""

import ast
import inspect
import re
import textwrap

import modeling
from tests.fixtures import TestCase


def example_source(doc: str) -> str:
    """The Python of a docstring's `Examples:` section: its `>>>` and `...` lines, or the
    lines of a ```python block."""
    section = doc.split("Examples:", 1)[1]
    fenced = re.search(r"```python\n(.*?)```", section, re.S)
    if fenced:
        return textwrap.dedent(fenced.group(1))
    return "\n".join(line.strip()[4:] for line in section.splitlines()
                     if line.strip().startswith((">>>", "...")))


class PublicDocsTest(TestCase):

    def test_every_public_name_has_args_and_examples_that_parse(self):
        for name in modeling.__all__:
            with self.subTest(name=name):
                doc = inspect.getdoc(getattr(modeling, name)) or ""
                self.assertIn("\nArgs:\n", doc)
                self.assertIn("\nExamples:\n", doc)
                source = example_source(doc)
                self.assertTrue(source)
                ast.parse(source)  # a SyntaxError names the line

    def test_every_public_model_class_loads_with_from_pretrained(self):
        for name in ("BertEncoder", "BertPretrainer", "BertPreprocessor", "BertClassifier",
                     "BertMultipleChoice", "BertSpanModel", "BertTokenTagger"):
            with self.subTest(name=name):
                method = getattr(getattr(modeling, name), "from_pretrained")
                self.assertIn("Examples:", inspect.getdoc(method))
