"""vLLM's CPU attention kernels in the calibration passes (calibrate/vllm_attention.py): a pass
over vLLM's paged cache gives the probabilities torch's SDPA pass gives on the same weights (only
where .venv-vllm exists), and the flag's bad values are one-line errors."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from calibrate.layers import DecoderModel  # noqa: E402
from simulator.common.errors import SpecsightInputError  # noqa: E402
from simulator.models.catalog import load_model  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
ENGINE_VENV = Path(os.environ.get("SPECSIGHT_ENGINE_VENV", REPO / ".venv-vllm"))
NO_ENGINE = "no vLLM engine: .venv-vllm is absent (bash scripts/setup.sh --engine vllm)"


@pytest.mark.skipif(not (ENGINE_VENV / "bin" / "python").exists(), reason=NO_ENGINE)
@pytest.mark.parametrize("batch,new,context", [(1, 1, 140), (3, 4, 130), (2, 1, 260)])
def test_vllm_attention_pass_matches_torch(batch: int, new: int, context: int) -> None:
    """Same weights, same cached tokens: the two attentions' next-token probabilities agree to
    fp32 rounding (ragged context across a 128-token block boundary included)."""
    from calibrate.vllm_attention import load_kernels
    load_kernels(ENGINE_VENV)
    spec = load_model(str(REPO / "models/groundtruth/tiny-s/config.json"))
    gen = torch.Generator().manual_seed(3)
    prefix = torch.randint(0, spec.vocab_size, (batch, context), generator=gen)
    toks = torch.randint(0, spec.vocab_size, (batch, new), generator=gen)
    out = {}
    for att in DecoderModel.ATTENTION:
        m = DecoderModel(spec, 2, dtype="fp32", attention=att, seed=0)
        cache = m.new_cache(batch, context + new + 8)
        m(prefix, cache, logits="last", max_length=0)          # the context written at lengths 0
        cache.lengths.fill_(context)
        out[att] = m(toks, cache, logits="all", max_length=context)
    assert out["vllm"].shape == out["torch"].shape == (batch, new, spec.vocab_size)
    torch.testing.assert_close(out["vllm"], out["torch"], rtol=1e-4, atol=1e-6)


def test_vllm_attention_bad_venv_is_one_line_error(tmp_path: Path) -> None:
    from calibrate.vllm_attention import load_kernels
    with pytest.raises(SpecsightInputError, match="--engine-venv.*setup.sh --engine vllm"):
        load_kernels(tmp_path)


def test_vllm_attention_off_cpu_refused() -> None:
    with pytest.raises(ValueError, match="on a CPU only"):
        DecoderModel(load_model(str(REPO / "models/groundtruth/tiny-s/config.json")), 1, attention="vllm",
                     device="meta")
