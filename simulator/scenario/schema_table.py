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
from ..common.limits import MAX_NAME, MAX_PRICE, MAX_SEED, MAX_TEXT, path_field
from ..common.schema import Float, Int, Section, Str, markdown
from ..models.config_keys import MODEL_CONFIG
from ..serving.slo import SLO
from ..speculation.acceptance_spec import ACCEPTANCE
from ..speculation.drafters import DRAFTER
from ..speculation.policy_spec import POLICY
from ..workload.workload import WORKLOAD
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
})
TOP_KEYS = tuple(SCENARIO.keys)



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
              "Files: a scenario or hardware profile YAML holds at most 1 MiB, a config.json 16 MiB, a CSV 256 MiB "
              "(`simulator/common/input_files.py`); YAML duplicate keys and tags (`!!python/...`) are refused.", "",
              "Kept so by `tests/test_schema.py`, `tests/test_schema_files.py`, `tests/test_schema_limits.py`, the "
              "seeded fuzz test `tests/test_fuzz.py`, the invariants of `tests/test_properties.py`, and the long "
              "campaign `benchmarks/fuzz_campaign.py` (results: `benchmarks/results/fuzz_campaign.md`).", "",
              "## Model config.json keys read (integers)", "", "| key | allowed | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{k}` | {f.allowed()} | {f.doc} |" for k, f in MODEL_CONFIG.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(schema_markdown(), end="")
