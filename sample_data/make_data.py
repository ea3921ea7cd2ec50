"""Generate the synthetic credit dataset used by the frpd examples.

Usage::

    python sample_data/make_data.py [--seed 7] [--rows 2000] [--out sample_data/credit.csv]

The data are synthetic: every row is drawn from a small generative model whose
marginals loosely follow the classic German credit data. The target ``label``
(1 = good credit) is drawn from a logistic latent score in which higher savings,
owning a home, a skilled or management job, a shorter duration, a lower monthly
burden (amount per month of duration) and an older age all make good credit more
likely. ``personal_status`` has no direct effect on the score.

The output is deterministic: the same seed always gives a byte-identical file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent

FEATURES = ["age", "personal_status", "duration", "credit_amount", "housing", "job", "savings"]
TARGET = "label"

PERSONAL_STATUS = ["female-div/sep/mar", "male-single", "male-mar/wid", "male-div/sep"]
HOUSING = ["own", "rent", "free"]
JOB = ["unskilled", "skilled", "management"]
SAVINGS = ["none", "little", "moderate", "rich"]

# Loan terms people usually ask for; the rest of the durations are spread out.
_COMMON_TERMS = np.array([6, 12, 18, 24, 30, 36, 48, 60])
_TERM_WEIGHTS = np.array([0.10, 0.26, 0.16, 0.22, 0.06, 0.10, 0.07, 0.03])

# Latent score: intercept chosen so that about two thirds of the labels are 1.
_INTERCEPT = 0.12
_SLOPE = 2.0


def _softmax_choice(rng: np.random.Generator, logits: np.ndarray) -> np.ndarray:
    """Draw one index per row from row-wise softmax(logits)."""
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    u = rng.random(len(p))[:, None]
    return (u > np.cumsum(p, axis=1)).sum(axis=1).clip(0, p.shape[1] - 1)


def latent_score(df: pd.DataFrame) -> np.ndarray:
    """The (noise-free) creditworthiness score of each row; higher is better."""
    savings = df["savings"].map({s: i for i, s in enumerate(SAVINGS)}).to_numpy(dtype=float)
    housing = df["housing"].map({"own": 0.45, "rent": -0.35, "free": 0.0}).to_numpy(dtype=float)
    job = df["job"].map({"unskilled": -0.45, "skilled": 0.15, "management": 0.55}).to_numpy(dtype=float)
    duration = df["duration"].to_numpy(dtype=float)
    amount = df["credit_amount"].to_numpy(dtype=float)
    age = df["age"].to_numpy(dtype=float)
    monthly = amount / duration
    return (
        _INTERCEPT
        + 0.55 * (savings - 1.0)
        + housing
        + job
        - 0.035 * (duration - 20.0)
        - 0.70 * np.log(monthly / 150.0)
        + 0.035 * (np.minimum(age, 60.0) - 35.0)
    )


def generate(n: int, seed: int, *, with_label: bool = True) -> pd.DataFrame:
    """Draw ``n`` rows from the generator with ``numpy.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)

    age = np.clip(np.rint(18.6 + rng.gamma(2.3, 8.0, n)), 19, 75).astype(np.int64)
    a = (age - 35.0) / 12.0

    # Married/widowed men skew older, single men younger.
    ps = _softmax_choice(
        rng,
        np.column_stack([np.full(n, 0.25), 0.65 - 0.45 * a, -0.55 + 0.45 * a, -0.85 + 0.15 * a]),
    )

    # Duration: mostly the usual terms, otherwise anything between 4 and 72 months.
    usual = rng.random(n) < 0.7
    duration = np.where(
        usual,
        rng.choice(_COMMON_TERMS, size=n, p=_TERM_WEIGHTS),
        rng.integers(4, 73, size=n),
    ).astype(np.int64)

    job = _softmax_choice(rng, np.column_stack([np.full(n, 0.0), 1.05 + 0.1 * a, -0.45 + 0.3 * a]))

    # Older applicants own or live rent-free more often.
    housing = _softmax_choice(rng, np.column_stack([1.35 + 0.35 * a, np.full(n, 0.0), -0.6 + 0.35 * a]))

    # Savings: ordinal, better for older and better-paid applicants.
    savings_latent = 0.35 * a + 0.45 * (job - 1) + rng.normal(0.0, 1.0, n)
    savings = np.searchsorted([-0.95, 0.45, 1.15], savings_latent, side="right")

    # Amount: right-skewed (log-normal), grows with duration and job level.
    log_amount = 6.95 + 0.033 * duration + 0.25 * (job - 1) + rng.normal(0.0, 0.5, n)
    credit_amount = np.round(np.clip(np.exp(log_amount), 250.0, 18000.0), 2)

    df = pd.DataFrame(
        {
            "age": age,
            "personal_status": np.asarray(PERSONAL_STATUS, dtype=object)[ps],
            "duration": duration,
            "credit_amount": credit_amount,
            "housing": np.asarray(HOUSING, dtype=object)[housing],
            "job": np.asarray(JOB, dtype=object)[job],
            "savings": np.asarray(SAVINGS, dtype=object)[savings],
        }
    )
    # Always draw the label noise so that feature columns do not depend on with_label.
    u = rng.random(n)
    if with_label:
        p_good = 1.0 / (1.0 + np.exp(-_SLOPE * latent_score(df)))
        df[TARGET] = (u < p_good).astype(np.int64)
    return df


def write_csv(df: pd.DataFrame, path: Path) -> None:
    """Write ``df`` with a fixed, platform-independent format."""
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False, lineterminator="\n", float_format="%.2f")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    parser.add_argument("--rows", type=int, default=2000, help="number of rows (default 2000)")
    parser.add_argument("--out", type=Path, default=HERE / "credit.csv", help="output CSV (default sample_data/credit.csv)")
    args = parser.parse_args(argv)
    if args.rows < 1:
        parser.error("--rows must be at least 1")
    df = generate(args.rows, args.seed)
    write_csv(df, args.out)
    print(
        f"wrote {len(df)} rows to {args.out} (seed {args.seed}, {df[TARGET].mean():.1%} label=1)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
