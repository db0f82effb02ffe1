"""What every study uses: scenarios as mappings with key-path overrides and grids (overrides.py),
points run through the resumable store (points.py, point_store.py, shared by concurrent runs via
store_claims.py) on local pools or clusters (executors.py), the drafter argument
(drafter_arg.py), the saturated / KV-limited rule (saturation.py), input and JSON helpers
(inputs.py, jsonable.py) and the plots (plots.py lists them by concept; labels placed where they cover
nothing: plot_labels.py).
"""
