#!/usr/bin/env python3
# SPDX-License-Identifier: CC0-1.0
"""Writes a train.py run as a qwen35 GGUF (v3) that Splash's qwen_hybrid family serves:
2-D matrices in Q8_0 (or F32), norms and the DeltaNet's small tensors in F32, the BPE
and a ChatML template in the tokenizer.* keys.

    python3 export_gguf.py run/ splash-demo-Q8_0.gguf [--context 65536]
    python3 export_gguf.py run/ --logits "ID ID ..." out.f32   # PyTorch's logits, to compare
                                                               # with `splash logits`
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
from gguf_writer import (BOOL, F32V, FILE_TYPE, GGML_F32, GGML_Q8_0, I32, STR, U32,  # noqa: E402
                         Writer, q8_0, quantizable)
from model import Config, Qwen35  # noqa: E402

def load(run):
    ck = torch.load(os.path.join(run, "checkpoint.pt"))
    cfg = Config(**ck["config"])
    model = Qwen35(cfg)
    model.load_state_dict(ck["model"])
    model.eval()
    merges = [tuple(m) for m in json.load(open(os.path.join(run, "tokenizer.json")))["merges"]]
    return ck, cfg, model, bpe.Tokenizer(merges)


def tensors(model):
    """(GGUF name, float32 array shaped (rows, row length)) in GGUF order."""
    cfg = model.cfg
    out = [("token_embd.weight", model.token_embd.weight),
           ("output_norm.weight", model.output_norm)]
    for il, b in enumerate(model.blocks):
        p = f"blk.{il}."
        out += [(p + "attn_norm.weight", b.attn_norm),
                (p + "post_attention_norm.weight", b.post_attention_norm)]
        m = b.mixer
        if b.is_attn:
            out += [(p + "attn_q.weight", m.attn_q.weight), (p + "attn_k.weight", m.attn_k.weight),
                    (p + "attn_v.weight", m.attn_v.weight),
                    (p + "attn_output.weight", m.attn_output.weight),
                    (p + "attn_q_norm.weight", m.attn_q_norm),
                    (p + "attn_k_norm.weight", m.attn_k_norm)]
        else:
            out += [(p + "attn_qkv.weight", m.attn_qkv.weight),
                    (p + "attn_gate.weight", m.attn_gate.weight),
                    (p + "ssm_alpha.weight", m.ssm_alpha.weight),
                    (p + "ssm_beta.weight", m.ssm_beta.weight),
                    (p + "ssm_conv1d.weight", m.ssm_conv1d),
                    (p + "ssm_dt.bias", m.ssm_dt_bias),
                    (p + "ssm_a", m.ssm_a()),
                    (p + "ssm_norm.weight", m.ssm_norm),
                    (p + "ssm_out.weight", m.ssm_out.weight)]
        out += [(p + "ffn_gate.weight", b.ffn_gate.weight), (p + "ffn_up.weight", b.ffn_up.weight),
                (p + "ffn_down.weight", b.ffn_down.weight)]
    assert cfg.n_layers == len(model.blocks)
    return [(n, t.detach().float().numpy()) for n, t in out]


def export(run, path, mix, context, template):
    ck, cfg, model, tok = load(run)
    w = Writer()
    a = "qwen35"
    w.add("general.architecture", STR, a)
    w.add("general.name", STR, "splash-demo")
    w.add("general.description", STR, "A tiny story model trained on procedurally generated "
          "children's stories (packaging/demo/README.md)")
    w.add("general.license", STR, "CC0-1.0")
    w.add("general.file_type", U32, FILE_TYPE[mix])
    w.add("general.quantization_version", U32, 2)
    for key, v in [("context_length", context), ("embedding_length", cfg.n_embd),
                   ("block_count", cfg.n_layers), ("feed_forward_length", cfg.n_ff),
                   ("attention.head_count", cfg.n_head), ("attention.head_count_kv", cfg.n_head_kv),
                   ("attention.key_length", cfg.head_dim), ("attention.value_length", cfg.head_dim),
                   ("rope.dimension_count", cfg.n_rot)]:
        w.add(f"{a}.{key}", U32, v)
    w.add_array(f"{a}.rope.dimension_sections", I32, list(cfg.rope_sections))
    w.add(f"{a}.rope.freq_base", F32V, cfg.rope_base)
    w.add(f"{a}.attention.layer_norm_rms_epsilon", F32V, cfg.rms_eps)
    for key, v in [("ssm.conv_kernel", cfg.conv_kernel), ("ssm.state_size", cfg.d_k),
                   ("ssm.group_count", cfg.n_k_heads), ("ssm.time_step_rank", cfg.n_v_heads),
                   ("ssm.inner_size", cfg.n_v_heads * cfg.d_v),
                   ("full_attention_interval", cfg.full_attn_interval)]:
        w.add(f"{a}.{key}", U32, v)
    w.add("tokenizer.ggml.model", STR, "gpt2")
    w.add("tokenizer.ggml.pre", STR, "qwen2")
    w.add_array("tokenizer.ggml.tokens", STR, tok.tokens)
    w.add_array("tokenizer.ggml.token_type", I32, tok.types)
    w.add_array("tokenizer.ggml.merges", STR, [f"{x} {y}" for x, y in tok.merges])
    w.add("tokenizer.ggml.bos_token_id", U32, tok.special["<|endoftext|>"])
    w.add("tokenizer.ggml.eos_token_id", U32, tok.special["<|im_end|>"])
    w.add("tokenizer.ggml.padding_token_id", U32, tok.special["<|endoftext|>"])
    w.add("tokenizer.ggml.add_bos_token", BOOL, False)
    w.add("tokenizer.chat_template", STR, template)
    out = []
    for name, arr in tensors(model):
        ne = list(reversed(arr.shape)) if arr.ndim == 2 else [arr.shape[0]]
        if mix == "Q8_0" and quantizable(name, arr):
            data, _ = q8_0(arr)
            out.append((name, ne, GGML_Q8_0, data))
        else:
            out.append((name, ne, GGML_F32, np.ascontiguousarray(arr, dtype="<f4").tobytes()))
    w.write(path, out)
    print(f"{path}: {os.path.getsize(path)} bytes, {len(out)} tensors, step {ck['step']}, "
          f"validation loss {ck['val_loss']:.3f}")


def torch_logits(run, ids, out, mix):
    """The logits PyTorch computes for ids, with the weights rounded as the GGUF holds them."""
    ck, cfg, model, tok = load(run)
    if mix == "Q8_0":
        with torch.no_grad():
            for name, p in model.named_parameters():
                if p.dim() == 2 and quantizable(name, p.detach().numpy()) and "conv1d" not in name:
                    p.copy_(torch.from_numpy(q8_0(p.detach().numpy())[1]))
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0]
    logits.numpy().astype("<f4").tofile(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run")
    ap.add_argument("out")
    ap.add_argument("--mix", choices=["Q8_0", "F32"], default="Q8_0")
    ap.add_argument("--context", type=int, default=65536)
    ap.add_argument("--template", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "chat_template.jinja"))
    ap.add_argument("--logits", help="token ids: write PyTorch's logits to OUT instead")
    args = ap.parse_args()
    if args.logits:
        torch_logits(args.run, [int(t) for t in args.logits.split()], args.out, args.mix)
    else:
        export(args.run, args.out, args.mix, args.context, open(args.template).read())


if __name__ == "__main__":
    main()
