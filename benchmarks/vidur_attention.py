"""The cost model's attention term against Vidur's A100 FlashAttention timings: the error tables
of docs/calibration.md ("Attention against Vidur's A100 kernels").

    .venv/bin/python benchmarks/vidur_attention.py [--csv PATH] [--gpu PROFILE] [--json]

Prints the datasheet profile's median absolute percentage error on decode attention by batch and
context band, the fitted attention rates (efficiency.memory_attention and the attention kernel's
fixed time) with their error held out by context band, the per-(sequence, KV head) wave model's,
and the prefill tables. --json prints the summary instead.
"""
from __future__ import annotations

import argparse
import json

from calibrate.vidur_attention import ATTN, LAUNCH, attention_report, table_markdown

TITLES = {
    "decode_datasheet": "Decode, the profile as shipped",
    "decode_heldout": "Decode, fitted rates, held out (each context band predicted by a fit on the others)",
    "decode_waves_heldout": "Decode, fitted rates with attention_blocks per_sequence_head (108 SMs), held out",
    "prefill_datasheet": "Prefill, the profile as shipped",
    "prefill_fit": "Prefill, the decode fit's rates",
    "prefill_class_heldout": "Prefill, a prefill-class kernel's own rates (not in the cost model), held out",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", default=None, help="attention.csv (default: the repository's reduced copy)")
    ap.add_argument("--gpu", default="a100-80gb-sxm", help="hardware profile to price with")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args()
    rep = attention_report(args.csv, args.gpu)
    s = rep.summary()
    if args.json:
        print(json.dumps(s, indent=2))
        return
    f = s["fitted"]
    print(f"profile {s['base_profile']}: {s['decode_points']} decode and {s['prefill_points']} prefill points")
    print(f"fitted on all decode points: {ATTN}={f[ATTN]:.4f}, {LAUNCH}={f[LAUNCH]:.2f} (attention kernel)")
    print(f"decode median APE: {s['base_profile']} as shipped {100 * s['decode_datasheet_ape_median']:.1f} %, "
          f"fit in sample {100 * s['decode_fit_ape_median']:.1f} %, "
          f"held out {100 * s['decode_heldout_ape_median']:.1f} % "
          f"(goal {100 * s['heldout_goal']:.0f} %: {'met' if s['heldout_goal_met'] else 'NOT met'}); "
          f"per_sequence_head held out {100 * s['decode_waves_heldout_ape_median']:.1f} %")
    c = s["prefill_class_fitted"]
    print(f"prefill median APE: as shipped {100 * s['prefill_datasheet_ape_median']:.1f} %, decode fit "
          f"{100 * s['prefill_fit_ape_median']:.1f} %; prefill-class rates (compute {c['compute_fraction']:.3f}, "
          f"causal pair weight {c['causal_pair_weight']:.2f}, fixed {c['fixed_us']:.1f} us) held out "
          f"{100 * s['prefill_class_heldout_ape_median']:.1f} %")
    for key, table in rep.tables().items():
        print(f"\n{TITLES[key]}: median APE\n")
        print(table_markdown(table, "batch" if key.startswith("decode") else "chunk"))


if __name__ == "__main__":
    main()
