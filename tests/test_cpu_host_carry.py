"""`validate --published --cpu-host` (specsight/studies/published/host.py) sets vLLM's H(B) on every
vLLM row of the published table through an engine profile: each of those rows' engine versions must
be one a profile can set, or the command stops at that row."""
from simulator.engines.host import check_profile_engine
from specsight.studies.published.study import engine_for, load_published, scenario_for


def test_every_published_vllm_rows_version_takes_an_engine_profile():
    cat = load_published()
    versions = {scenario_for(row, cat.datasets, "vllm")["engine"].get("version", "v1")
                for row in cat.rows if row.engine == "vllm" and engine_for(row, cat.datasets)[0] == "vllm"}
    assert "v1-0.8" in versions          # the eager-drafter rows that stopped the command
    for version in sorted(versions):
        check_profile_engine("vllm", version)
