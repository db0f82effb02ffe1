"""specsight's simulator: catalogs, the roofline cost model, speculation math and the SimPy serving model.

Nothing in this package imports torch; calibration lives in `calibrate/`.
"""
