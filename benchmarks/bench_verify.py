"""What checking every recourse before it is written costs.

Run: python benchmarks/bench_verify.py [--repeat R]

The sample credit data and model (sample_data/; `make sample-model`), applicants = the training rows the model
denies (612), K = 3, quad, linear interpolation, chunks of 256. Prints the time of planning every chunk (which
includes the verification), the time of verify_plans alone on the same plans (the best of R runs) and its
share, and the number of model calls verify_plans makes (one per chunk).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from frpd_cli.dataset import build_training_set, read_training_frame, resolve_spec  # noqa: E402
from frpd_cli.model import load_model  # noqa: E402
from frpd_cli.planning import PlanSettings, plan_applicants  # noqa: E402
from frpd_cli.schema import SchemaSpec, infer_schema  # noqa: E402
from frpd_cli.verification import verify_plans  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sample = ROOT / "sample_data"
    frame = read_training_frame(sample / "credit.csv")
    schema = infer_schema(frame, resolve_spec(sample / "schema.toml", SchemaSpec()))
    model = load_model(sample / "model.pkl", favorable=schema.favorable, feature_names=schema.feature_names)
    training = build_training_set(frame, schema, model)
    applicants = training.frame[~training.favorable].reset_index(drop=True)
    ids = [str(i) for i in range(len(applicants))]

    start = time.perf_counter()
    chunks = list(plan_applicants(training, model, applicants, ids, PlanSettings(k=3), chunk_size=256))
    planning = time.perf_counter() - start
    n_recourses = sum(len(p.recourses) for chunk in chunks for p in chunk)

    calls = []

    class Counting:
        threshold = model.threshold

        def favorable_probability(self, rows):
            calls.append(len(rows))
            return model.favorable_probability(rows)

    best = float("inf")
    for _ in range(args.repeat):
        calls.clear()
        start = time.perf_counter()
        for chunk in chunks:
            verify_plans(training.encoder, Counting(), chunk)
        best = min(best, time.perf_counter() - start)
    print(f"{len(applicants)} applicants, {n_recourses} recourses, {len(chunks)} chunks")
    print(f"plan (with verification): {planning:.2f} s")
    print(f"verify_plans alone: {best * 1000:.1f} ms ({best / planning:.1%} of planning), "
          f"{best / max(n_recourses, 1) * 1e6:.0f} us per recourse, {len(calls)} model call(s)")


if __name__ == "__main__":
    main()
