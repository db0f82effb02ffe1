"""A scenario file: read and turned into specs (scenario.py), with its `hardware:` and `engine:`
blocks (hardware_spec.py, engine_spec.py), checked against the schema composed from every
concept's block (schema_table.py, which also renders docs/schema.md) and refused before it runs if
its work is too large (work_limits.py); and what it resolves to on its hardware (resolve.py:
`resolve_deployment`; a real engine's: engine_deployment.py; the `Deployment`, its drafter held or
not, its KV memory: deployment.py; a real engine's defaults filled in: engine_defaults.py).
"""
