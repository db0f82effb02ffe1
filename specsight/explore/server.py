"""Serve the explorer on 127.0.0.1 until Ctrl-C: a threaded WSGI server (werkzeug, Flask's own)
around the Dash app, the URL printed once it listens, a running simulation stopped on the way out
(Ctrl-C or SIGTERM; a finished point stays in the store)."""
from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simulator.common.errors import SpecsightInputError

from .app import create_app
from .settings import Settings, from_scenario
from .sim_jobs import SimJobs

HOST = "127.0.0.1"
MAX_PORT = 65535


def check_port(port: Any) -> int:
    """A TCP port in [0, 65535] (0: any free one)."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= MAX_PORT:
        raise SpecsightInputError("--port", port, f"a TCP port in [0, {MAX_PORT}] (0: any free port)")
    return port


class Explorer:
    """The app, its server and its simulations for one scenario; `url` once made."""

    def __init__(self, base: Mapping[str, Any], port: int, work_dir: Path, workers: int | None = 1,
                 settings: Settings | None = None):
        from werkzeug.serving import make_server
        self.jobs = SimJobs(work_dir / "points.jsonl", workers)
        self.app = create_app(base, settings or from_scenario(base), work_dir, self.jobs)
        logging.getLogger("werkzeug").setLevel(logging.WARNING)      # no line per request
        try:
            self.server = make_server(HOST, check_port(port), self.app.server, threaded=True)
        except OSError as e:
            raise SpecsightInputError("--port", port, f"a free port on {HOST} ({e.strerror or e}); "
                                      "--port 0 takes any free one") from None
        self.url = f"http://{HOST}:{self.server.server_port}/"

    def serve_forever(self) -> None:
        self.server.serve_forever()

    def close(self) -> None:
        """Stop serving (from another thread than serve_forever's) and stop any simulation."""
        self.server.shutdown()
        self.server.server_close()
        self.jobs.close()


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


# NOTE: SIGINT too, not only SIGTERM: a process started in the background by a non-interactive shell
# (`cmd &` in a script, a CI step) inherits SIGINT ignored, and Python then installs no handler of
# its own, so without this a `kill -INT` (or the test suite's) would never stop the server.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def serve(base: Mapping[str, Any], port: int, work_dir: Path, workers: int | None) -> int:
    """Run the explorer in the foreground; Ctrl-C (SIGINT, also where it was inherited ignored) or
    SIGTERM stops it (exit code 0)."""
    ex = Explorer(base, port, work_dir, workers)
    previous = {s: signal.signal(s, _interrupt) for s in STOP_SIGNALS}
    print(f"specsight explore: {ex.url}  (Ctrl-C stops it)", flush=True)
    try:
        ex.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        ex.server.server_close()
        ex.jobs.close()
    print("specsight explore: stopped", file=sys.stderr)
    return 0
