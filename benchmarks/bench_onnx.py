"""Plan throughput with an ONNX model against the pickle it was exported from, on Adult.

Run: python benchmarks/bench_onnx.py [--train CSV --model PKL --applicants CSV] [--n N] [--repeats R]

Without --train/--model/--applicants, Adult is read from ../shared/datasets and the pickle trained as in
bench_plan.py (80/20 stratified split, seed 42, MLP (20, 50, 20); applicants = test rows predicted unfavourable).
The pickle is exported to ONNX twice with skl2onnx (one input per column, float for numbers, string for text):
with a plain probability tensor and with ZipMap ({label: probability} maps). Each model then:

* scores the training rows through frpd's model layer (fixed 512-row blocks): CPU seconds, best of R;
* plans the first N denied applicants through the command line (`frpd plan`, quad, K = 3, immutable
  marital_status and gender, age increasing, --jobs 1): planning CPU time = CPU time (user + system) of the
  whole command minus that of the same command on one applicant (start-up, reading and scoring the training
  set), best of R; applicants per CPU second = (N - 1) / planning CPU time. Wall times are shown too.

The ONNX plans are compared with the pickle's: recourse rows whose values differ, and the largest difference of
the reported probabilities. Results go to docs/benchmarks.md (section bench_onnx).
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import machine_line, markdown_table, publish  # noqa: E402
from frpd_cli.model import load_model  # noqa: E402

DATASETS = Path(os.environ.get("FRPD_DATASETS", ROOT.parent / "shared" / "datasets"))
FRPD = [sys.executable, "-m", "frpd_cli"]
FLAGS = ["--target", "label", "--immutable", "marital_status", "--immutable", "gender", "--increasing", "age",
         "--method", "quad", "-k", "3", "--format", "csv", "--jobs", "1"]


def export_onnx(pickle_path: Path, frame: pd.DataFrame, out: Path, *, zipmap: bool) -> Path:
    """The ONNX recipe of docs/models.md: skl2onnx with one input per feature column."""
    import joblib
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType

    pipeline = joblib.load(pickle_path)
    types = [(c, FloatTensorType([None, 1]) if frame[c].dtype.kind in "if" else StringTensorType([None, 1]))
             for c in frame.columns]
    proto = convert_sklearn(pipeline, initial_types=types, options={id(pipeline): {"zipmap": zipmap}})
    out.write_bytes(proto.SerializeToString())
    return out


def _run(model: Path, train: Path, applicants: Path, out: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the child) of one `frpd plan` run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([*FRPD, "plan", str(train), "--model", str(model), "--applicants", str(applicants),
                           "--output", str(out), *FLAGS], capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"frpd plan failed with {model.name}:\n{done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _score_cpu(model_path: Path, frame: pd.DataFrame, repeats: int) -> tuple[float, np.ndarray]:
    features = [c for c in frame.columns if c != "label"]
    model = load_model(model_path, favorable=1, feature_names=features)
    best, proba = float("inf"), None
    for _ in range(repeats):
        start = time.process_time()
        proba = model.favorable_probability(frame[features])
        best = min(best, time.process_time() - start)
    return best, proba


def _recourses(path: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


def _inputs(args, tmp: Path) -> tuple[Path, Path, Path] | None:
    if args.train and args.model and args.applicants:
        return Path(args.train), Path(args.model), Path(args.applicants)
    if not (DATASETS / "adult.csv").exists():
        return None
    from benchmarks.bench_plan import _train_adult

    train, model, _, denied = _train_adult(tmp)
    applicants = tmp / "denied_all.csv"
    denied.to_csv(applicants, index=False)
    return Path(train), Path(model), applicants


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", help="training CSV (with a 'label' column)")
    parser.add_argument("--model", help="the pickled pipeline trained on it")
    parser.add_argument("--applicants", help="denied applicants CSV")
    parser.add_argument("--n", type=int, default=2000, help="applicants to plan (default 2000)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of each measurement (best kept)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        found = _inputs(args, tmp)
        if found is None:
            print(f"bench_onnx: skipped, Adult is not available (pass --train, --model and --applicants, or put "
                  f"adult.csv in {DATASETS}).", file=sys.stderr)
            return 0
        train, pickle_path, applicants_path = found
        frame = pd.read_csv(train)
        features = frame.drop(columns="label")
        models = {"pickle (scikit-learn)": pickle_path,
                  "ONNX, probability tensor": export_onnx(pickle_path, features, tmp / "adult.onnx", zipmap=False),
                  "ONNX, ZipMap": export_onnx(pickle_path, features, tmp / "adult_zipmap.onnx", zipmap=True)}
        applicants = tmp / "applicants.csv"
        one = tmp / "one.csv"
        denied = pd.read_csv(applicants_path, dtype=str, keep_default_na=False)
        denied.head(args.n).to_csv(applicants, index=False)
        denied.head(1).to_csv(one, index=False)
        n = min(args.n, len(denied))

        rows, reference, reference_proba = [], None, None
        for label, model in models.items():
            score_cpu, proba = _score_cpu(model, frame, args.repeats)
            out = tmp / f"{model.stem}.csv"
            whole = min((_run(model, train, applicants, out) for _ in range(args.repeats)), key=lambda t: t[1])
            single = min((_run(model, train, one, tmp / "one_out.csv") for _ in range(args.repeats)),
                         key=lambda t: t[1])
            planning_cpu = whole[1] - single[1]
            recourses = _recourses(out)
            if reference is None:
                reference, reference_proba = recourses, proba
                differ, max_dp, max_train_dp = 0, 0.0, 0.0
            else:
                strip = [{k: v for k, v in r.items() if k != "probability"} for r in recourses]
                base = [{k: v for k, v in r.items() if k != "probability"} for r in reference]
                differ = sum(a != b for a, b in zip(strip, base)) + abs(len(strip) - len(base))
                max_dp = max((abs(float(a["probability"]) - float(b["probability"]))
                              for a, b in zip(recourses, reference) if a["probability"] and b["probability"]),
                             default=0.0)
                max_train_dp = float(np.max(np.abs(proba - reference_proba)))
            rows.append({
                "model": label,
                "scoring CPU s (training rows)": f"{score_cpu:.3f}",
                "whole command CPU s": f"{whole[1]:.2f}",
                "one-applicant run CPU s": f"{single[1]:.2f}",
                "planning CPU s": f"{planning_cpu:.2f}",
                "applicants per CPU s": f"{(n - 1) / planning_cpu:.0f}",
                "whole command wall s": f"{whole[0]:.2f}",
                "recourse rows differing from the pickle's": differ,
                "max abs Δ probability (recourses / training rows)": f"{max_dp:.1e} / {max_train_dp:.1e}",
            })

        load = os.getloadavg()
        lines = [
            "## ONNX model against the pickle (`benchmarks/bench_onnx.py`)",
            "",
            f"`frpd plan` on {n} denied Adult applicants ({len(frame)} training rows; quad, K = 3, immutable "
            "marital_status and gender, age increasing, `--jobs 1`), with the Adult MLP pipeline as a pickle and "
            "exported to ONNX by skl2onnx (one input per column). Planning CPU time = CPU time of the whole command "
            "minus that of a one-applicant run (start-up, reading and scoring the training set); best of "
            f"{args.repeats}. Scoring = the model layer on the {len(frame)} training rows (512-row blocks).",
            "",
            *markdown_table(rows, list(rows[0])),
            "",
            f"Machine: {machine_line()}; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end.",
        ]
        publish("bench_onnx", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
