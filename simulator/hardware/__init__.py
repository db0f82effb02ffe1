"""GPU profiles (hardware_profiles/*.yaml, every number with its source): read, checked and
looked up by name (hardware.py).
"""
