"""Which prompt blocks requests share: each request's chain of prefix-block hashes.

Two sources:
  - a trace with block hashes (the Mooncake format, `load_hash_trace`): its `hash_ids`, one per
    512-token block of the prompt, equal ids meaning a reusable prefix block (kvcache-ai/Mooncake,
    FAST25-release/README.md);
  - a scenario's `workload.prefix` block (`PrefixSpec`): every prompt opens with `shared_tokens`
    of one system prompt, and consecutive runs of `turns` requests are one conversation whose
    turn j's prompt is the system prompt, every earlier turn's prompt message and output, then
    its own message (the length drawn from prompt_len):
        prompt_j = shared_tokens + sum_{t<j} (message_t + output_t) + message_j.
    A block is named by what it covers: blocks wholly inside the system prompt share their hash
    with every request, the rest belong to the conversation, so turn j finds turn j-1's prompt
    and output blocks (vLLM caches the full blocks of generated tokens too).

`Chains.chain(rid, tokens)` is the hashes of the full blocks among a request's first `tokens`
tokens: the prompt's at admission, prompt and output's at its end.
"""
from __future__ import annotations

import json
import lzma
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..common.errors import SpecsightInputError, require_int
from ..common.input_files import MAX_BYTES, read_bytes
from ..common.limits import MAX_TOKENS
from ..common.schema import Int, Section

MOONCAKE_BLOCK_TOKENS = 512      # Mooncake's hash_ids: one per 512 tokens (FAST25-release/README.md)
CONVERSATION_BASE = 1 << 40      # conversation c's block j hashes to (c + 1) * BASE + j


@dataclass(frozen=True)
class PrefixSpec:
    """A synthetic workload's shared prefixes: a system prompt and multi-turn conversations."""
    shared_tokens: int = 0           # tokens of one system prompt every request opens with
    turns: int = 1                   # requests per conversation (consecutive request ids)
    block_tokens: int = 16           # tokens per hashed block (vLLM hashes its own blocks: 16)

    def __post_init__(self) -> None:
        require_int("workload.prefix.shared_tokens", self.shared_tokens, lo=0, hi=MAX_TOKENS)
        require_int("workload.prefix.turns", self.turns, lo=1)
        require_int("workload.prefix.block_tokens", self.block_tokens, lo=1, hi=MAX_TOKENS)

    def prompts(self, message: np.ndarray, output: np.ndarray) -> np.ndarray:
        """[N] prompt lengths: the system prompt, the conversation's history, the turn's message."""
        n = len(message)
        turn = np.arange(n) % self.turns
        step = message + output                          # what a turn adds to the next turn's prompt
        hist = np.cumsum(step) - step                    # sum of the earlier requests' steps
        start = hist[np.arange(n) - turn]                # ... at the conversation's first turn
        return self.shared_tokens + (hist - start) + message


class Chains:
    """Each request's prefix-block hashes: explicit (a trace's) or synthetic (a PrefixSpec's)."""

    def __init__(self, block_tokens: int, *, flat: np.ndarray | None = None, offsets: np.ndarray | None = None,
                 spec: PrefixSpec | None = None):
        self.block_tokens = int(block_tokens)
        self._flat = None if flat is None else flat.tolist()
        self._off = None if offsets is None else offsets.tolist()
        self.shared_blocks = 0 if spec is None else spec.shared_tokens // self.block_tokens
        self.turns = 1 if spec is None else spec.turns
        self.synthetic = flat is None    # hashes by position (module docstring), not a trace's
        self._last: tuple[int, int, list[int]] = (-1, -1, [])

    def chain(self, rid: int, tokens: int) -> list[int]:
        """Hashes of the full blocks among request rid's first `tokens` tokens (a trace: at most
        the blocks it lists). The last answer is kept (the router asks it of every instance);
        callers do not modify the list."""
        last = self._last
        if last[0] == rid and last[1] == tokens:
            return last[2]
        nb = tokens // self.block_tokens
        if self._flat is not None:
            lo, hi = self._off[rid], self._off[rid + 1]
            out = self._flat[lo:min(hi, lo + nb)]
        else:
            s = min(self.shared_blocks, nb)
            base = (rid // self.turns + 1) * CONVERSATION_BASE
            out = list(range(s)) + list(range(base + s, base + nb))
        self._last = (rid, tokens, out)
        return out


def load_hash_trace(path: Path, field: str) -> dict[str, np.ndarray]:
    """A Mooncake-format JSONL trace (optionally .xz): timestamp (ms), input_length,
    output_length, hash_ids per line; as the trace dict of workload.load_trace plus `hash_flat`
    and `hash_offsets` (request i's hashes: flat[offsets[i]:offsets[i + 1]])."""
    data = read_bytes(path, field, "csv")             # (traces: the CSV kind's limit)
    if path.suffix == ".xz":
        try:
            dec = lzma.LZMADecompressor()
            data = dec.decompress(data, max_length=MAX_BYTES["csv"])
            if not dec.eof:
                raise SpecsightInputError(field, str(path), f"decompresses to more than {MAX_BYTES['csv']} bytes "
                                                            "(or is truncated)")
        except lzma.LZMAError as e:
            raise SpecsightInputError(field, str(path), f"not a readable .xz file ({e})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecsightInputError(field, str(path), "not UTF-8 text") from None
    t, p, o, flat, off = [], [], [], [], [0]
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            ts, inp, out, ids = float(row["timestamp"]), int(row["input_length"]), int(row["output_length"]), \
                [int(h) for h in row["hash_ids"]]
        except (ValueError, KeyError, TypeError):
            raise SpecsightInputError(field, str(path), f"line {i + 1}: not a JSON object with timestamp, "
                                                        "input_length, output_length, hash_ids") from None
        if inp < 1 or out < 1 or inp > MAX_TOKENS or out > MAX_TOKENS:
            raise SpecsightInputError(field, str(path), f"line {i + 1}: lengths must be in [1, {MAX_TOKENS}]")
        t.append(ts / 1000.0)
        p.append(inp)
        o.append(out)
        flat.extend(ids)
        off.append(len(flat))
    if not t:
        raise SpecsightInputError(field, str(path), "trace has no rows")
    arr = np.asarray(t)
    if np.any(np.diff(arr) < 0) or arr[0] < 0:
        raise SpecsightInputError(field, str(path), "timestamp must be >= 0 and nondecreasing")
    return {"arrived_at": arr, "num_prefill_tokens": np.asarray(p, dtype=np.int64),
            "num_decode_tokens": np.asarray(o, dtype=np.int64), "hash_flat": np.asarray(flat, dtype=np.int64),
            "hash_offsets": np.asarray(off, dtype=np.int64)}


PREFIX = Section(doc="shared prefixes: a system prompt and multi-turn conversations (simulator/workload/prefix.py)",
                 nullable=True, keys={
    "shared_tokens": Int(doc="system prompt every request opens with", unit="tokens", lo=0, hi=MAX_TOKENS, default=0),
    "turns": Int(doc="requests per conversation (consecutive ids); turn j's prompt holds the earlier turns",
                 unit="requests", lo=1, hi=10 ** 6, default=1),
    "block_tokens": Int(doc="tokens per hashed block", unit="tokens", lo=1, hi=MAX_TOKENS, default=16),
})
