"""specsight's calibration side: torch code that measures and verifies.

Submodules are imported explicitly (``from calibrate.sampling import verify_chain``); this
package imports nothing eagerly, so ``import calibrate`` stays cheap and torch-free.
"""
