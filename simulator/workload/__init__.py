"""The requests: arrivals and lengths (workload.py), length distributions (length_dist.py),
dataset presets (workload_presets.py) and a rate over a day (rate_schedule.py).
"""
