"""What every layer of the simulator uses, importing nothing else of it: the input error and its
checks (errors.py), unknown-key checks (keys.py), where the shipped data lives (paths.py), input
files read safely (input_files.py, csvio.py, jsonl.py), the usable CPUs (cpus.py), and the schema's
types and checks (schema.py).
"""
