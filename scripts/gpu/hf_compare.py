"""The CUDA backend against Hugging Face transformers on the same GPU, in the same run (scripts/gpu/check.sh).

For every fixture case: transformers runs the checkpoint on the GPU in float32 (the stored weights are exactly
bf16-representable, see scripts/fixtures/make_fixtures.py) and in bfloat16; our engine's context logits (written by
the cuda-model test under CUDA_MODEL_DUMP) must be within 1e-2 relative error (‖diff‖ / ‖ref‖) of the float32 run,
and our greedy continuation (teacher-forced on transformers' tokens, see native/test/cuda-model.cpp) must equal
transformers' greedy loop on the GPU up to the first step whose top-1 margin is within twice our max logits error
(the reference margin no longer allows a verdict there). transformers' own bfloat16 error is printed beside ours as
the scale of "bf16's range".

usage: python3 scripts/gpu/hf_compare.py <repo root> <dump dir>
"""
import json
import os
import sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM

TOL = 1e-2


def rel_err(a, b):
    """‖a − b‖ / ‖b‖ (the library METHOD's measure; bf16 operands land between 1e-3 and 1e-2)."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def max_abs(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def main():
    root, dump = sys.argv[1], sys.argv[2]
    dev = torch.device("cuda")
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    failures = 0
    for name in ["tiny-llama", "tiny-llama-sharded", "tiny-gpt2"]:
        d = os.path.join(root, "test/fixtures/models", name)
        ref = json.load(open(os.path.join(d, "reference.json")))
        m32 = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).to(dev).eval()
        m16 = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16).to(dev).eval()
        for ci, case in enumerate(ref["cases"]):
            ids = torch.tensor([case["input_ids"]], device=dev)
            with torch.no_grad():
                l32 = m32(ids).logits[0].float().cpu().numpy()
                l16 = m16(ids).logits[0].float().cpu().numpy()
            path = os.path.join(dump, f"{name}-case{ci}.f32")
            ours = np.fromfile(path, dtype=np.float32).reshape(l32.shape)
            e_ours, e_hf16 = rel_err(ours, l32), rel_err(l16, l32)
            close = 2 * max_abs(ours, l32)
            # Greedy, one full forward per step (no cache: the simplest reference).
            seq = list(case["input_ids"])
            want, stop_note = [], ""
            n = len(case["greedy_output_ids"])
            with torch.no_grad():
                for _ in range(n):
                    row = m32(torch.tensor([seq], device=dev)).logits[0, -1].float()
                    top2 = torch.topk(row, 2).values
                    tok = int(torch.argmax(row))
                    want.append(tok)
                    seq.append(tok)
                    if float(top2[0] - top2[1]) <= close:
                        stop_note = f" (compared up to step {len(want)}: margin {float(top2[0] - top2[1]):.3g})"
                        break
            got = [int(t) for t in open(os.path.join(dump, f"{name}-case{ci}.greedy.txt")).read().split()]
            same = got[: len(want)] == want
            ok = e_ours < TOL and same
            failures += 0 if ok else 1
            print(f"{'ok  ' if ok else 'FAIL'} {name}/case{ci}: logits rel err ours {e_ours:.2e} "
                  f"(transformers bf16: {e_hf16:.2e}; max-abs based: ours {max_abs(ours, l32) / np.max(np.abs(l32)):.2e}, "
                  f"transformers bf16 {max_abs(l16, l32) / np.max(np.abs(l32)):.2e}) vs transformers fp32 on the GPU; greedy "
                  f"{'identical' if same else 'DIFFERENT'} for {len(want)} tokens{stop_note}")
        del m32, m16
        torch.cuda.empty_cache()
    print(f"{failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
