"""The variants per table: the paper's rows, its numbers beside ours, and the notes.

Each function lays out one table from the runs a `GridBuilder` makes; the
builder decides how a model is pre-trained and fine-tuned, a table only
which models and which cells. Tables sit above the builder: `table(name,
builder)` builds one, and the builder knows nothing of them.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

from experiments.cells import Cell, MetricCell, Row, Table
from experiments.grid import GridBuilder
from experiments.scales import model_shape
from modeling.feature_tagger import FEATURE_LAYERS


def table5(builder: GridBuilder) -> Table:
    shape = builder.scale.base_model
    bert = builder.pretrain("mlm_nsp", shape)
    no_nsp = builder.pretrain("mlm", shape, nsp=False)
    ltr = builder.pretrain("ltr", shape, nsp=False, masked_lm_prob=0.0)
    paper = {
        "BERT (MLM + NSP)": (84.4, 88.4, 86.7, 92.7, 88.5),
        "No NSP": (83.9, 84.9, 86.5, 92.6, 87.9),
        "LTR & No NSP": (82.1, 84.3, 77.5, 92.1, 77.8),
        "+ BiLSTM": (82.1, 84.1, 75.7, 91.6, 84.9)}
    columns = builder.columns()
    bilstm = {"bilstm_units": shape[1]}  # as wide as the encoder, per direction
    rows = [Row("BERT (MLM + NSP)", builder.downstream(bert), pretraining=bert),
            Row("No NSP", builder.downstream(no_nsp), pretraining=no_nsp),
            Row("LTR & No NSP", builder.downstream(ltr, causal=True), pretraining=ltr),
            Row("+ BiLSTM", builder.downstream(ltr, causal=True, head=bilstm))]
    for row in rows:
        row.paper = _paper_glue(paper[row.name])
    return Table("5", "Pre-training tasks", columns, rows, _paper_column_names(columns), [
        "The left-to-right model is fine-tuned with `run_classifier.py --causal` "
        "(the last token's vector classifies; on MRPC, QQP and STS-B with GPT's "
        "`--both_orders`, both orders of the pair added), and with `--causal` of "
        "`run_ner.py` and `run_squad.py` (each token's tag or span score sees only the "
        "tokens up to it, as the paper's LTR model on SQuAD).",
        f"`+ BiLSTM`: the left-to-right model fine-tuned with a randomly initialized "
        f"BiLSTM of {shape[1]} units per direction on top (`--bilstm_units`): tagging "
        "and SQuAD read its outputs, sentiment its two final states.",
        "Tagging has no column in the paper's Table 5 (its token-level task is SQuAD, "
        "where LTR loses 10.9 F1)."])

def table6(builder: GridBuilder) -> Table:
    rows = []
    for layers, hidden in builder.scale.table6_models:
        pretrained = builder.pretrain("mlm_nsp", (layers, hidden))
        cells: dict[str, Cell | None] = {
            "perplexity": MetricCell(pretrained, ("perplexity",))}
        cells.update(builder.downstream(pretrained))
        heads = model_shape(layers, hidden)["num_attention_heads"]
        rows.append(Row(f"L{layers}/H{hidden}/A{heads}", cells, pretraining=pretrained))
    return Table("6", "Model size", builder.columns("perplexity"), rows, {}, [
        "Masked-LM perplexity on the pre-training records (the paper: held-out training "
        "data), all sizes after the same number of updates.",
        "The paper's sizes are much larger and do not line up with these rows; its "
        "numbers (L/H/A: perplexity, MNLI-m, MRPC, SST-2): 3/768/12: 5.84, 77.9, 79.8, "
        "88.4; 6/768/3: 5.24, 80.6, 82.2, 90.7; 6/768/12: 4.68, 81.9, 84.8, 91.3; "
        "12/768/12: 3.99, 84.4, 86.7, 92.9; 12/1024/16: 3.54, 85.7, 86.9, 93.3; "
        "24/1024/16: 3.23, 86.6, 87.8, 93.7."])

def table7(builder: GridBuilder) -> Table:
    if builder.data.tagging is None:
        raise ValueError("Table 7 is about tagging: the scale leaves the tagging task out")
    shape = builder.scale.feature_model or builder.scale.base_model
    if shape[0] < 4:
        raise ValueError(f"Table 7 reads the last four blocks, but the {builder.scale.name} "
                         f"scale's model has {shape[0]}: set its feature_model")
    pretrained = builder.pretrain("mlm_nsp", shape)
    paper = {"fine-tune all": 96.4, "embeddings": 91.0, "second_to_last": 95.6,
             "last": 94.9, "sum_last_four": 95.9, "concat_last_four": 96.1,
             "sum_all": 95.5}
    rows = [Row("fine-tune all", {"tagging": builder.tag(pretrained)},
                {"tagging": paper["fine-tune all"]}, pretraining=pretrained)]
    for layers in FEATURE_LAYERS:
        rows.append(Row(layers, {"tagging": builder.tag(pretrained, layers)},
                        {"tagging": paper[layers]}))
    return Table("7", "Feature-based vs fine-tuning (tagging)", ["tagging"], rows,
                 {"tagging": "CoNLL-2003 NER dev F1"}, [
        "Feature-based rows: the frozen encoder's layers feed a two-layer BiLSTM "
        f"of {builder.scale.feature_tagger['lstm_units']} units per direction "
        "(`run_ner.py --mode=feature_based`); `sum_all` sums the embeddings and every "
        "block, as the paper's 'all 12 layers'.",
        f"The model is L{pretrained.model['num_hidden_layers']}/"
        f"H{pretrained.model['hidden_size']}, pre-trained like the others: the "
        "last-four rows need at least four blocks."])

def table8(builder: GridBuilder) -> Table:
    strategies = {  # MASK / SAME / RND, as the paper writes them, with its numbers
        (80, 10, 10): (84.2, 95.4, 94.9), (100, 0, 0): (84.3, 94.9, 94.0),
        (80, 0, 20): (84.1, 95.2, 94.6), (80, 20, 0): (84.4, 95.2, 94.7),
        (0, 20, 80): (83.7, 94.8, 94.6), (0, 0, 100): (83.6, 94.9, 94.6)}
    columns = builder.columns()
    if builder.data.tagging is not None:
        columns.insert(columns.index("tagging") + 1, "tagging (feature-based)")
    layers, _ = builder.scale.base_model
    feature_layers = "concat_last_four" if layers >= 4 else "sum_all"
    rows = []
    for (mask, same, random), numbers in strategies.items():
        pretrained = builder.pretrain("mlm_nsp", builder.scale.base_model,
                                   mask_ratios=(mask / 100, random / 100, same / 100))
        cells = builder.downstream(pretrained)
        if builder.data.tagging is not None:
            cells["tagging (feature-based)"] = builder.tag(pretrained, feature_layers)
        paper = {"sentiment": numbers[0], "tagging": numbers[1],
                 "tagging (feature-based)": numbers[2]}
        if any(task == "MNLI" for task, _ in builder.data.glue):
            paper["MNLI"] = numbers[0]
        rows.append(Row(f"{mask}/{same}/{random}", cells, paper, pretraining=pretrained))
    return Table("8", "Masking strategies (MASK / SAME / RND)", columns, rows, {
        "sentiment": "MNLI", "tagging": "NER fine-tune",
        "tagging (feature-based)": "NER feature-based", "MNLI": "MNLI"}, [
        "The paper fine-tunes MNLI where we fine-tune sentiment; its MNLI numbers are shown "
        "beside ours to compare the spread between strategies, not the level.",
        f"Feature-based: {feature_layers}; the paper concatenates the last four layers "
        "(`concat_last_four`), which a model of fewer than four blocks does not have, "
        "and then the sum of all layers (`sum_all`, 95.5 in its Table 7) stands in."])

def figure5(builder: GridBuilder) -> Table:
    first = builder.scale.phases[0].steps
    if max(builder.scale.figure_steps) > first:
        raise ValueError(f"the {builder.scale.name} scale evaluates step "
                         f"{max(builder.scale.figure_steps)} of a {first}-step first phase: "
                         "figure_steps must not exceed the first phase's steps")
    rows = []
    save_every = math.gcd(*builder.scale.figure_steps)
    for name, objective, records in (
            ("MLM", "mlm", {"nsp": False}),
            ("LTR", "ltr", {"nsp": False, "masked_lm_prob": 0.0})):
        pretrained = builder.pretrain_phases(objective, builder.scale.base_model, save_every,
                                          **records)[0]
        for step in builder.scale.figure_steps:
            cells: dict[str, Cell | None] = {"LM accuracy": MetricCell(
                builder.evaluate(pretrained, step), ("masked_lm_accuracy", "lm_accuracy"),
                percent=True)}
            cells.update({column: cell for column, cell in builder.downstream(
                pretrained, causal=objective == "ltr", step=step).items()
                if column != "tagging"})
            rows.append(Row(f"{name} @ {step}", cells, series=name, step=step,
                            pretraining=pretrained))
    columns = [column for column in builder.columns("LM accuracy") if column != "tagging"]
    return Table("fig5", "Pre-training steps: MLM vs LTR", columns, rows, {}, [
        "Both objectives without next-sentence prediction, so only the direction differs. "
        "The points are checkpoints of the first pre-training phase, fine-tuned at its "
        f"length ({builder.scale.phases[0].max_seq_length} tokens). "
        "LM accuracy is masked-LM accuracy for MLM and next-token accuracy for LTR: "
        "different tasks, each shown against its own steps.",
        "The paper (Figure 5) plots MNLI dev accuracy: MLM converges slightly slower than "
        "LTR but outperforms it in absolute accuracy almost immediately."],
        figure=True)

def gpt_layers(builder: GridBuilder) -> Table:
    """GPT's Figure 2 (left): fine-tuning from the first k pre-trained blocks, k = 0..L."""
    blocks = builder.scale.base_model[0]
    rows = []
    for name, objective, causal, records in (
            ("bidirectional (MLM)", "mlm", False, {"nsp": False}),
            ("left-to-right (LM)", "ltr", True, {"nsp": False, "masked_lm_prob": 0.0})):
        pretrained = builder.pretrain(objective, builder.scale.base_model, **records)
        for layers in range(blocks + 1):
            cells = {column: cell for column, cell in builder.downstream(
                pretrained, causal, transfer=_transfer(layers, blocks)).items()
                if column in ("sentiment", "tagging")}
            rows.append(Row(f"{name}, {layers} of {blocks} blocks", cells, series=name,
                            step=layers, pretraining=pretrained))
    columns = [column for column in builder.columns() if column in ("sentiment", "tagging")]
    return Table("gpt_layers", "Transferring the first k pre-trained blocks", columns,
                 rows, {}, [
        "GPT (Radford et al., 2018), Figure 2 left: fine-tuning starts from the "
        "pre-trained embeddings and the first k blocks; the blocks above and the pooler "
        "start random (`--transfer_layers=k`). Both models are Table 5's No NSP and "
        "LTR pre-trainings, so the all-blocks points are Table 5's cells.",
        "GPT found that each transferred layer helps, up to about 9% on MultiNLI with "
        "all 12 layers."], figure=True, x_label="pre-trained blocks transferred")


def _transfer(layers: int, blocks: int) -> dict:
    """The fine-tuning flag for the first `layers` blocks; none for all (Table 5's runs)."""
    return {} if layers == blocks else {"transfer_layers": layers}


def _paper_glue(numbers: tuple[float, ...]) -> dict[str, float]:
    mnli, qnli, mrpc, sst2, squad = numbers
    return {"sentiment": sst2, "MNLI": mnli, "QNLI": qnli, "MRPC": mrpc, "SST-2": sst2,
            "SQuAD": squad}


def _paper_column_names(columns: Sequence[str]) -> dict[str, str]:
    names = {"sentiment": "SST-2", "MNLI": "MNLI-m", "QNLI": "QNLI", "MRPC": "MRPC",
             "SST-2": "SST-2", "SQuAD": "SQuAD v1.1 F1"}
    return {column: names[column] for column in columns if column in names}


BUILDERS: dict[str, Callable[[GridBuilder], Table]] = {
    "5": table5, "6": table6, "7": table7, "8": table8, "fig5": figure5,
    "gpt_layers": gpt_layers}
TABLES = tuple(BUILDERS)


def table(name: str, builder: GridBuilder) -> Table:
    """Table `name` (one of TABLES), its cells' runs built by `builder`."""
    return BUILDERS[name](builder)
