"""The model served: its spec (model_spec.py), found by name or path (catalog.py) and read from a
HF-style config.json (model_config.py, with one checked key reader and the keys' limits:
config_keys.py), its layer kinds (layer_types.py), weight formats (weight_formats.py) and the MoE
parallel layout (moe_parallel.py).
"""
