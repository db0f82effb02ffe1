"""Checkpoints for the vLLM ground truth, built locally from the configs in models/groundtruth/.

Nothing is downloaded. Every checkpoint is a "lookup" model whose greedy output is known by
construction, so a drafter's acceptance is set by how it is built (and then measured by vLLM's own
counters, never assumed):

    embeddings  E[v] = c * onehot(v) in the first V of H dims (V <= H), c = sqrt(H), so an RMSNorm
                (weight 1) leaves a token's vector unchanged.
    layers      q, k, v, gate, up random (std 0.02); o_proj and down_proj zero: every layer does its
                full work (the timing is a real forward pass of that shape) but adds nothing to
                the residual stream, which stays E[last token].
    lm_head     W[u, v] = 1 iff u = f(v): the target emits f(last token), f a seeded random
                permutation of the vocabulary with one cycle (no token repeats within V steps, so
                n-gram matches only what a prompt holds).

A drafter agrees with the target on a token v iff it maps v to f(v). The design `agree` maps every
token right (acceptance 1 under greedy), `random` none (g(v) != f(v) for all v: acceptance 0),
`mix M` a seeded fraction M of the tokens (the acceptance per drafted position is then the share
of visited tokens in that set, ~M per position):

    draft model  the target's structure with fewer layers, lm_head = lookup g.
    EAGLE-1      fc = [P, 0] (H x 2H) picks the next token's embedding and maps it through a
                 permutation pi (identity where the design agrees); its layer adds nothing; the
                 target's lm_head (shared: the checkpoint has none) gives f(pi(v)).
    EAGLE-3      fc = [I, 0, 0] (H x 3H) keeps the first aux hidden state, E[t_i]; the midlayer's
                 MLP is a lookup E[v] -> E[g(v)] (gate/up detect v, down writes E[g(v)] - E[v]),
                 its attention adds nothing; its own lm_head is the target's f. Step 1 gives
                 f(g(t_i)) = t_{i+2}; later steps feed the prenorm hidden E[g(.)] back in.

Formats follow vLLM 0.32's loaders (vllm/model_executor/models/llama_eagle.py, llama_eagle3.py):
EAGLE-1 names `fc.weight`, `layers.0.*` (no input_layernorm on layer 0), `embed_tokens.weight`;
EAGLE-3 `fc.weight`, `midlayer.*` with `hidden_norm`, `norm.weight`, `lm_head.weight`, and
`eagle_aux_hidden_state_layer_ids` in its config.json (the default ids collide below 6 layers).
Needs torch and safetensors: it runs inside .venv-vllm (calibrate.vllm_runner).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
CONFIG_DIR = REPO / "models" / "groundtruth"
SEED = 0


def load_config(name: str) -> dict:
    return json.loads((CONFIG_DIR / name / "config.json").read_text())


def target_map(vocab: int, seed: int = SEED) -> torch.Tensor:
    """f: a random permutation of range(vocab) with a single cycle (Sattolo's algorithm)."""
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(vocab, generator=gen)
    f = torch.empty(vocab, dtype=torch.long)
    f[order] = torch.roll(order, -1)          # order[i] -> order[i+1]: one cycle through all tokens
    return f


def draft_map(f: torch.Tensor, design: str, seed: int = SEED + 1) -> torch.Tensor:
    """g: agrees with f on the design's share of tokens ('agree', 'random', 'mix 0.5')."""
    vocab = f.numel()
    share = {"agree": 1.0, "random": 0.0}.get(design)
    if share is None:
        if not design.startswith("mix "):
            raise ValueError(f"design {design!r}: allowed 'agree', 'random', 'mix M' with 0 <= M <= 1")
        share = float(design.split()[1])
    gen = torch.Generator().manual_seed(seed)
    agree = torch.rand(vocab, generator=gen) < share
    wrong = (f + 1 + torch.randint(0, vocab - 1, (vocab,), generator=gen)) % vocab   # never f(v)
    return torch.where(agree, f, wrong)


def _scale(h: int) -> float:
    return math.sqrt(h)


def _embed(cfg: dict) -> torch.Tensor:
    v, h = cfg["vocab_size"], cfg["hidden_size"]
    e = torch.zeros(v, h)
    e[torch.arange(v), torch.arange(v)] = _scale(h)
    return e


def _lookup_head(mapping: torch.Tensor, h: int) -> torch.Tensor:
    """[V, H]: row u has 1 at every v with mapping(v) = u, so argmax(W @ E[v]) = mapping(v)."""
    v = mapping.numel()
    w = torch.zeros(v, h)
    w[mapping, torch.arange(v)] = 1.0
    return w


def _layer(cfg: dict, gen: torch.Generator, prefix: str, qkv_in: int | None = None,
           input_norm: bool = True) -> dict[str, torch.Tensor]:
    """One decoder layer that does its full work and adds nothing (o_proj, down_proj zero)."""
    h, inter = cfg["hidden_size"], cfg["intermediate_size"]
    hd = cfg.get("head_dim", h // cfg["num_attention_heads"])
    q_out, kv_out = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    qkv_in = qkv_in or h

    def rnd(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen) * 0.02
    w = {f"{prefix}.self_attn.q_proj.weight": rnd(q_out, qkv_in),
         f"{prefix}.self_attn.k_proj.weight": rnd(kv_out, qkv_in),
         f"{prefix}.self_attn.v_proj.weight": rnd(kv_out, qkv_in),
         f"{prefix}.self_attn.o_proj.weight": torch.zeros(h, q_out),
         f"{prefix}.mlp.gate_proj.weight": rnd(inter, h),
         f"{prefix}.mlp.up_proj.weight": rnd(inter, h),
         f"{prefix}.mlp.down_proj.weight": torch.zeros(h, inter),
         f"{prefix}.post_attention_layernorm.weight": torch.ones(h)}
    if input_norm:
        w[f"{prefix}.input_layernorm.weight"] = torch.ones(h)
    return w


def causal_lm_weights(cfg: dict, head_map: torch.Tensor, seed: int) -> dict[str, torch.Tensor]:
    """A LlamaForCausalLM (target or draft model) that emits head_map(last token)."""
    gen = torch.Generator().manual_seed(seed)
    w = {"model.embed_tokens.weight": _embed(cfg), "model.norm.weight": torch.ones(cfg["hidden_size"]),
         "lm_head.weight": _lookup_head(head_map, cfg["hidden_size"])}
    for i in range(cfg["num_hidden_layers"]):
        w.update(_layer(cfg, gen, f"model.layers.{i}"))
    return w


def eagle_weights(cfg: dict, pi: torch.Tensor, seed: int) -> dict[str, torch.Tensor]:
    """EAGLE-1 head: fc = [P_pi, 0] picks E[pi(next token)]; lm_head shared with the target."""
    h, v = cfg["hidden_size"], cfg["vocab_size"]
    gen = torch.Generator().manual_seed(seed)
    fc = torch.zeros(h, 2 * h)
    fc[pi, torch.arange(v)] = 1.0             # E[t] (scale c) -> c * onehot(pi(t))
    w = {"fc.weight": fc, "embed_tokens.weight": _embed(cfg)}
    w.update(_layer(cfg, gen, "layers.0", input_norm=False))
    return w


def eagle3_weights(cfg: dict, f: torch.Tensor, g: torch.Tensor, seed: int) -> dict[str, torch.Tensor]:
    """EAGLE-3 head: fc keeps aux state 0 (E[t_i]); the MLP maps E[v] -> E[g(v)]; lm_head = f."""
    h, v, inter = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    if inter < v:
        raise ValueError(f"EAGLE-3 lookup needs intermediate_size >= vocab_size, got {inter} < {v}")
    n_aux = len(cfg["eagle_aux_hidden_state_layer_ids"])
    gen = torch.Generator().manual_seed(seed)
    c = _scale(h)
    fc = torch.zeros(h, n_aux * h)
    fc[torch.arange(h), torch.arange(h)] = 1.0
    w = {"fc.weight": fc, "embed_tokens.weight": _embed(cfg), "norm.weight": torch.ones(h),
         "lm_head.weight": _lookup_head(f, h), "midlayer.hidden_norm.weight": torch.ones(h)}
    w.update(_layer(cfg, gen, "midlayer", qkv_in=2 * h))
    idx = torch.arange(v)
    gate = torch.zeros(inter, h)
    gate[idx, idx] = 1.0                      # detector v fires c on E[v], 0 on every other token
    up = torch.zeros(inter, h)
    up[idx, idx] = 1.0
    act = torch.nn.functional.silu(torch.tensor(c)) * c        # silu(gate) * up at the firing unit
    down = torch.zeros(h, inter)
    down[g, idx] += c / act                   # write +E[g(v)] ...
    down[idx, idx] -= c / act                 # ... and remove E[v] (zero where g(v) = v)
    w.update({"midlayer.mlp.gate_proj.weight": gate, "midlayer.mlp.up_proj.weight": up,
              "midlayer.mlp.down_proj.weight": down})
    return w


def _save(path: Path, cfg: dict, weights: dict[str, torch.Tensor]) -> None:
    from safetensors.torch import save_file
    path.mkdir(parents=True, exist_ok=True)
    dtype = getattr(torch, cfg.get("torch_dtype", "bfloat16"))
    save_file({k: t.to(dtype).contiguous() for k, t in weights.items()}, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


def design_slug(design: str) -> str:
    return design.replace(" ", "").replace(".", "p")


def build(name: str, design: str, cache: Path, target: str | None = None) -> Path:
    """Write checkpoint `name` (a folder of models/groundtruth) with `design` into cache; return its
    folder. Targets take design 'target'; drafters name their target. Rebuilt only when absent."""
    cfg = load_config(name)
    out = cache / (name if design == "target" else f"{name}-{design_slug(design)}")
    if (out / "model.safetensors").exists() and (out / "config.json").exists():
        return out
    vocab = cfg["vocab_size"]
    if vocab > cfg["hidden_size"]:
        raise ValueError(f"{name}: lookup models need vocab_size <= hidden_size, got {vocab} > {cfg['hidden_size']}")
    f = target_map(vocab)
    if design == "target":
        w = causal_lm_weights(cfg, f, seed=SEED)
    else:
        if target is None or load_config(target)["vocab_size"] != vocab:
            raise ValueError(f"{name}: a drafter needs its target with the same vocabulary")
        g = draft_map(f, design)
        kind = name.rsplit("-", 1)[-1]
        if kind == "draft":
            w = causal_lm_weights(cfg, g, seed=SEED + 7)
        elif kind == "eagle":
            pi = torch.where(g == f, torch.arange(vocab), torch.argsort(f)[g])   # f(pi(v)) = g(v)
            w = eagle_weights(cfg, pi, seed=SEED + 8)
        elif kind == "eagle3":
            w = eagle3_weights(cfg, f, g, seed=SEED + 9)
        else:
            raise ValueError(f"{name}: drafter names end in -draft, -eagle or -eagle3")
    _save(out, cfg, w)
    return out


def prompts(model: str, n: int, prompt_len: int, span: int, seed: int = SEED + 2) -> list[list[int]]:
    """n prompts of prompt_len token ids: random tokens that hold, part way in, the target's next
    `span` output tokens [x, f(x), ..., f^span(x)] and end with x, so n-gram lookup matches the
    first `span` - 1 output tokens and nothing after (f has a single cycle of length V > span)."""
    vocab = load_config(model)["vocab_size"]
    if span + 2 > prompt_len // 2 or span + 1 >= vocab:
        raise ValueError(f"span {span} does not fit a prompt of {prompt_len} tokens over {vocab}")
    f = target_map(vocab)
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = int(torch.randint(0, vocab, (1,), generator=gen))
        seg = [x]
        for _ in range(span):
            seg.append(int(f[seg[-1]]))
        head = torch.randint(0, vocab, (prompt_len // 4,), generator=gen).tolist()
        tail = torch.randint(0, vocab, (prompt_len - len(head) - len(seg) - 1,), generator=gen).tolist()
        out.append(head + seg + tail + [x])
    return out
