"""Baseline for bench/RESULTS.md's CUDA figures: Hugging Face transformers' generate() on the same shape, same GPU,
same run. Random bf16 weights of a config.json's shape (values do not change the work done), greedy, input/output
128/128 at several batch sizes; prints output tokens per second per batch and the best, as JSON last.

usage: python3 bench/hf-generate.py <config dir> [--batches 1,64,256] [--input 128] [--output 128]
"""
import argparse
import json
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config_dir")
    ap.add_argument("--batches", default="1,64,256")
    ap.add_argument("--input", type=int, default=128)
    ap.add_argument("--output", type=int, default=128)
    a = ap.parse_args()
    cfg = AutoConfig.from_pretrained(a.config_dir)
    torch.manual_seed(0)
    t0 = time.time()
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
    print(f"transformers model built on the GPU in {time.time() - t0:.1f} s "
          f"({sum(p.numel() for p in model.parameters()) / 1e9:.2f}B parameters, attn {model.config._attn_implementation})")
    results = {}
    for b in [int(x) for x in a.batches.split(",")]:
        out_len = a.output if b > 1 else min(a.output, 32)
        ids = torch.randint(0, cfg.vocab_size, (b, a.input), device="cuda")
        mask = torch.ones_like(ids)
        kw = dict(max_new_tokens=out_len, min_new_tokens=out_len, do_sample=False, pad_token_id=0)
        with torch.no_grad():
            model.generate(ids[:, :16], attention_mask=mask[:, :16], max_new_tokens=4, do_sample=False, pad_token_id=0)
            torch.cuda.synchronize()
            t0 = time.time()
            out = model.generate(ids, attention_mask=mask, **kw)
            torch.cuda.synchronize()
            dt = time.time() - t0
        n = (out.shape[1] - a.input) * b
        results[b] = n / dt
        print(f"transformers generate(): batch {b}, {a.input}/{out_len}: {n} tokens in {dt:.2f} s = {n / dt:.1f} tok/s "
              f"({dt / out_len * 1000:.1f} ms per step)")
        del out
        torch.cuda.empty_cache()
    print(json.dumps({"hf_tok_s": results, "best": max(results.values())}))


if __name__ == "__main__":
    main()
