#!/usr/bin/python3
"""make_hf_dir.py: writes a random GPT-2 as Hugging Face publishes one: a
directory with config.json and model.safetensors (or, with --shards K, K
shards and model.safetensors.index.json), HF tensor names, Conv1D weights
stored (in, out), no head count in the safetensors metadata (HF writes only
{"format": "pt"}). The weights come from tools/torch_gpt2.py's independent
model with a seeded initialisation scaled up so attention is not uniform.

    make_hf_dir.py OUT_DIR --embd C --heads NH [--layers L --vocab V
                   --positions T --seed S --shards K --no-config]
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import torch_gpt2 as tg  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--embd", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=300)
    ap.add_argument("--positions", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shards", type=int, default=0)
    ap.add_argument("--no-config", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    m = tg.GPT2(a.vocab, a.positions, a.layers, a.heads, a.embd)
    with torch.no_grad():
        for name, p in m.named_parameters():
            # torch_gpt2's Conv1D starts at zero: draw every parameter, with
            # attention sharp enough that the head count changes the loss
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
                p.uniform_(0.5, 1.5)
            elif name.endswith(".bias"):
                p.normal_(0.0, 0.02)
            else:
                p.normal_(0.0, 0.5 if "c_attn" in name else 0.2 if name in ("wte.weight", "wpe.weight")
                          else 1.0 / a.embd ** 0.5)
    tensors = {k: v for k, v in m.state_dict().items()}
    os.makedirs(a.out, exist_ok=True)
    if a.shards > 0:
        names = sorted(tensors)
        weight_map = {}
        for k in range(a.shards):
            part = names[k::a.shards]
            fname = "model-%05d-of-%05d.safetensors" % (k + 1, a.shards)
            tg.save_safetensors(os.path.join(a.out, fname), {n: tensors[n] for n in part}, {"format": "pt"})
            weight_map.update({n: fname for n in part})
        total = sum(t.numel() * 4 for t in tensors.values())
        with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    else:
        tg.save_safetensors(os.path.join(a.out, "model.safetensors"), tensors, {"format": "pt"})
    if not a.no_config:
        config = {
            "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
            "attn_pdrop": 0.1, "bos_token_id": 0, "embd_pdrop": 0.1, "eos_token_id": 0,
            "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
            "n_ctx": a.positions, "n_embd": a.embd, "n_head": a.heads, "n_inner": None,
            "n_layer": a.layers, "n_positions": a.positions, "resid_pdrop": 0.1,
            "summary_activation": None, "summary_type": "cls_index", "summary_use_proj": True,
            "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
            "vocab_size": a.vocab,
        }
        with open(os.path.join(a.out, "config.json"), "w") as f:
            json.dump(config, f, indent=2)


if __name__ == "__main__":
    main()
