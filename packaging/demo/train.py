#!/usr/bin/env python3
# SPDX-License-Identifier: CC0-1.0
"""Trains the Splash demo model: a tiny qwen35 (Gated DeltaNet + gated attention) on the
procedural stories of storygen.py, with a byte-level BPE learned from the same corpus.

    nice -n 19 python3 train.py --out run/ --minutes 45      # then export_gguf.py run/

Everything is seeded (corpus, tokenizer, initialisation, batch order). The run keeps
run/tokenizer.json, run/checkpoint.pt (every --eval-every steps and at the end) and
run/log.csv (step, tokens, train and validation loss, seconds); --resume continues it."""
import argparse
import csv
import json
import math
import os
import random
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import storygen  # noqa: E402
from model import Config, Qwen35  # noqa: E402

SYSTEMS = ["You are a helpful assistant.", "You are a friendly storyteller.",
           "You are Splash, a small assistant that tells short stories.",
           "You are a helpful assistant. Answer in simple English."]


def format_item(rng, kind, item):
    """A corpus item as training text: stories raw, chats as ChatML turns."""
    if kind == "story":
        return item + "<|endoftext|>"
    user, reply = item
    text = ""
    if rng.random() < 0.3:
        text += f"<|im_start|>system\n{rng.choice(SYSTEMS)}<|im_end|>\n"
    text += f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    r = rng.random()
    if r < 0.15:
        text += ("<think>\nThe user wants " + ("a story" if len(reply) > 200 else "an answer") +
                 ". I will keep it short and simple.\n</think>\n\n")
    elif r < 0.25:
        text += "<think>\n\n</think>\n\n"
    return text + reply + "<|im_end|>\n<|endoftext|>"


def documents(seed, count):
    rng = random.Random(seed ^ 0x5EED)
    return [format_item(rng, k, it) for k, it in storygen.corpus(seed, count)]


def windows(docs, tok, length):
    """Token windows of length + 1, each starting at a document's start."""
    out, cur = [], []
    for d in docs:
        cur.extend(tok.encode(d))
        if len(cur) >= length + 1:
            out.append(cur[:length + 1])
            cur = []
    return torch.tensor(out, dtype=torch.long)


def lr_at(step, args, time_share=0.0):
    """Warm-up, then a cosine to a tenth, by whichever is further along: the steps or the
    wall-clock budget (time_share), so a run cut short by a busy machine still anneals."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    p = min(1.0, max((step - args.warmup) / max(1, args.steps - args.warmup), time_share))
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


@torch.no_grad()
def evaluate(model, val, batch):
    model.eval()
    total, n = 0.0, 0
    for i in range(0, len(val), batch):
        x = val[i:i + batch]
        logits = model(x[:, :-1])
        total += torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum").item()
        n += x[:, 1:].numel()
    model.train()
    return total / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--docs", type=int, default=12000)
    ap.add_argument("--val-docs", type=int, default=80)
    ap.add_argument("--merges", type=int, default=2048 - 256 - len(bpe.SPECIALS))
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=600, help="length of the LR schedule")
    ap.add_argument("--minutes", type=float, default=48.0, help="wall-clock budget")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--threads", type=int, default=1,
                    help="1 keeps a niced run from waiting on thread barriers on a busy machine")
    ap.add_argument("--n-embd", type=int, default=128)
    ap.add_argument("--n-layers", type=int, default=4)
    ap.add_argument("--n-ff", type=int, default=384)
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()

    tok_path = os.path.join(args.out, "tokenizer.json")
    docs = documents(args.seed, args.docs)
    if args.resume and os.path.exists(tok_path):
        merges = [tuple(m) for m in json.load(open(tok_path))["merges"]]
    else:
        merges = bpe.train(docs[:6000], args.merges)
        json.dump({"merges": merges}, open(tok_path, "w"))
    tok = bpe.Tokenizer(merges)
    n_vocab = len(tok.tokens)
    train = windows(docs, tok, args.ctx)
    val = windows(documents(args.seed + 1, args.val_docs), tok, args.ctx)
    print(f"vocab {n_vocab}, {len(train)} train windows of {args.ctx + 1} tokens, "
          f"{len(val)} validation; corpus ready in {time.time() - t0:.0f} s", flush=True)

    cfg = Config(n_vocab=n_vocab, n_embd=args.n_embd, n_layers=args.n_layers, n_ff=args.n_ff,
                 n_head=2, n_head_kv=1, n_ctx_train=args.ctx)
    model = Qwen35(cfg)
    print(f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    other = [p for n, p in model.named_parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    ck_path = os.path.join(args.out, "checkpoint.pt")
    log_path = os.path.join(args.out, "log.csv")
    step, seen = 0, 0
    if args.resume and os.path.exists(ck_path):
        ck = torch.load(ck_path)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, seen = ck["step"], ck["tokens"]
    else:
        with open(log_path, "w") as f:
            f.write("step,tokens,train_loss,val_loss,seconds\n")

    order = torch.randperm(len(train), generator=torch.Generator().manual_seed(args.seed))
    running = None
    deadline = t0 + args.minutes * 60

    def save(val_loss):
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                    "tokens": seen, "config": cfg.__dict__, "val_loss": val_loss,
                    "args": vars(args)}, ck_path + ".tmp")
        os.replace(ck_path + ".tmp", ck_path)

    train_t0 = time.time()

    def time_share():
        return (time.time() - train_t0) / max(1.0, deadline - train_t0)

    while step < args.steps and time.time() < deadline:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args, time_share())
        i0 = (step * args.batch) % len(train)
        idx = order[i0:i0 + args.batch]
        x = train[idx]
        logits = model(x[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, n_vocab),
                                                 x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        seen += x[:, 1:].numel()
        running = loss.item() if running is None else 0.9 * running + 0.1 * loss.item()
        if step % 10 == 0:
            print(f"step {step} loss {running:.3f} lr {lr_at(step, args, time_share()):.2e} "
                  f"{time.time() - t0:.0f} s", flush=True)
        if step % args.eval_every == 0 or step == args.steps:
            v = evaluate(model, val, args.batch)
            with open(log_path, "a") as f:
                csv.writer(f).writerow([step, seen, f"{running:.4f}", f"{v:.4f}",
                                        f"{time.time() - t0:.0f}"])
            print(f"step {step} validation loss {v:.3f}", flush=True)
            save(v)
    v = evaluate(model, val, args.batch)
    with open(log_path, "a") as f:
        csv.writer(f).writerow([step, seen, f"{running:.4f}", f"{v:.4f}",
                                f"{time.time() - t0:.0f}"])
    save(v)
    print(f"done: step {step}, {seen} tokens, validation loss {v:.3f}, "
          f"{time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
