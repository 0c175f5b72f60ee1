"""Build a tiny, randomly initialised Llama and its tokenizer locally (no model hub).

Usage: python build_model.py OUT_DIR [--seed N] [--layers L --hidden H --intermediate I
                                                 --heads A --kv-heads K]

* Tokenizer: byte-level BPE trained with `tokenizers` on pseudo-words generated from a fixed seed
  (vocabulary 2048 including <s>, </s>, <unk>), saved as a Hugging Face fast tokenizer.
* Model: LlamaConfig with 2 layers, hidden size 256, 4 heads of 64 (2 KV heads), intermediate 512,
  tied input/output embeddings, random weights from a fixed seed, saved with save_pretrained
  (safetensors). The size options change the shape only (heads stay 64 wide); real-vllm.sh builds
  a larger one for the goodput batches (SIZES there), whose engine steps take milliseconds.

Why tied embeddings: the last token's embedding dominates the residual stream of a random
model, so the logits h·E favour that token again; greedy decoding repeats it, and the n-gram
drafter's drafts (copies of earlier tokens) are then accepted. That gives high acceptance at
temperature 0 and almost none when sampling at temperature 1.

EOS: one embedding dimension is set to a constant for every token and higher (by EOS_EXCESS) for
</s>, which raises the logit of </s> against every other token. EOS_EXCESS = 0.7 was tuned with
transformers on this seed: </s> then stays below the repeated token for most prompts (greedy
decoding repeats; a few prompts end by EOS at once), and sampling at temperature 0.2 ends about a
third of the requests by EOS at random lengths.
"""

import argparse
import json
import os
import random

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

VOCAB = 2048
SPECIALS = ["<unk>", "<s>", "</s>"]
CONST_DIM = 0
CONST_VALUE = 0.3
EOS_EXCESS = 0.7


def corpus(seed: int, n_lines: int = 4000):
    rng = random.Random(seed)
    onsets = ["", "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "st", "tr", "pl"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ou", "ea"]
    codas = ["", "", "n", "r", "s", "t", "l", "nd", "st"]
    words = [
        "".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas) for _ in range(rng.randint(1, 3)))
        for _ in range(3000)
    ]
    for _ in range(n_lines):
        yield " ".join(rng.choice(words) for _ in range(rng.randint(5, 20))) + rng.choice([".", ",", "?", "!"])


def build_tokenizer(out: str, seed: int) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(seed), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="</s>"
    )
    fast.model_max_length = 1024
    fast.save_pretrained(out)
    return fast


def build_model(out: str, tok: PreTrainedTokenizerFast, seed: int, size: argparse.Namespace) -> dict:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=size.hidden,
        intermediate_size=size.intermediate,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        num_key_value_heads=size.kv_heads,
        head_dim=64,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        emb = model.get_input_embeddings().weight
        emb[:, CONST_DIM] = CONST_VALUE
        emb[tok.eos_token_id, CONST_DIM] = CONST_VALUE + EOS_EXCESS
    model = model.to(torch.bfloat16)
    model.save_pretrained(out)
    return config.to_dict()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=20260)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--intermediate", type=int, default=512)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tok = build_tokenizer(args.out, args.seed)
    cfg = build_model(args.out, tok, args.seed, args)
    with open(os.path.join(args.out, "build.json"), "w") as f:
        json.dump({"seed": args.seed, "const_dim": CONST_DIM, "const_value": CONST_VALUE,
                   "eos_excess": EOS_EXCESS, "vocab": len(tok)}, f, indent=1)
    print(json.dumps({k: cfg[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers",
                                           "num_attention_heads", "num_key_value_heads",
                                           "intermediate_size", "tie_word_embeddings")}))


if __name__ == "__main__":
    main()
