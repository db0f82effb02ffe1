"""A scenario file: read and turned into specs (scenario.py), checked against the schema table
(schema_table.py) and refused before it runs if its work is too large (work_limits.py).
"""
