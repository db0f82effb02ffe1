"""Speculative decoding: the drafters (drafters.py, drafter_structure.py), acceptance models,
presets and traces (acceptance.py, acceptance_presets.py, acceptance_trace.py), how K is chosen
(policies.py, the engines' own rules: engine_policies.py, the replica's side: k_choice.py), the
scenario's acceptance and policy blocks built into models (acceptance_spec.py, policy_spec.py), the
closed forms (spec_math.py) and the analytic speedup and break-even (analytic.py).
"""
