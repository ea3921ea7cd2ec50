"""Train the sample classifier on credit.csv and save it with joblib.

Usage::

    python sample_data/train_model.py [--data sample_data/credit.csv] [--out sample_data/model.pkl]
                                      [--write-applicants]

The model is a scikit-learn Pipeline (one-hot encoding of the categorical and
ordinal columns, min-max scaling of the numeric ones, then an MLP) fitted on
the raw feature columns, so ``feature_names_in_`` lists the seven features.
It is fitted on a stratified 80% split; the accuracy on the other 20% is
printed to stderr. Training is deterministic (fixed seeds, one BLAS thread),
so every machine rebuilds the same model from the same CSV.

With ``--write-applicants`` the script also regenerates applicants.csv: rows
drawn from the same generator as credit.csv (another seed) that the freshly
trained model denies with a margin (favourable probability below 0.4), so that
they stay denied even if floating-point details differ slightly elsewhere.
"""

from __future__ import annotations

import os

# Single-threaded BLAS: must be set before numpy is imported.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import joblib  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.neural_network import MLPClassifier  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_data import FEATURES, TARGET, generate, write_csv  # noqa: E402

CATEGORICAL = ["personal_status", "housing", "job", "savings"]
NUMERIC = ["age", "duration", "credit_amount"]

APPLICANT_SEED = 2023
N_APPLICANTS = 20
APPLICANT_MAX_PROBA = 0.4  # denied with a margin below the 0.5 threshold
APPLICANT_POOL = 2000


def build_pipeline() -> Pipeline:
    pre = ColumnTransformer(
        [
            ("onehot", OneHotEncoder(handle_unknown="ignore"), CATEGORICAL),
            ("minmax", MinMaxScaler(), NUMERIC),
        ]
    )
    mlp = MLPClassifier(
        hidden_layer_sizes=(20, 50, 20),
        alpha=1e-3,
        max_iter=1000,
        early_stopping=True,  # stop on a 10% validation slice of the training split
        random_state=0,
    )
    return Pipeline([("preprocess", pre), ("mlp", mlp)])


def favourable_proba(model: Pipeline, X: pd.DataFrame) -> np.ndarray:
    classes = list(model.classes_)
    return model.predict_proba(X[FEATURES])[:, classes.index(1)]


def pick_applicants(model: Pipeline) -> pd.DataFrame:
    pool = generate(APPLICANT_POOL, APPLICANT_SEED, with_label=False)
    denied = pool[favourable_proba(model, pool) < APPLICANT_MAX_PROBA].head(N_APPLICANTS)
    if len(denied) < N_APPLICANTS:
        raise SystemExit(f"only {len(denied)} denied applicants in a pool of {APPLICANT_POOL}; expected {N_APPLICANTS}")
    denied = denied.reset_index(drop=True)
    denied.insert(0, "applicant_id", [f"A{i + 1:03d}" for i in range(len(denied))])
    return denied


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=HERE / "credit.csv", help="training CSV (default sample_data/credit.csv)")
    parser.add_argument("--out", type=Path, default=HERE / "model.pkl", help="model file (default sample_data/model.pkl)")
    parser.add_argument(
        "--write-applicants",
        action="store_true",
        help="also regenerate applicants.csv next to --data with rows the new model denies",
    )
    args = parser.parse_args(argv)

    if not args.data.is_file():
        raise SystemExit(f"training data not found: {args.data} (run python sample_data/make_data.py first)")
    df = pd.read_csv(args.data)
    missing = [c for c in FEATURES + [TARGET] if c not in df.columns]
    if missing:
        raise SystemExit(f"{args.data} lacks columns {missing}; expected {FEATURES + [TARGET]}")
    X, y = df[FEATURES], df[TARGET].astype(int)

    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
    start = time.perf_counter()
    with threadpool_limits(limits=1):
        model = build_pipeline().fit(X_train, y_train)
    elapsed = time.perf_counter() - start

    accuracy = float((model.predict(X_test) == y_test).mean())
    with threadpool_limits(limits=1):
        unfavourable = int((favourable_proba(model, X) < 0.5).sum())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    joblib.dump(model, args.out)
    print(
        f"trained in {elapsed:.1f}s on {len(X_train)} rows; held-out accuracy {accuracy:.3f} on {len(X_test)} rows\n"
        f"predicted unfavourable: {unfavourable} of {len(X)} rows of {args.data.name}\n"
        f"saved {args.out}",
        file=sys.stderr,
    )

    if args.write_applicants:
        with threadpool_limits(limits=1):
            applicants = pick_applicants(model)
        path = args.data.parent / "applicants.csv"
        write_csv(applicants, path)
        print(f"wrote {len(applicants)} denied applicants to {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
