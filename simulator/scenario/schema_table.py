"""The scenario schema, composed: every key, its type, range, allowed names, unit, default and
meaning (field types: simulator/common/schema.py). Each block is declared beside the dataclass it
fills (hardware_spec.py, engine_spec.py, work_limits.py here; speculation/drafters.py,
acceptance_spec.py, policy_spec.py; workload/workload.py and length_dist.py; serving/slo.py), and
the limits every block shares are simulator/common/limits.py. `load_scenario` checks a scenario
against SCENARIO before anything is built; model config.json files are checked against
models/config_keys.py's MODEL_CONFIG.

docs/schema.md is generated here, from one place: `python -m simulator.scenario.schema_table > docs/schema.md`
(a test keeps it current). A new key (an engine kind, a workload preset, a per-layer attention
type) is one more entry in its block, with its type and limit.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..common import limits
from ..common.csvio import MAX_CELL
from ..common.input_files import MAX_BYTES, MAX_INT_DIGITS, MAX_NESTING, MAX_NODES
from ..common.limits import MAX_NAME, MAX_PRICE, MAX_SEED, MAX_TEXT, path_field
from ..common.schema import Float, Int, Section, Str, markdown
from ..hardware.hardware import MAX_SHARPNESS, MIN_LINK_GB_S, MIN_MEMORY_TB_S, MIN_TFLOPS
from ..models.config_keys import MODEL_CONFIG
from ..serving.slo import SLO
from ..speculation.acceptance_spec import ACCEPTANCE
from ..speculation.drafters import DRAFTER
from ..speculation.policy_spec import POLICY
from ..workload.workload import WORKLOAD
from .disagg_spec import DISAGGREGATION
from .engine_spec import ENGINE
from .hardware_spec import HARDWARE
from .work_limits import LIMITS

PRICING = Section(doc="what a GPU-hour costs, for `specsight plan` (simulation ignores it)", nullable=True, keys={
    "usd_per_gpu_hour": Float(doc="price of one GPU for one hour (default: the hardware profile's "
                                  "price_usd_per_gpu_hour; --price-per-gpu-hour wins)", unit="USD", lo=0.0,
                              lo_open=True, hi=MAX_PRICE, nullable=True),
    "source": Str(doc="where the price comes from (a contract, a price page and its date)", max_len=MAX_TEXT,
                  nullable=True),
})

SCENARIO = Section(doc="a scenario", keys={
    "name": Str(doc="reported as `scenario` in the summary (default: the file stem)", max_len=MAX_NAME,
                nullable=True),
    "description": Str(doc="free text", max_len=MAX_TEXT, min_len=0, nullable=True),
    "seed": Int(doc="every random stream derives from it", lo=0, hi=MAX_SEED, default=0),
    "hardware": HARDWARE,
    "model": path_field("catalog name (models/<name>.json) or config.json path (required unless hardware.kind fixed)",
                   nullable=True),
    "drafter": DRAFTER,
    "acceptance": ACCEPTANCE,
    "policy": POLICY,
    "workload": WORKLOAD,
    "engine": ENGINE,
    "slo": SLO,
    "limits": LIMITS,
    "pricing": PRICING,
    "disaggregation": DISAGGREGATION,
})
TOP_KEYS = tuple(SCENARIO.keys)



def files_markdown() -> list[str]:
    """docs/schema.md's section on input and output files, physical floors and work limits."""
    sizes = ", ".join(f"{k} {v // 2 ** 20:,} MiB" for k, v in MAX_BYTES.items())
    return [
        "## Files, floors and work", "",
        "Every file a command reads goes through `simulator/common/input_files.py` and every file it writes through "
        "`simulator/common/atomic_files.py`; each limit below is a constant there (a bigger file: split it; a limit "
        "in `limits:` is raised in the scenario or with `--set limits.KEY=N`).", "",
        "| what | limit | where, how to raise |", "| --- | --- | --- |",
        f"| input file size by kind | {sizes} | `MAX_BYTES`; refused before reading |",
        "| input file kind | regular files only: a directory, FIFO, socket, device or symlink loop is refused by "
        "its kind before it is opened | - |",
        f"| nesting of lists and mappings | {MAX_NESTING} levels; a YAML alias inside its own anchor is refused; "
        f"{MAX_NODES:,} values (aliases counted each use) | `MAX_NESTING`, `MAX_NODES` |",
        f"| digits of one number in a file | {MAX_INT_DIGITS:,} | `MAX_INT_DIGITS` (Python's own) |",
        "| text | UTF-8; an error gives the line and column, never the content | - |",
        f"| a CSV cell | magnitude at most {MAX_CELL:,} (2^53); lengths at most `MAX_TOKENS`, accepted and k at most "
        "`MAX_K` | `simulator/common/csvio.py` |",
        f"| profile floors | memory bandwidth >= {MIN_MEMORY_TB_S:g} TB/s, peak >= {MIN_TFLOPS:g} TFLOP/s, "
        f"interconnect >= {MIN_LINK_GB_S:g} GB/s, roofline_sharpness in [1, {MAX_SHARPNESS:g}] "
        "| `simulator/hardware/hardware.py` (keeps every pass time finite) |",
        "| outputs | regular files only, inside the output folder: a device, FIFO, directory or symlink at the "
        "target is refused, never replaced or followed; the folder is probed by creating a file; a path must "
        "be UTF-8 | - |",
        "| simulator memory | num_requests x 5,000 bytes (`work_limits.BYTES_PER_REQUEST`) against MemAvailable "
        "| lower "
        "num_requests |",
        "| kernel acceptance | set-up draws and output tokens x (K + 1) x vocab_size | `limits.max_kernel_elements` |",
        "| a study (breakeven, plan, sweep) | the points' tokens summed | `limits.max_study_tokens` |",
        "| groundtruth, calibrate | weights, KV cache and logits estimated against the device's free memory | "
        "lower --batch, --k, --prompt-len, --layers or raise --scale |",
        "| dask | connect within `DASK_CONNECT_TIMEOUT_S`, a worker within `DASK_WORKER_WAIT_S` (60 s) | "
        "`specsight/studies/executors.py` |", "",
        "Work estimated past 60 s (`work_limits.ANNOUNCE_S`) is announced on stderr (`specsight: note: ...`) "
        "with its estimate, "
        "and a study then prints its progress every 30 s even off a terminal. YAML duplicate keys and tags "
        "(`!!python/...`) are refused; `5e-05` is a number (YAML 1.2).", ""]


def schema_markdown() -> str:
    """docs/schema.md: the limits and every scenario key."""
    notes = dict(re.findall(r"^((?:MAX|MIN)_\w+) = .*?# (.*)$", Path(limits.__file__).read_text(), flags=re.M))
    rows = [(n, v, notes.get(n, "")) for n, v in vars(limits).items() if n in notes]
    lines = ["# Scenario schema (generated: `python -m simulator.scenario.schema_table > docs/schema.md`)", "",
             "Every scenario key with its type, range, unit, default and meaning, from "
             "`simulator/scenario/schema_table.py`. `load_scenario` checks a scenario against it before anything "
             "runs: keys must be strings, numbers must be numbers (no strings, no booleans, no NaN or "
             "infinities), integers and names stay within the limits below, and every error is one "
             "`SpecsightInputError` line naming the key path, the value and what is allowed.", "",
             "## Limits", "", "| constant | value | what |", "| --- | --- | --- |"]
    lines += [f"| `{n}` | {v:,} | {note} |" if isinstance(v, int) else f"| `{n}` | {v:g} | {note} |"
              for n, v, note in rows]
    lines += ["", "Work limits (`limits:` block, or `--set limits.max_tokens=...`) are checked after the "
              "scenario is built and before it runs: see `simulator/scenario/work_limits.py`.", "",
              "## Scenario keys", "", markdown(SCENARIO), "",
              *files_markdown(),
              "Kept so by `tests/test_schema.py`, `tests/test_schema_files.py`, `tests/test_schema_limits.py`, the "
              "seeded fuzz test `tests/test_fuzz.py`, the invariants of `tests/test_properties.py`, and the long "
              "campaigns `benchmarks/fuzz_campaign.py` (results: `benchmarks/results/fuzz_campaign.md`) and "
              "`benchmarks/cli_campaign.py` (flags and files of every kind; results: "
              "`benchmarks/results/cli_campaign.md`).", "",
              "## Model config.json keys read (integers)", "", "| key | allowed | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{k}` | {f.allowed()} | {f.doc} |" for k, f in MODEL_CONFIG.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(schema_markdown(), end="")
