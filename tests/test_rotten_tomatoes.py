"""The real Rotten Tomatoes snippets in the SST-2 layout, read back by the GLUE processor."""

from data_prep import glue, rotten_tomatoes


def test_fixed_split_in_sst2_layout():
    folder = rotten_tomatoes.sst2_layout_dir()
    processor = glue.get_processor("SST-2")
    train = processor.train_examples(str(folder))
    dev = processor.dev_sets(str(folder))["dev"]
    test = processor.test_sets(str(folder))["SST-2"]
    assert (len(train), len(dev)) == (8000, 2000)
    assert len(test) == len(rotten_tomatoes.snippets()) - 10000 > 2000
    assert {example.label for example in train} == {"0", "1"}
    assert not {example.text_a for example in dev} & {example.text_a for example in test}
    # Same split on a rebuild: the first training sentence is fixed by the seed.
    assert train[0].text_a == rotten_tomatoes.sst2_layout_dir().joinpath(
        "train.tsv").read_text(encoding="utf-8").splitlines()[1].split("\t")[0]
