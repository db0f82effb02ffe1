"""Where the shipped data lives (the repository root: hardware_profiles/, models/, scenarios/, data/)."""
from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
HARDWARE_DIR = REPO_ROOT / "hardware_profiles"
MODELS_DIR = REPO_ROOT / "models"
SCENARIOS_DIR = REPO_ROOT / "scenarios"
DATA_DIR = REPO_ROOT / "data"
