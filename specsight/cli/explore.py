"""`specsight explore [SCENARIO] [--port N]`: the browser explorer on 127.0.0.1 (docs/explore.md).

Starts from SCENARIO (default scenarios/llama8b-h100-eagle3-chat.yaml), prints its URL and serves
until Ctrl-C. Simulated points go to DIR/points.jsonl (--out), so a setting simulated once shows
again at once, also after a restart.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from .args import add_out

DEFAULT_SCENARIO = "scenarios/llama8b-h100-eagle3-chat.yaml"
DEFAULT_PORT = 8050


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explore", help="the browser explorer: sliders, the round timeline, simulate on demand")
    p.add_argument("scenario", nargs="?", help=f"scenario YAML to start from (default {DEFAULT_SCENARIO})")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port on 127.0.0.1 (default {DEFAULT_PORT}; "
                   "0: any free port)")
    add_out(p, "out/explore", "folder for the point store and uploaded metrics files")
    p.add_argument("--workers", metavar="N", help="processes a simulation runs its points on (default 1)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from simulator.common.paths import REPO_ROOT

    from ..explore.server import check_port, serve
    from ..studies.shared.executors import check_workers
    from ..studies.shared.overrides import scenario_source
    from .args import check_out_dir

    port = check_port(args.port)
    workers = 1 if args.workers is None else check_workers(args.workers)
    base = scenario_source(args.scenario or REPO_ROOT / DEFAULT_SCENARIO)
    return serve(base, port, Path(check_out_dir(args.out)), workers)
