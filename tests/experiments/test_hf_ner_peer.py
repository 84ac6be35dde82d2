"""The PyTorch tagging peer on a tiny random BERT: it learns a toy tag and tags every word.

Run in the reference interpreter (torch and transformers); skipped, saying
so, where there is none.
"""

import json
import subprocess

from experiments import conll
from tests.fixtures import TestCase
from tests.reference_python import NO_REFERENCE, reference_python, run_reference

WORDS = ["paris", "rome", "is", "big", "the", "city", "we", "saw"]
MAKE_MODEL = """
import json, sys
import torch, transformers
torch.manual_seed(1)  # the same random model every run: the test's outcome is fixed
config = transformers.BertConfig(vocab_size=int(sys.argv[2]), hidden_size=16,
                                 num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=32, max_position_embeddings=64)
transformers.BertModel(config).save_pretrained(sys.argv[1])
print(json.dumps("ok"))
"""


class HfNerPeerTest(TestCase):

    def test_learns_a_toy_tag_and_tags_every_word(self):
        python = reference_python()
        if python is None:
            self.skipTest(NO_REFERENCE)
        folder = self.tmp_path()
        vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
        (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
        run_reference(python, MAKE_MODEL, str(folder), str(len(vocab)))
        sentences = [["paris", "is", "big"], ["we", "saw", "rome"], ["the", "city", "is", "big"],
                     ["rome", "paris"] + ["the"] * 30]  # longer than the window: truncated
        tags = [["B-LOC" if word in ("paris", "rome") else "O" for word in sentence]
                for sentence in sentences]
        request = {"model_dir": str(folder), "do_lower_case": True, "seed": 1,
                   "labels": ["O", "B-LOC"], "learning_rate": 3e-2, "epochs": 30,
                   "batch_size": 4, "max_seq_length": 16, "warmup_proportion": 0.1,
                   "bias_correction": False, "train": {"words": sentences, "tags": tags},
                   "predict": {"valid": sentences}}
        (folder / "request.json").write_text(json.dumps(request))
        subprocess.run([python, str(conll.PEER), str(folder / "request.json"),
                        str(folder / "answer.json")], check=True, capture_output=True,
                       env={"HF_HUB_OFFLINE": "1", "OMP_WAIT_POLICY": "PASSIVE",
                            "PATH": "/usr/bin:/bin"})
        answer = json.loads((folder / "answer.json").read_text())
        self.assertEqual([len(t) for t in answer["tags"]["valid"]], [len(s) for s in sentences])
        self.assertEqual(answer["tags"]["valid"][:3], tags[:3])
        self.assertEqual(answer["train_loss"][-1][0], 30)  # floor(4 x 30 / 4) updates
        self.assertLess(answer["train_loss"][-1][1], 0.1)
