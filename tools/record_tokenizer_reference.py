"""Records the original BERT tokenizer's output as golden files for tests/text/test_tokenization.py.

`text.tokenization.FullTokenizer` promises the exact tokens of Google's
`FullTokenizer`, and that promise is only as good as what it is checked
against. This script runs the original itself, as published on PyPI
(`bert-tensorflow==1.0.4`, the google-research/bert `tokenization.py`),
uncased and cased, with the real bert-base-uncased vocabulary that ships
with MiniLM, on

- tricky strings that hit each rule of the original (control characters,
  whitespace kinds, accents, final sigma, CJK, length limits, ...), and
- real prose: lines of the built-in news and Wikipedia samples,

and writes `tests/golden/tokenizer_uncased.json` and `..._cased.json`, each
a list of `{"text", "tokens"}`. The test suite reads only those files, so
neither the original nor this script is needed to run it. The cased run
uses the same uncased vocabulary, so most words with capitals become [UNK];
it still pins down the cased path's deletions, word boundaries and length
limit, which no lowercasing hides there.

The original imports TensorFlow only for `tf.gfile.GFile` (to read the
vocabulary), absl only for a flag that defaults to off, and `six` only to
tell Python 3 from 2. It is run with small stand-ins for these three, so
that recording needs neither TensorFlow 1 nor the project's TensorFlow,
whose presence could not influence the reference.

    .venv/bin/python tools/record_tokenizer_reference.py
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import subprocess
import sys
import tempfile
import types
import zipfile
from pathlib import Path
from typing import Callable, Iterator, Sequence

from data_prep.corpora.assets import minilm_dir  # noqa: E402
from data_prep.corpora.builtin_corpus import news_sample_path  # noqa: E402
from data_prep.corpora.builtin_corpus import wikipedia_sample_path
from text.text_files import read_utf8_lines  # noqa: E402

ORIGINAL_PACKAGE = "bert-tensorflow==1.0.4"
ORIGINAL_MEMBER = "bert/tokenization.py"
GOLDEN_DIR = Path(__file__).resolve().parents[1] / "tests" / "golden"


def _long_word(length: int, stem: str = "internationalization") -> str:
    """One word of exactly `length` characters made of common word pieces.

    Built from pieces in the vocabulary so that a word within the
    original's 200-character limit is split into them rather than [UNK].
    """
    return (stem * (length // len(stem) + 1))[:length]


# Each string aims at one rule of the original (see its BasicTokenizer).
# Invisible characters, combining marks and look-alikes are written as escapes.
TRICKY_STRINGS: tuple[str, ...] = (
    "UNwant\u00E9d,running",
    "Héllo Wörld! Ça va? Señor Ñandú, naïve café",
    "e\u0301cole de\u0301ja\u0300 vu",  # accents already decomposed
    "ΟΔΥΣΣΕΥΣ ΚΑΙ ΣΟΦΟΣ σοφός",  # final sigma
    "ΑΣ.Β ΑΣ'Β ΑΣ\u200bΒ 1Σ Σ ΑΣ中",  # sigma before case-ignorable, deleted and CJK characters
    "Ἀθῆναι ΆΈΉ \u1fef\u1fee",  # Greek varia decomposes to a backtick
    "Straße GROẞE ß",
    "ﬁnance ﬂoor ﬀ Ĳsselmeer",  # ligatures
    "Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ １２３",
    "中文分词测试，汉字！abc中def",
    "日本語のテキストとカタカナ。",
    "한국어 텍스트 처리",  # Hangul syllables decompose to jamo when uncased
    "مرحبا بالعالم \u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627",  # harakat are marks
    "\u05e9\u05b8\u05c1\u05dc\u05d5\u05b9\u05dd \u0939\u093f\u0928\u094d\u0926\u0940 ภาษาไทย",
    "Tiếng Việt có dấu, \u041c\u043e\u0441\u043a\u0432\u0430\u0301 Ёлка",
    "İstanbul ısık Ǆ ǅ ǆ",
    "emoji 😀👍🏽 family 👨\u200d👩\u200d👧 flag 🇺🇸 heart ❤\ufe0f",
    "nul\x00inside word\x00",
    "zero\u200bwidth \u200e\u200f\u202aembedding\u202c marks",
    "\ufeffbyte order mark",
    "replacement\ufffdchar \ufffd",
    "co\u00adoperate soft hyphen",
    "tabs\tand\nnewlines\r\nand\rreturns",
    "line\u2028separator\u2029paragraph",
    "no\u00a0break ideographic\u3000space narrow\u202fnbsp em\u2003space",
    "vertical\x0btab form\x0cfeed next\x85line file\x1csep c1\x80\x9fcontrols bell\x07",
    "   \t\n  ",
    "",
    _long_word(150),
    _long_word(200),
    _long_word(201),
    _long_word(250),
    "short " + _long_word(200, "café") + " words around",
    "short " + _long_word(201, "café") + " words around",
    "e\u0301" * 150,  # 300 characters cased, 150 once accents are stripped
    _long_word(204, "привет"),  # over 200 characters, under tensorflow-text's byte limit
    "[MASK] [CLS] [SEP] [UNK] [PAD] the [MASK]ed word [unused0]",
    "private \ue000 use \uf8ff and \U000f0000 plane",
    "!!!???...---,,,;;; a--b ...and",
    "#hashtag @user $100 50% a&b ^_^ `code` ~tilde~ {braces} |pipe| \\back",
    "3.14159 1,000,000 2023-10-05 ½ ² ³ ⅓ 10⁻³ H₂O",
    "“smart quotes” ‘single’ — em – en «guillemets» … ´acute",
    "Ⅻ ⅻ Ⓐⓑ ℃ ™ ℹ",
    "𝐇𝐞𝐥𝐥𝐨 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "https://example.com/path?q=1&r=2#frag user@example.org",
    "\uf900\uf901 \U00020000\U00020001 \u3400 CJK compatibility and extensions",
    "Mixed CASE WoRdS and ALLCAPS with McDonald's O'Neill",
)


@contextlib.contextmanager
def _stand_in_modules() -> Iterator[None]:
    """Puts stand-ins for the original's three imports into sys.modules, then restores it."""
    tensorflow, compat, v1 = (types.ModuleType(name) for name in
                              ("tensorflow", "tensorflow.compat", "tensorflow.compat.v1"))
    # tf.gfile.GFile(path, "r") yields UTF-8 text split at "\n" only.
    v1.gfile = types.SimpleNamespace(
        GFile=lambda path, mode: open(path, mode, encoding="utf-8", newline="\n"))
    compat.v1, tensorflow.compat = v1, compat
    flags = types.ModuleType("absl.flags")
    flags.FLAGS = types.SimpleNamespace()
    flags.DEFINE_bool = lambda name, default, help_text: setattr(flags.FLAGS, name, default)
    absl = types.ModuleType("absl")
    absl.flags = flags
    six = types.ModuleType("six")
    six.PY2, six.PY3 = False, True
    stand_ins = {module.__name__: module for module in (tensorflow, compat, v1, absl, flags, six)}
    saved = {name: sys.modules[name] for name in stand_ins if name in sys.modules}
    sys.modules.update(stand_ins)
    try:
        yield
    finally:
        for name in stand_ins:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


def load_original(work_dir: Path) -> types.ModuleType:
    """Downloads the original package and executes its tokenization.py with the stand-ins."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
               "--disable-pip-version-check", "-d", str(work_dir), ORIGINAL_PACKAGE]
    result = subprocess.run(command, capture_output=True, text=True)
    wheels = sorted(work_dir.glob("*.whl"))
    if result.returncode != 0 or not wheels:
        raise RuntimeError(
            f"could not download {ORIGINAL_PACKAGE}: {result.stderr.strip()[-2000:]}")
    with zipfile.ZipFile(wheels[0]) as wheel:
        source = wheel.read(ORIGINAL_MEMBER).decode("utf-8")
    module = types.ModuleType("original_bert_tokenization")
    with _stand_in_modules():
        exec(compile(source, f"{wheels[0].name}/{ORIGINAL_MEMBER}", "exec"), module.__dict__)
    if module.FLAGS.preserve_unused_tokens:
        raise RuntimeError("the original's preserve_unused_tokens flag must default to off")
    return module


def corpus_lines(path: Path, count: int, rng: random.Random,
                 non_ascii_share: float) -> list[str]:
    """`count` distinct non-blank lines of a corpus, `non_ascii_share` of them with non-ASCII text.

    Lines with characters beyond ASCII are the ones that exercise the
    normalization rules, and they are rare in English prose, so they are
    drawn on purpose rather than left to chance.
    """
    lines = sorted({line for line in read_utf8_lines(str(path)) if line.strip()})
    non_ascii = [line for line in lines if not line.isascii()]
    ascii_only = [line for line in lines if line.isascii()]
    wanted = min(len(non_ascii), round(count * non_ascii_share))
    return rng.sample(non_ascii, wanted) + rng.sample(ascii_only, count - wanted)


def choose_stored(lines: Sequence[str], stored: int, rng: random.Random) -> list[str]:
    """The corpus lines to keep: every one with non-ASCII text, then ASCII ones at random.

    Golden files must stay small, and plain ASCII lines test little that
    their first few hundred do not. Both golden files keep the same lines.
    """
    special = [line for line in lines if not line.isascii()][:stored]
    plain = [line for line in lines if line.isascii()]
    kept = set(special + rng.sample(plain, min(len(plain), stored - len(special))))
    return [line for line in lines if line in kept]


def write_golden(path: Path, texts: Sequence[str], tokenize: Callable[[str], list[str]]) -> None:
    """One JSON entry per line, ASCII-escaped so no tool rewrites control characters in it."""
    entries = [json.dumps({"text": text, "tokens": tokenize(text)}, separators=(",", ":"))
               for text in texts]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[\n" + ",\n".join(entries) + "\n]\n", encoding="ascii")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines_per_corpus", type=int, default=1500,
                        help="corpus lines run through the original, from each corpus")
    parser.add_argument("--stored_lines", type=int, default=1500,
                        help="corpus lines kept in each golden file")
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--output_dir", type=Path, default=GOLDEN_DIR)
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    lines = (corpus_lines(news_sample_path(), args.lines_per_corpus, rng, non_ascii_share=0.5)
             + corpus_lines(wikipedia_sample_path(), args.lines_per_corpus, rng,
                            non_ascii_share=0.5))
    vocab_file = str(minilm_dir() / "vocab.txt")
    stored = choose_stored(lines, args.stored_lines, rng)
    with tempfile.TemporaryDirectory() as work_dir:
        original = load_original(Path(work_dir))
    for name, lower_case in (("uncased", True), ("cased", False)):
        tokenize = original.FullTokenizer(vocab_file, do_lower_case=lower_case).tokenize
        path = args.output_dir / f"tokenizer_{name}.json"
        write_golden(path, [*TRICKY_STRINGS, *stored], tokenize)
        print(f"{path}: {len(TRICKY_STRINGS)} tricky strings, {len(stored)} of {len(lines)} "
              f"corpus lines, {path.stat().st_size / 2**10:.0f} KiB")


if __name__ == "__main__":
    main()
