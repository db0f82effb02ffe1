"""KV memory by layer type (simulator/costs/kv_cache.py): the block pool holds the full layers' KV per
token, the sliding layers' KV is held per sequence slot, capped at the window; by hand."""
import math

from simulator.costs.cost_model import CostModel
from simulator.costs.kv_cache import kv_budget, sliding_slot_tokens, sliding_slots
from simulator.hardware.hardware import load_profile
from simulator.models.catalog import load_model
from simulator.run import simulate
from simulator.scenario.scenario import load_scenario

KW = dict(block_size=16, gpu_memory_utilization=0.9, activation_reserve_bytes=5e9)


def test_slot_is_vllms_sliding_window_bound():
    """block_size x (cdiv(W - 1 + 1 + k, block_size) + 1): W = 1024, k = 3 -> 16 x (65 + 1);
    W = 4096, k = 0 -> 16 x (256 + 1) (the +1 block: a window that does not start on a block edge)."""
    assert sliding_slot_tokens(1024, 16, 3) == 1056
    assert sliding_slot_tokens(4096, 16, 0) == 4112
    assert sliding_slot_tokens(4095, 16, 1) == 16 * 257


def test_slots_and_reserve_closed_form():
    """win 10 B/token, pool 2 B/token, 1 MB free, W = 100, block 16, k = 0: slot 16 x 8 = 128 tokens;
    room 1e6 - 10 x 512 (one step's prefill tokens) = 994,880; per sequence 10 x 128 + 2 x 200 = 1,680
    bytes -> 592 slots, capped at max_num_seqs."""
    kw = dict(window=100, block_size=16, k_max=0, max_num_batched_tokens=512, mean_tokens=200.0)
    s = sliding_slots(10.0, 2.0, 1e6, max_num_seqs=1000, **kw)
    assert (s.slots, s.slot_tokens) == (592, 128)
    assert s.reserve_bytes == 10.0 * (592 * 128 + 512)
    s = sliding_slots(10.0, 2.0, 1e6, max_num_seqs=256, **kw)
    assert s.slots == 256 and s.reserve_bytes == 10.0 * (256 * 128 + 512)
    assert sliding_slots(10.0, 2.0, 5000.0, max_num_seqs=256, **kw).slots == 0     # no room past the prefill


def test_gemma4_pool_holds_the_full_layers_only():
    """Gemma-4-31B on one H200 (bf16): full layers 10 x 4 heads x 512 x K (= V) x 2 bytes = 40,960 B
    a token in the pool; the 50 sliding layers 16 heads x 256 x K,V: 819,200 B a token, in
    1,056-token slots (W 1024, K 3)."""
    cm = CostModel(load_model("gemma-4-31b"), load_profile("h200-sxm"), tp=1, dtype="bf16")
    full, win = 10 * 4 * 512 * 2, 50 * 16 * 256 * 2 * 2
    assert (cm.full_kv_bytes_per_token, cm.win_kv_bytes_per_token) == (full, win)
    b = kv_budget(cm, 0.0, 0.0, max_num_seqs=256, k_max=3, max_num_batched_tokens=8192, mean_tokens=2000.0, **KW)
    free = cm.hw.memory_bytes * 0.9 - cm.weight_bytes_per_gpu - 5e9
    slots = min(256, math.floor((free - win * 8192) / (win * 1056 + full * 2000)))
    reserve = win * (slots * 1056 + 8192)
    assert (b.sliding_slots, b.sliding_reserve_bytes) == (slots, reserve)
    assert b.num_blocks == math.floor((free - reserve) / (16 * full))
    assert b.kv_bytes_per_token == full
    # the pool holds the slots' sequences at the mean length, and less than one more sequence's share
    assert slots * 2000 <= b.capacity_tokens + 16
    assert b.capacity_tokens * full < (slots + 1) * (win * 1056 + full * 2000)


def test_full_attention_model_unchanged():
    """No sliding layers: no slots, the pool counts every layer as before (the new arguments ignored)."""
    cm = CostModel(load_model("llama-3.1-8b"), load_profile("h100-sxm"), tp=1, dtype="bf16")
    b = kv_budget(cm, 1e9, 1000.0, max_num_seqs=256, k_max=3, max_num_batched_tokens=8192, mean_tokens=900.0, **KW)
    free = cm.hw.memory_bytes * 0.9 - cm.weight_bytes_per_gpu - 1e9 - 5e9
    assert b.num_blocks == int(math.floor(free / (16 * (cm.kv_bytes_per_token + 1000.0))))
    assert (b.sliding_slots, b.sliding_reserve_bytes) == (0, 0.0)
    assert b == kv_budget(cm, 1e9, 1000.0, **KW)


def test_every_layer_sliding_pool_never_binds():
    """Mistral-7B v0.1 (32 layers, all sliding over 4,096): the pool holds nothing per token; its
    blocks count the slots' sequences at the full context (32,768 + K) so they never bind."""
    cm = CostModel(load_model("mistral-7b"), load_profile("h100-sxm"), tp=1, dtype="bf16")
    b = kv_budget(cm, 0.0, 0.0, max_num_seqs=256, k_max=0, max_num_batched_tokens=8192, **KW)
    win = 32 * 8 * 128 * 2 * 2
    free = cm.hw.memory_bytes * 0.9 - cm.weight_bytes_per_gpu - 5e9
    assert b.kv_bytes_per_token == 0.0
    assert b.sliding_slots == min(256, math.floor((free - win * 8192) / (win * 4112)))
    assert b.num_blocks == b.sliding_slots * (32768 // 16)


def test_sequences_beyond_the_window_no_longer_exhaust_the_cache():
    """64 users with 12,000-token prompts on Mistral-7B (window 4,096), one H100: every layer's KV
    of every token (131,072 B a token) would need 64 x 12,400 x 131,072 = 104 GB, more than the GPU;
    held per slot (4,112 tokens each) the 64 sequences run together, none preempted."""
    sc = load_scenario({
        "name": "beyond-window", "seed": 3, "hardware": {"gpu": "h100-sxm", "tp": 1}, "model": "mistral-7b",
        "workload": {"arrival": {"process": "closed_loop", "concurrency": 64}, "num_requests": 64,
                     "prompt_len": 12000, "output_len": 400},
        "engine": {"max_num_seqs": 256, "max_num_batched_tokens": 8192}})
    r = simulate(sc)
    assert 64 * 12400 * 32 * 8 * 128 * 2 * 2 > r.kv.hbm_bytes
    assert r.kv.sliding_slots >= 64
    assert r.summary["preemptions"] == 0
    assert int(r.iterations["num_decode"].max()) == 64
