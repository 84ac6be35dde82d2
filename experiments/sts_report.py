"""The STS-B page: `BertTextEmbedder` beside sentence-transformers, as markdown and a PNG."""

from __future__ import annotations

from pathlib import Path

from core import extras

with extras.needed("experiments"):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
import numpy as np  # noqa: E402

from core.atomic import write_atomically  # noqa: E402
from experiments.provenance import provenance_lines  # noqa: E402


def markdown(scores: dict, stem: str) -> str:
    dev, test = scores["dev"], scores["test"]
    gap = abs(dev["ours"] - dev["reference"])
    lines = [
        "# Sentence embeddings: STS-B", "",
        "`BertTextEmbedder.from_pretrained` on the all-MiniLM-L6-v2 folder (mean pooling, "
        "then L2 normalization, 256 tokens, as the folder's sentence-transformers files say) "
        "beside `SentenceTransformer(folder).encode` on the same folder; each pair is scored "
        "by the cosine of its two vectors, and the figure is the Spearman correlation of the "
        "cosines with the gold scores (MTEB's STSBenchmark metric). The longest of the "
        f"{scores['sentences']} distinct sentences takes {scores['window']} tokens, so the "
        "embedder ran with that window instead of 256: nothing is cut by either, and padding "
        "never reaches a vector.", "",
        "| split | pairs | BertTextEmbedder | sentence-transformers | largest cosine "
        "difference |", "|---|---|---|---|---|",
        f"| dev | {dev['pairs']} | {dev['ours']:.6f} | {dev['reference']:.6f} | "
        f"{dev['max_cosine_difference']:.1e} |",
        f"| test (unlabelled here) | {test['pairs']} | see below | see below | "
        f"{test['max_cosine_difference']:.1e} |", "",
        f"Dev Spearman: the two differ by {gap:.1e}, "
        f"{'equal' if round(dev['ours'], 4) == round(dev['reference'], 4) else 'NOT equal'}"
        " to 4 decimals.", "",
        "The GLUE download's STS-B test split carries no scores, so no test Spearman is "
        f"computed here: `{stem}_test_scores.tsv` holds, for each test pair (GLUE's "
        "`index`), the cosine of both implementations, for whoever holds the labels to score. "
        f"For context, MTEB publishes {scores['mteb_test_spearman']:.4f} cosine Spearman on "
        "the STSBenchmark test split for this model (sentence-transformers' vectors).", "",
        f"![{stem}]({stem}.png)", ""]
    seconds = {name: tuple(value) for name, value in scores["seconds"].items()}
    lines += provenance_lines(scores["command"], seconds, scores["data"].items(),
                              scores["machine"])
    return "\n".join(lines) + "\n"


def plot(ours: np.ndarray, reference: np.ndarray, scores: dict):
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    left.scatter(reference, ours, s=4, alpha=0.5)
    left.plot([-0.2, 1], [-0.2, 1], color="grey", linewidth=0.8)
    left.set(xlabel="sentence-transformers cosine", ylabel="BertTextEmbedder cosine",
             title=f"STS-B dev, {len(ours)} pairs")
    names = ["BertTextEmbedder\n(dev)", "sentence-transformers\n(dev)"]
    values = [scores["dev"]["ours"], scores["dev"]["reference"]]
    right.bar(names, values, color=["tab:blue", "tab:orange"])
    right.scatter([1.5], [scores["mteb_test_spearman"]], color="red", marker="D", zorder=3,
                  label="MTEB, test split")
    for index, value in enumerate(values):
        right.text(index, value + 0.01, f"{value:.4f}", ha="center")
    right.set(ylim=(0, 1), ylabel="cosine Spearman", title="Spearman with gold scores")
    right.legend(loc="lower right")
    figure.tight_layout()
    return figure


def render(scores: dict, ours: np.ndarray, reference: np.ndarray, output_dir: Path,
           stem: str) -> None:
    """Writes `<stem>.md` and `<stem>.png` into `output_dir`."""
    figure = plot(ours, reference, scores)
    staging = output_dir / f".{stem}.png.tmp.png"
    figure.savefig(staging, dpi=110)
    plt.close(figure)
    staging.replace(output_dir / f"{stem}.png")
    write_atomically(output_dir / f"{stem}.md", markdown(scores, stem))
