"""Capacity planning: the replicas, GPUs and cost to serve a rate within an SLO (study.py:
`capacity_plan`), the GPU-hour price (price.py), the cheapest configuration of a grid (search.py:
`plan_search`), and their files (outputs.py, search_outputs.py, search_plot.py).
"""
