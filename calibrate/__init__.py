"""specsight's calibration side: torch code that measures and verifies.

Submodules are imported explicitly (``from calibrate.pipeline import calibrate_profile``); this
package imports nothing eagerly, so ``import calibrate`` stays cheap and torch-free.

    pipeline          the jobs as one call each: calibrate_profile, calibrate_from_vidur,
                      record_groundtruth, validate_run (specsight/cli/calibrate.py,
                      groundtruth.py and validate.py print them)
    machine           device defaults and setup (MachineConfig), environment record
    layers            the timed decoder (real dims, random weights), KV cache, PassRunner
    grids             the pass grids a calibration times (--passes NAME)
    microbench        timing the grid's passes, resumable points file
    timing            time_fn, the cache Evictor, the progress bar
    ceilings          a CPU's measured peaks and per-kernel dispatch time
    least_squares     the log-time least squares of a profile's efficiencies and overheads
    fit               the device fit over the grid (per attention structure)
    fit_host          the host overheads of a round (iteration, per logit row, per verify)
    rounds_check      speculative rounds composed from the passes, measured vs fitted
    profile_writer    the calibrated profile YAML (and a CPU's base profile)
    vidur             the same fit from Vidur's A100 operator tables
    vidur_attention   the attention term against Vidur's A100 FlashAttention timings
    groundtruth       real speculative decoding in torch, timed per round
    host_work         a round's draws, verify kernel and commit (run and timed)
    vllm_grid         vLLM's own engine as ground truth: the grid of runs, their names, sessions
    vllm_checkpoints  the lookup checkpoints (target, draft model, EAGLE-1/3 heads), acceptance by design
    vllm_runner       one engine session, run inside .venv-vllm: plain and speculative timed alternately
    vllm_launch       the runner started from specsight's venv, its lines appended as records
    vllm_results      the results file: header, run records, resume by name
    validate          a ground-truth run predicted by the cost model and compared
    sampling          the exact speculative sampling kernel (chain) and greedy verification
    sampling_tree     exact token-tree verification
    sampling_typical  Medusa-2's typical acceptance (not distribution-preserving)
    sampling_fast     the chain kernel's GPU fast path
    sampling_reference  scalar references of the chain and tree kernels
    acceptance_source accept lengths drawn from the kernel, for the simulator
"""
