"""How many CPUs this process may actually use (for worker pools and thread counts)."""
from __future__ import annotations

import os
from pathlib import Path


def usable_cpus() -> int:
    """CPUs in this process's affinity mask, capped by a cgroup-v2 CPU quota if one is set.

    os.cpu_count() reports the host's cores; a container limited to 2 CPUs may see 64, and a
    pool (or OpenMP) sized by it oversubscribes the quota by 30x."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            n = min(n, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return max(1, n)
