# SPDX-License-Identifier: CC0-1.0
"""A minimal GGUF v3 writer (string, u32, f32, bool keys; string and i32 arrays; F32 and
Q8_0 tensors), enough for the demo model."""
import os
import struct

import numpy as np

GGML_F32, GGML_Q8_0 = 0, 8
FILE_TYPE = {"F32": 0, "Q8_0": 7}
ALIGN = 32

# GGUF value types
U32, I32, F32V, BOOL, STR, ARR = 4, 5, 6, 7, 8, 9


def quantizable(name, a):
    """Matrices go to the file's type; norms, the conv kernel, decay and the small alpha and
    beta projections stay F32 (as llama.cpp's converter and quantizer keep them)."""
    return a.ndim == 2 and not name.endswith(("ssm_conv1d.weight", "ssm_alpha.weight",
                                              "ssm_beta.weight")) and a.shape[1] % 32 == 0


def q8_0(a):
    """Q8_0 blocks as ggml's reference quantizer makes them: per 32 values the f16 scale
    d = max|x| / 127 and 32 int8 round(x / d) (halves away from zero, by the f32 d).
    Returns the bytes and the values they decode to."""
    blocks = a.reshape(-1, 32).astype(np.float32)
    d32 = (np.abs(blocks).max(axis=1) / np.float32(127.0)).astype(np.float32)
    inv = np.divide(np.float32(1.0), d32, out=np.zeros_like(d32), where=d32 != 0)
    x = blocks * inv[:, None]
    q = (np.sign(x) * np.floor(np.abs(x) + np.float32(0.5))).astype(np.int8)
    d = d32.astype(np.float16)
    df = d.astype(np.float32)
    out = np.empty(len(blocks), dtype=[("d", "<f2"), ("q", "i1", 32)])
    out["d"], out["q"] = d, q
    return out.tobytes(), (q.astype(np.float32) * df[:, None]).reshape(a.shape)


class Writer:
    def __init__(self):
        self.kv = []

    @staticmethod
    def s(text):
        b = text.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def add(self, key, vtype, value):
        body = struct.pack("<I", vtype)
        if vtype == STR:
            body += self.s(value)
        elif vtype == U32:
            body += struct.pack("<I", value)
        elif vtype == F32V:
            body += struct.pack("<f", value)
        elif vtype == BOOL:
            body += struct.pack("<B", 1 if value else 0)
        else:
            raise ValueError(vtype)
        self.kv.append(self.s(key) + body)

    def add_array(self, key, etype, values):
        body = struct.pack("<IIQ", ARR, etype, len(values))
        if etype == STR:
            body += b"".join(self.s(v) for v in values)
        elif etype == I32:
            body += struct.pack(f"<{len(values)}i", *values)
        else:
            raise ValueError(etype)
        self.kv.append(self.s(key) + body)

    def write(self, path, tensors):
        """tensors: (name, ne list, ggml type, bytes)."""
        infos, datas, off = [], [], 0
        for name, ne, gtype, data in tensors:
            infos.append(self.s(name) + struct.pack("<I", len(ne)) +
                         struct.pack(f"<{len(ne)}Q", *ne) + struct.pack("<IQ", gtype, off))
            pad = (-len(data)) % ALIGN
            datas.append(data + b"\0" * pad)
            off += len(data) + pad
        head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(self.kv)) + \
            b"".join(self.kv) + b"".join(infos)
        head += b"\0" * ((-len(head)) % ALIGN)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(head)
            for d in datas:
                f.write(d)
        os.replace(tmp, path)


