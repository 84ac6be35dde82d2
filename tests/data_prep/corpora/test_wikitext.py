"""MediaWiki markup is reduced to the prose a reader sees; non-prose is dropped."""

import io

import tensorflow as tf

from data_prep.corpora.wikitext import (
    article_paragraphs,
    iter_articles,
    remove_nested,
    resolve_links,
)


def _dump(pages):
    body = "".join(
        f"<page><title>{title}</title><ns>{ns}</ns>{extra}"
        f"<revision><text>{text}</text></revision></page>"
        for title, ns, extra, text in pages)
    xml = f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">{body}</mediawiki>'
    return io.BytesIO(xml.encode("utf-8"))


class WikitextTest(tf.test.TestCase):

    def test_nested_templates_are_removed_whole(self):
        text = "Alpha {{Infobox|name={{lang|fr|Beta}}|x={{a|{{b}}}}}} gamma {{cite|y}}delta."
        self.assertEqual(article_paragraphs(text), ["Alpha gamma delta."])

    def test_unbalanced_template_drops_the_rest(self):
        self.assertEqual(remove_nested("kept {{cut {{x}} still cut", "{{", "}}"), "kept ")

    def test_links_show_their_label_or_target(self):
        text = "A [[political philosophy]] of [[stateless society|stateless societies]] and [[dog]]s."
        self.assertEqual(article_paragraphs(text), [
            "A political philosophy of stateless societies and dogs."])

    def test_file_category_and_interlanguage_links_vanish_even_with_nested_links(self):
        text = ("Start. [[File:X.jpg|thumb|A [[caption link|caption]] with [single] brackets]] "
                "End.[[Category:Things]][[de:Ding]] [[Image:Y.png]] [[:Category:Shown|shown]].")
        self.assertEqual(resolve_links(text), "Start.  End.  shown.")

    def test_external_links_keep_label_and_bare_urls_go(self):
        text = "See [http://example.org the site] or [https://x.org] at http://y.org/z now."
        self.assertEqual(article_paragraphs(text), ["See the site or at now."])

    def test_refs_comments_and_tags_are_removed(self):
        text = ('Fact,<ref name="a">{{cite web|url=u}} Some source.</ref> more<ref name="b"/> '
                "text<!-- hidden --> with H<sub>2</sub>O and<br/>breaks "
                "<math>x^2</math>here &amp; &nbsp;there.")
        self.assertEqual(article_paragraphs(text),
                         ["Fact, more text with H2O and breaks here & there."])

    def test_bold_and_italic_quotes_are_removed(self):
        text = "'''Anarchism''' is ''a'' '''''word''''' with an apostrophe's use."
        self.assertEqual(article_paragraphs(text),
                         ["Anarchism is a word with an apostrophe's use."])

    def test_tables_headings_lists_and_reference_sections_are_dropped(self):
        text = "\n".join([
            "First paragraph line one",
            "continues here.",
            "",
            "== History ==",
            "{| class=\"wikitable\"",
            "|-",
            "| cell {{x}} || {| nested |} cell",
            "|}",
            "* a list item",
            "# a numbered item",
            ": an indented note",
            "Second paragraph ({{IPA|x}}) here.",
            "== See also ==",
            "Some trailing text.",
            "=== Notes ===",
            "More trailing text.",
        ])
        self.assertEqual(article_paragraphs(text), [
            "First paragraph line one continues here.", "Second paragraph here."])

    def test_iter_articles_skips_redirects_and_other_namespaces(self):
        dump = _dump([
            ("Kept", 0, "", "Article text."),
            ("Moved", 0, '<redirect title="Kept" />', "#REDIRECT [[Kept]]"),
            ("Wikipedia:Policy", 4, "", "Project page."),
            ("Empty", 0, "", ""),
            ("Also kept", 0, "", "More &lt;ref&gt;x&lt;/ref&gt;text."),
        ])
        self.assertEqual(list(iter_articles(dump)), [("Kept", "Article text."),
                                                     ("Also kept", "More <ref>x</ref>text.")])


if __name__ == "__main__":
    tf.test.main()
