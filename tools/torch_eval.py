#!/usr/bin/python3
"""torch_eval.py: independent evaluation of a pipezip checkpoint in PyTorch.

    /usr/bin/python3 tools/torch_eval.py --model M.safetensors --data X.bin \\
        --batch B --seq T --batches N [--float32]

Prints {"loss": L}: the mean next-token cross-entropy (natural log) over the
first N batches of the shard in file order, as `pipezip eval --model FILE
--data FILE --batch B --seq T --batches N` does. Batch k is tokens
[k*B*T, (k+1)*B*T] (B*T + 1 tokens): row b has inputs tokens[kBT + bT ..
kBT + bT + T - 1] and targets shifted by one. Every batch has B*T positions,
so the mean over batches is the mean over all N*B*T positions.

The model (tools/torch_gpt2.py) is computed in float64 unless --float32. The
checkpoint is a safetensors file in HF GPT-2 naming and layout with
__metadata__ "n_head" (and, if wte is padded, "vocab_size").
Needs Debian's python3-torch: run with /usr/bin/python3.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_gpt2 as tg  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="safetensors checkpoint or HF model directory")
    ap.add_argument("--data", required=True, help="llm.c token shard (uint16)")
    ap.add_argument("--batch", type=int, required=True, help="B")
    ap.add_argument("--seq", type=int, required=True, help="T")
    ap.add_argument("--batches", type=int, required=True, help="N")
    ap.add_argument("--float32", action="store_true", help="compute in float32, not float64")
    args = ap.parse_args()
    B, T, N = args.batch, args.seq, args.batches
    if B < 1 or T < 1 or N < 1:
        sys.exit("torch_eval: --batch, --seq and --batches must be >= 1")

    model = tg.model_from_safetensors(args.model, torch.float32 if args.float32 else torch.float64)
    model.eval()
    if T > model.maxT:
        sys.exit("torch_eval: --seq %d exceeds the model's %d positions" % (T, model.maxT))
    toks = tg.load_shard(args.data)
    need = N * B * T + 1
    if toks.numel() < need:
        sys.exit("torch_eval: %s holds %d tokens, %d batches of %dx%d need %d"
                 % (args.data, toks.numel(), N, B, T, need))
    if int(toks[:need].max()) >= model.V:
        sys.exit("torch_eval: token %d >= vocab size %d" % (int(toks[:need].max()), model.V))

    total = 0.0
    with torch.no_grad():
        for k in range(N):
            buf = toks[k * B * T: (k + 1) * B * T + 1]
            x = buf[:-1].view(B, T)
            y = buf[1:].view(B, T)
            _, loss = model(x, y)
            total += float(loss)
    print(json.dumps({"loss": total / N}))


if __name__ == "__main__":
    main()
