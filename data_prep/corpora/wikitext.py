"""MediaWiki dump pages -> plain-text paragraphs of running prose.

BERT's paper built its Wikipedia corpus from "text passages" only, ignoring
lists, tables and headers. This module does the same for a MediaWiki XML
export: redirects and pages outside the article namespace are skipped, and
of each article only the prose paragraphs survive, with their inline markup
resolved to what a reader sees (link labels, bold and italic text).

Removed entirely: templates `{{...}}` (infoboxes, citations, pronunciation
boxes: nested to any depth), tables `{| ... |}`, `<ref>` footnotes, comments,
math and galleries, file/image/category and interlanguage links, headings,
list and indented lines, and the trailing reference sections ("See also",
"References", ...), which hold lists and citations rather than prose.
Dropping templates loses the few that render inline words (`{{convert}}`,
`{{lang}}`); for a pre-training corpus a slightly shorter sentence is better
than template syntax leaking into the text.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ElementTree
from typing import BinaryIO, Iterator

ARTICLE_NAMESPACE = "0"
# Sections that hold citations, link lists and navigation rather than prose.
TRAILING_SECTIONS = frozenset({
    "see also", "references", "notes", "footnotes", "citations", "sources", "bibliography",
    "further reading", "external links", "notes and references", "references and notes"})
# Link namespaces whose target is not shown as text in the article.
HIDDEN_LINK_PREFIXES = ("file:", "image:", "category:", "media:")
# Elements whose whole content is dropped (footnotes, formulas, media, code).
DROPPED_ELEMENTS = ("ref", "math", "gallery", "timeline", "imagemap", "score",
                    "syntaxhighlight", "source", "chem", "hiero", "graph")

_COMMENT = re.compile(r"<!--.*?(-->|\Z)", re.S)
_SELF_CLOSING = re.compile(r"<(%s)\b[^>]*/>" % "|".join(DROPPED_ELEMENTS), re.I)
_ELEMENT = re.compile(r"<(%s)\b[^>]*>.*?</\1\s*>" % "|".join(DROPPED_ELEMENTS), re.I | re.S)
_LINE_BREAK_TAG = re.compile(r"<br\s*/?>", re.I)
_ANY_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*\b[^<>]*/?>")
_INNER_LINK = re.compile(r"\[\[((?:(?!\[\[|\]\]).)*)\]\]", re.S)  # single brackets may occur inside
_INTERLANGUAGE = re.compile(r"^:?[a-z]{2,3}(-[a-z]+)?:")
_EXTERNAL_LINK = re.compile(r"\[(?:https?:|ftp:)?//[^\s\]]+\s*([^\]]*)\]")
_BARE_URL = re.compile(r"\bhttps?://\S+")
_QUOTE_MARKUP = re.compile(r"'{2,}")
_MAGIC_WORD = re.compile(r"__[A-Z]+__")
_HEADING = re.compile(r"^(=+)\s*(.*?)\s*\1\s*$")
_EMPTY_BRACKETS = re.compile(r"\(\s*[,;:]?\s*\)")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([,.;:!?])")
_SPACES = re.compile(r"[ \t\u00a0]+")


def iter_articles(xml_file: BinaryIO) -> Iterator[tuple[str, str]]:
    """Yields (title, wikitext) of each article page, streaming the dump.

    Pages are freed as soon as they are read, so memory stays flat however
    large the dump. Redirect pages and non-article namespaces are skipped.
    """
    for _, element in ElementTree.iterparse(xml_file, events=("end",)):
        if _local_name(element.tag) != "page":
            continue
        fields = {_local_name(child.tag): child for child in element}
        namespace = fields.get("ns")
        text = element.find("./{*}revision/{*}text")
        if ("redirect" not in fields and namespace is not None
                and namespace.text == ARTICLE_NAMESPACE and text is not None and text.text):
            yield fields["title"].text or "", text.text
        element.clear()


def article_paragraphs(wikitext: str) -> list[str]:
    """The prose paragraphs of one article, markup resolved, one string each."""
    text = _COMMENT.sub("", wikitext)
    text = _SELF_CLOSING.sub("", text)
    text = _ELEMENT.sub("", text)
    text = remove_nested(text, "{{", "}}")
    text = remove_nested(text, "{|", "|}")
    text = resolve_links(text)
    text = _EXTERNAL_LINK.sub(r"\1", text)
    text = _BARE_URL.sub("", text)
    text = _LINE_BREAK_TAG.sub(" ", text)
    text = _ANY_TAG.sub("", text)
    text = _QUOTE_MARKUP.sub("", text)
    text = _MAGIC_WORD.sub("", text)
    return _prose_paragraphs(html.unescape(text))


def remove_nested(text: str, opener: str, closer: str) -> str:
    """Deletes every `opener ... closer` span, counting nested pairs.

    An unbalanced opener drops the rest of the text: dump pages end
    truncated sometimes, and a half template is no prose.
    """
    pieces = []
    depth = 0
    position = 0
    kept_from = 0
    while True:
        next_open = text.find(opener, position)
        next_close = text.find(closer, position) if depth else -1
        if depth == 0:
            if next_open < 0:
                pieces.append(text[kept_from:])
                return "".join(pieces)
            pieces.append(text[kept_from:next_open])
            depth, position = 1, next_open + len(opener)
        elif next_close < 0:
            return "".join(pieces)
        elif 0 <= next_open < next_close:
            depth, position = depth + 1, next_open + len(opener)
        else:
            depth, position = depth - 1, next_close + len(closer)
            kept_from = position


def resolve_links(text: str) -> str:
    """Replaces internal links by their visible label, innermost first.

    Resolving from the inside out lets a file caption containing links
    collapse into plain text before the file link itself is dropped.
    """
    previous = None
    while previous != text:
        previous = text
        text = _INNER_LINK.sub(_link_label, text)
    return text


def _link_label(match: re.Match) -> str:
    target, _, label = match.group(1).partition("|")
    lowered = target.strip().lower()
    if lowered.startswith(HIDDEN_LINK_PREFIXES):
        return ""
    if not label and _INTERLANGUAGE.match(lowered):
        return ""
    shown = label.rsplit("|", 1)[-1] if label else target.lstrip(":")
    return shown.strip()


def _prose_paragraphs(text: str) -> list[str]:
    """Joins running lines into paragraphs; drops headings, lists, table rows."""
    paragraphs: list[str] = []
    current: list[str] = []
    in_trailing_section = False

    def flush() -> None:
        if current:
            paragraphs.append(_tidy(" ".join(current)))
            current.clear()

    for raw_line in text.split("\n"):
        line = raw_line.strip()
        heading = _HEADING.match(line)
        if heading:
            flush()
            in_trailing_section = heading.group(2).strip().lower() in TRAILING_SECTIONS
        elif not line or line.startswith(("*", "#", ":", ";", "|", "!", "{", "}", "----")):
            flush()
        elif not in_trailing_section:
            current.append(line)
    flush()
    return [paragraph for paragraph in paragraphs if paragraph]


def _tidy(paragraph: str) -> str:
    paragraph = _EMPTY_BRACKETS.sub("", paragraph)
    paragraph = _SPACES.sub(" ", paragraph)
    return _SPACE_BEFORE_PUNCTUATION.sub(r"\1", paragraph).strip()


def _local_name(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]
