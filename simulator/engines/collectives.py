"""A tensor-parallel all-reduce priced by a measured latency-against-size curve (real engines only;
`ideal` keeps the cost model's latency + bytes / bandwidth, bit for bit).

At decode and verify sizes (kilobytes to a megabyte per collective) an all-reduce's time is set by
its latency, not by the link's bandwidth: a 70B model at TP 8 runs 160 of them a forward pass.
The curve is SGLang's custom all-reduce on H100 (SGLang PR #2904, its unit test of 2025-01-15;
../shared/reference/engine-host-work.md, "SGLang") [M], in microseconds by message size, TP 2/4/8:

    size       512   4096  32768  262144  524288  1048576
    TP 2       3.7   3.9   4.5    7.9     12.5    19.9
    TP 4       4.8   3.7   4.8    13.9    20.2    31.1
    TP 8       5.9   5.7   7.8    16.7    22.1    33.8

The table does not say whether sizes are bytes or elements. The test's stored code
(sgl-kernel tests/test_custom_allreduce.py, `performance_worker`: `torch.randint(..., (sz,),
dtype=torch.float32)` timed over 100 calls) makes them float32 elements, 4 bytes each [C]: the
central reading (SIZE_BYTES_PER_UNIT = 4). Read as bytes, a message of a given size sits further up
the curve: that reading is the range's upper end (`SIZE_READINGS`). Between sizes the time is
interpolated linearly in log2(size); below the smallest it is the smallest's; above the largest it
grows at the cost model's ring bandwidth from the largest's time (no measurement there).

vLLM's own custom all-reduce at 1048576, TP 8 took 45.0 us in the same test (1.33x SGLang's): the
curve is used for every engine, and that point is the range for vLLM rows [I]. Measured on H100
NVLink4; applied to every GPU of one NVLink domain (H200: the same NVLink4; B200's NVLink5 is
faster: the H100 curve is an upper bound there [I]). TP degrees not in the table, and all-reduces
that leave one NVLink domain, keep the cost model's form.
"""
from __future__ import annotations

import bisect
import math

US = 1e-6
SIZES = (512, 4096, 32768, 262144, 524288, 1048576)
CURVE_US = {2: (3.7, 3.9, 4.5, 7.9, 12.5, 19.9),
            4: (4.8, 3.7, 4.8, 13.9, 20.2, 31.1),
            8: (5.9, 5.7, 7.8, 16.7, 22.1, 33.8)}
SIZE_BYTES_PER_UNIT = 4.0                 # the test's sizes are float32 elements (module docstring)
SIZE_READINGS = {"elements": 4.0, "bytes": 1.0}     # the two readings of the table: the range
VLLM_AR_1MB_TP8_US = 45.0                 # vLLM's custom all-reduce, 1048576, TP 8 (same test)

_LOG_SIZES = tuple(math.log2(s) for s in SIZES)


def has_curve(tp: int) -> bool:
    return tp in CURVE_US


def allreduce_s(message_bytes: float, tp: int, bytes_s_beyond: float,
                bytes_per_unit: float = SIZE_BYTES_PER_UNIT) -> float:
    """Seconds of one all-reduce of `message_bytes` over `tp` GPUs of one NVLink domain, from the
    measured curve; past its largest size, the largest's time plus the excess bytes at
    `bytes_s_beyond` (the cost model's ring rate: bytes / (ring factor / link bandwidth))."""
    curve = CURVE_US[tp]
    size = max(float(message_bytes), 1.0) / bytes_per_unit
    if size <= SIZES[0]:
        return curve[0] * US
    if size >= SIZES[-1]:
        return curve[-1] * US + (size - SIZES[-1]) * bytes_per_unit / bytes_s_beyond
    x = math.log2(size)
    i = bisect.bisect_right(_LOG_SIZES, x) - 1
    f = (x - _LOG_SIZES[i]) / (_LOG_SIZES[i + 1] - _LOG_SIZES[i])
    return (curve[i] + f * (curve[i + 1] - curve[i])) * US
