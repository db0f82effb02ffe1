"""Moved to simulator/common/output_files.py (one checked writer every layer imports); this name stays
for one release."""
from simulator.common.output_files import out_file, out_folder, replacing, write_csv, write_text  # noqa: F401
