# SPDX-License-Identifier: CC0-1.0
"""The qwen35 hybrid trunk in PyTorch, computing what Splash's qwen_hybrid family computes
for a GGUF (families/common/hybrid_forward.c): Gated DeltaNet layers (causal conv + SiLU,
L2-normalised q/k, the gated delta rule, gated RMSNorm) and gated full-attention layers
(q/k RMSNorm, partial interleaved M-RoPE, sigmoid output gate), SwiGLU FFNs, a tied head.
Parameters are named and laid out as the GGUF tensors, so export is a rename."""
import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    n_vocab: int = 2048
    n_embd: int = 256
    n_layers: int = 4
    n_ff: int = 768
    full_attn_interval: int = 4   # layers il with (il + 1) % interval == 0 attend
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 64
    n_rot: int = 16
    rope_sections: list = field(default_factory=lambda: [4, 2, 2, 0])
    rope_base: float = 1e7
    n_k_heads: int = 2
    n_v_heads: int = 4
    d_k: int = 64
    d_v: int = 64
    conv_kernel: int = 4
    rms_eps: float = 1e-6
    n_ctx_train: int = 256

    @property
    def conv_dim(self):
        return 2 * self.n_k_heads * self.d_k + self.n_v_heads * self.d_v

    def is_attn(self, il):
        return (il + 1) % self.full_attn_interval == 0


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_on(cfg):
    """Which rotary pairs turn for text tokens (Splash's rope_tables: interleaved M-RoPE
    sections cycle t, h, w; the rest read the fourth position, 0 for text)."""
    pairs = cfg.n_rot // 2
    sec = cfg.rope_sections
    dims = sum(sec)
    on = []
    for i in range(pairs):
        if dims == 0:
            on.append(True)
            continue
        s = i % dims
        on.append((s % 3 == 0 and s < 3 * sec[0]) or (s % 3 == 1 and s < 3 * sec[1]) or
                  (s % 3 == 2 and s < 3 * sec[2]))
    return on


def rope_tables(cfg, n):
    pairs = cfg.n_rot // 2
    freq = torch.tensor([cfg.rope_base ** (-2.0 * i / cfg.n_rot) if on else 0.0
                         for i, on in enumerate(rope_on(cfg))], dtype=torch.float64)
    th = torch.arange(n, dtype=torch.float64)[:, None] * freq[None, :]
    return th.cos().float(), th.sin().float()


def apply_rope(x, cos, sin, n_rot):
    """x (B, T, heads, hd): pairs (i, i + n_rot/2) of the leading n_rot dims turn."""
    p = n_rot // 2
    a, b, rest = torch.split(x, [p, p, x.shape[-1] - n_rot], dim=-1)
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([a * c - b * s, a * s + b * c, rest], dim=-1)


def gated_delta_chunked(q, k, v, g, beta, chunk=32):
    """The gated delta rule S_t = e^g_t S_{t-1} (I - b_t k_t k_t^T) + b_t v_t k_t^T,
    o_t = S_t q_t, from a zero state, in chunks (WY form). q, k (B, H, T, dk);
    v (B, H, T, dv); g, beta (B, H, T). Returns (B, H, T, dv)."""
    B, H, T, dk = q.shape
    dv = v.shape[-1]
    pad = (-T) % chunk
    if pad:
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
        g, beta = (F.pad(t, (0, pad)) for t in (g, beta))
    N = (T + pad) // chunk
    q, k, v = (t.reshape(B, H, N, chunk, -1) for t in (q, k, v))
    g, beta = (t.reshape(B, H, N, chunk) for t in (g, beta))
    G = g.cumsum(-1)
    incl = torch.ones(chunk, chunk, dtype=torch.bool).tril()
    strict = torch.ones(chunk, chunk, dtype=torch.bool).tril(-1)
    diff = (G[..., :, None] - G[..., None, :]).masked_fill(~incl, float("-inf"))
    decay = diff.exp()
    kb = k * beta[..., None]
    A = ((kb @ k.transpose(-1, -2)) * decay).masked_fill(~strict, 0.0)
    eye = torch.eye(chunk)
    rhs = torch.cat([kb * G.exp()[..., None], v * beta[..., None]], dim=-1)
    X = torch.linalg.solve_triangular(eye + A, rhs, upper=False, unitriangular=True)
    W, Ub = X.split([dk, dv], dim=-1)
    qk = (q @ k.transpose(-1, -2)) * decay
    S = q.new_zeros(B, H, dv, dk)
    outs = []
    for n in range(N):
        St = S.transpose(-1, -2)
        U = Ub[:, :, n] - W[:, :, n] @ St
        Gn = G[:, :, n]
        outs.append((q[:, :, n] * Gn.exp()[..., None]) @ St + qk[:, :, n] @ U)
        last = Gn[..., -1:]
        S = S * last.exp()[..., None] + \
            (U * (last - Gn).exp()[..., None]).transpose(-1, -2) @ k[:, :, n]
    o = torch.stack(outs, dim=2).reshape(B, H, N * chunk, dv)
    return o[:, :, :T]


def gated_delta_recurrent(q, k, v, g, beta):
    """The same rule token by token (the reference the chunked form is checked against)."""
    B, H, T, dk = q.shape
    S = q.new_zeros(B, H, v.shape[-1], dk)
    outs = []
    for t in range(T):
        S = S * g[:, :, t].exp()[..., None, None]
        sk = S @ k[:, :, t, :, None]
        u = beta[:, :, t, None, None] * (v[:, :, t, :, None] - sk)
        S = S + u @ k[:, :, t, None, :]
        outs.append((S @ q[:, :, t, :, None])[..., 0])
    return torch.stack(outs, dim=2)


class DeltaNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c, e = cfg, cfg.n_embd
        inner = c.n_v_heads * c.d_v
        self.cfg = cfg
        self.attn_qkv = nn.Linear(e, c.conv_dim, bias=False)
        self.attn_gate = nn.Linear(e, inner, bias=False)
        self.ssm_alpha = nn.Linear(e, c.n_v_heads, bias=False)
        self.ssm_beta = nn.Linear(e, c.n_v_heads, bias=False)
        self.ssm_conv1d = nn.Parameter(torch.randn(c.conv_dim, c.conv_kernel) /
                                       math.sqrt(c.conv_kernel))
        dt = torch.exp(torch.rand(c.n_v_heads) * (math.log(0.1) - math.log(0.001)) +
                       math.log(0.001))
        self.ssm_dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))
        self.a_log = nn.Parameter(torch.log(torch.empty(c.n_v_heads).uniform_(1, 16)))
        self.ssm_norm = nn.Parameter(torch.ones(c.d_v))
        self.ssm_out = nn.Linear(inner, e, bias=False)

    def ssm_a(self):
        return -self.a_log.exp()

    def forward(self, x, chunked=True):
        c = self.cfg
        B, T, _ = x.shape
        nk, nv, dk, dv = c.n_k_heads, c.n_v_heads, c.d_k, c.d_v
        qkv = self.attn_qkv(x).transpose(1, 2)                     # (B, conv_dim, T)
        conv = F.conv1d(F.pad(qkv, (c.conv_kernel - 1, 0)), self.ssm_conv1d[:, None, :],
                        groups=c.conv_dim)
        conv = F.silu(conv).transpose(1, 2)                        # (B, T, conv_dim)
        q, k, v = torch.split(conv, [nk * dk, nk * dk, nv * dv], dim=-1)
        q, k, v = q.reshape(B, T, nk, dk), k.reshape(B, T, nk, dk), v.reshape(B, T, nv, dv)
        q = q / q.norm(dim=-1, keepdim=True).clamp_min(c.rms_eps) / math.sqrt(dk)
        k = k / k.norm(dim=-1, keepdim=True).clamp_min(c.rms_eps)
        # GGUF order: value head h reads key head h % nk (tiled)
        q, k = q.repeat(1, 1, nv // nk, 1), k.repeat(1, 1, nv // nk, 1)
        g = self.ssm_a() * F.softplus(self.ssm_alpha(x) + self.ssm_dt_bias)   # (B, T, nv)
        beta = torch.sigmoid(self.ssm_beta(x))
        args = (q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                g.transpose(1, 2), beta.transpose(1, 2))
        o = gated_delta_chunked(*args) if chunked else gated_delta_recurrent(*args)
        o = o.transpose(1, 2)                                      # (B, T, nv, dv)
        z = self.attn_gate(x).reshape(B, T, nv, dv)
        o = rms_norm(o, self.ssm_norm, c.rms_eps) * F.silu(z)
        return self.ssm_out(o.reshape(B, T, nv * dv))


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c, e = cfg, cfg.n_embd
        self.cfg = cfg
        self.attn_q = nn.Linear(e, 2 * c.n_head * c.head_dim, bias=False)
        self.attn_k = nn.Linear(e, c.n_head_kv * c.head_dim, bias=False)
        self.attn_v = nn.Linear(e, c.n_head_kv * c.head_dim, bias=False)
        self.attn_output = nn.Linear(c.n_head * c.head_dim, e, bias=False)
        self.attn_q_norm = nn.Parameter(torch.ones(c.head_dim))
        self.attn_k_norm = nn.Parameter(torch.ones(c.head_dim))

    def forward(self, x, cos, sin, chunked=True):
        c = self.cfg
        B, T, _ = x.shape
        H, KV, hd = c.n_head, c.n_head_kv, c.head_dim
        qg = self.attn_q(x).reshape(B, T, H, 2, hd)               # per head: query, gate
        q, gate = qg.unbind(3)
        k = self.attn_k(x).reshape(B, T, KV, hd)
        v = self.attn_v(x).reshape(B, T, KV, hd)
        q = apply_rope(rms_norm(q, self.attn_q_norm, c.rms_eps), cos, sin, c.n_rot)
        k = apply_rope(rms_norm(k, self.attn_k_norm, c.rms_eps), cos, sin, c.n_rot)
        rep = H // KV
        k = k.repeat_interleave(rep, dim=2)
        v = v.repeat_interleave(rep, dim=2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))          # (B, H, T, hd)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        o = (att @ v).transpose(1, 2)                              # (B, T, H, hd)
        o = o * torch.sigmoid(gate)
        return self.attn_output(o.reshape(B, T, H * hd))


class Block(nn.Module):
    def __init__(self, cfg, il):
        super().__init__()
        e = cfg.n_embd
        self.is_attn = cfg.is_attn(il)
        self.attn_norm = nn.Parameter(torch.ones(e))
        self.post_attention_norm = nn.Parameter(torch.ones(e))
        self.mixer = Attention(cfg) if self.is_attn else DeltaNet(cfg)
        self.ffn_gate = nn.Linear(e, cfg.n_ff, bias=False)
        self.ffn_up = nn.Linear(e, cfg.n_ff, bias=False)
        self.ffn_down = nn.Linear(cfg.n_ff, e, bias=False)
        self.eps = cfg.rms_eps

    def forward(self, x, cos, sin, chunked=True):
        h = rms_norm(x, self.attn_norm, self.eps)
        x = x + (self.mixer(h, cos, sin) if self.is_attn else self.mixer(h, chunked))
        h = rms_norm(x, self.post_attention_norm, self.eps)
        return x + self.ffn_down(F.silu(self.ffn_gate(h)) * self.ffn_up(h))


class Qwen35(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.token_embd = nn.Embedding(cfg.n_vocab, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg, il) for il in range(cfg.n_layers))
        self.output_norm = nn.Parameter(torch.ones(cfg.n_embd))
        self.init_weights()

    def init_weights(self):
        std = 0.02
        nn.init.normal_(self.token_embd.weight, std=std)
        for name, p in self.named_parameters():
            if p.dim() == 2 and name.endswith(".weight") and "token_embd" not in name:
                out_proj = name.endswith(("ffn_down.weight", "ssm_out.weight",
                                          "attn_output.weight"))
                nn.init.normal_(p, std=std / math.sqrt(2 * self.cfg.n_layers) if out_proj
                                else std)

    def forward(self, ids, chunked=True):
        T = ids.shape[1]
        cos, sin = rope_tables(self.cfg, T)
        x = self.token_embd(ids)
        for b in self.blocks:
            x = b(x, cos, sin, chunked)
        x = rms_norm(x, self.output_norm, self.cfg.rms_eps)
        return x @ self.token_embd.weight.t()
