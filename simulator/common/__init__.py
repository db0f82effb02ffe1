"""What every layer of the simulator (and calibrate and specsight) uses, importing nothing else of
it: the input error and its checks (errors.py), unknown-key checks (keys.py), where the shipped
data lives (paths.py), input files read safely (input_files.py, csvio.py, jsonl.py), outputs
written whole (atomic_files.py), the usable CPUs (cpus.py), the schema's types and checks
(schema.py) and the limits every schema block shares (limits.py).
"""
