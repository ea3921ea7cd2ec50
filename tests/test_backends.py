"""Backends return results in order and identical to a serial run."""

from __future__ import annotations

import numpy as np
import pytest

from frpd_cli.backends import map_ordered
from frpd_cli.exceptions import InputError


def _work(big, i, scale):
    return float(big[i].sum() * scale), i


def _tasks(big):
    return [(big, i, 0.5) for i in range(12)]


def test_serial_and_loky_agree():
    big = np.arange(12 * 50, dtype=np.float64).reshape(12, 50)
    serial = list(map_ordered(_work, _tasks(big)))
    pooled = list(map_ordered(_work, _tasks(big), n_jobs=2))
    assert serial == pooled and [i for _, i in serial] == list(range(12))


def test_dask_local_cluster_agrees():
    pytest.importorskip("dask.distributed")
    big = np.arange(12 * 50, dtype=np.float64).reshape(12, 50)
    serial = list(map_ordered(_work, _tasks(big)))
    on_dask = list(map_ordered(_work, _tasks(big), n_jobs=2, backend="dask", scatter=(big,)))
    assert serial == on_dask


def test_bad_options():
    with pytest.raises(InputError, match="loky, dask"):
        list(map_ordered(_work, [], backend="spark"))
    with pytest.raises(InputError, match="--backend dask"):
        list(map_ordered(_work, [], scheduler="tcp://127.0.0.1:1"))
    with pytest.raises(InputError, match=">= 1"):
        list(map_ordered(_work, [], n_jobs=0))
