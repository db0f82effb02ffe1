"""The point store: an append-only JSON-lines file of finished points, indexed by key.

The last record of a key wins. A torn last line (a write cut short by an interruption) is
skipped when reading and cut off before the next append, so the next record starts on a line
of its own. `refresh()` reads only what was appended since the last read, so a run sharing the
store with another (store_claims.py) sees the other's points as they finish.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simulator.common.atomic_files import check_target
from simulator.common.jsonl import open_append, write_record

from .store_claims import unusable_store


class PointStore:
    """Finished points by key, read from `path` (None: in memory only)."""

    def __init__(self, path: str | Path | None):
        self.path = None if path is None else Path(path)
        self.records: dict[str, dict[str, Any]] = {}
        self._offset = 0                    # bytes of `path` read: always just after a newline
        self.refresh()

    def __contains__(self, key: str) -> bool:
        return key in self.records

    def __len__(self) -> int:
        return len(self.records)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.records.get(key)

    def refresh(self) -> None:
        """Read the complete lines appended to the file since the last read (each a new dict,
        so `get(key) is not old` tells a record written meanwhile)."""
        if self.path is None:
            return
        check_target(self.path, "store")      # a symlink, FIFO or device is refused, never read
        try:
            with self.path.open("rb") as f:
                size = f.seek(0, 2)
                if size < self._offset:         # the file was replaced or cut: read it again
                    self._offset = 0
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            self._offset = 0
            return
        except OSError as e:                    # a folder, no permission, ... where the store belongs
            raise unusable_store(self.path, e) from None
        end = data.rfind(b"\n") + 1             # a torn last line waits for its newline (or its cut)
        for line in data[:end].splitlines():
            try:
                rec = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(rec, dict) and isinstance(rec.get("key"), str):
                self.records[rec["key"]] = rec
        self._offset += end

    def put(self, record: dict[str, Any]) -> None:
        """Keep `record` and append it to the file (the torn tail of an interrupted write cut first).
        Runs sharing the file call this under the store's mutex (store_claims.py)."""
        self.records[record["key"]] = record
        if self.path is not None:
            with open_append(self.path) as f:
                write_record(f, record)
