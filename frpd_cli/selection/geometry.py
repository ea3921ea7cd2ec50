"""Direction geometry around an applicant and the eigenpairs of the cosine similarity matrix.

Everything downstream (DPP, QUAD, baselines) works on the unit direction rows
``a_i = (x_i - x0) / ||x_i - x0||`` and the distances ``d_i = ||x_i - x0||``.
The ``N x N`` similarity matrix ``S = A^T A`` of the paper is never formed: its
non-zero eigenpairs come from the ``p x p`` cross-product of the directions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from frpd_cli.exceptions import InputError

__all__ = ["Geometry", "Eigen", "compute_geometry", "eigen_decompose"]

_EIGEN_SOLVERS = ("gram", "svd")

#: Below this (2**969), ``x - x0`` of finite floats cannot overflow: ``|x - x0| <= max + 2**969`` rounds to at
#: most the largest float, whose spacing is 2**971.
_NO_OVERFLOW = 2.0**969


@dataclass(frozen=True, eq=False)
class Geometry:
    """Unit directions from the applicant to every candidate, and the distances.

    Attributes
    ----------
    directions : ndarray of shape (n_candidates, n_features)
        Row ``i`` is ``a_i = (x_i - x0) / d_i`` (paper eq. (1)); read-only, unit rows.
    distances : ndarray of shape (n_candidates,)
        ``d_i = ||x_i - x0||_2 > 0``; read-only.

    Notes
    -----
    ``eq=False``: instances compare by identity (arrays have no truth value).
    """

    directions: np.ndarray
    distances: np.ndarray

    @property
    def n_candidates(self) -> int:
        """Number of candidate rows ``N``."""
        return int(self.distances.shape[0])

    @property
    def n_features(self) -> int:
        """Dimension ``p`` of the encoded space."""
        return int(self.directions.shape[1])


class Eigen:
    """Top-``M`` eigenpairs of ``S = A^T A`` (the ``N x N`` cosine similarity matrix).

    Parameters
    ----------
    values : ndarray of shape (n_components,)
    vectors : ndarray of shape (n_candidates, n_components), optional
        The eigenvectors; omit them to give ``directions`` and ``coefficients`` instead.
    directions : ndarray of shape (n_candidates, n_features), optional
        The directions ``B`` the eigenpairs come from.
    coefficients : ndarray of shape (n_features, n_components), optional
        ``C`` with ``vectors = B C``.

    Attributes
    ----------
    values : ndarray of shape (n_components,)
        Eigenvalues ``sigma_1 >= ... >= sigma_M > 0``.
    vectors : ndarray of shape (n_candidates, n_components)
        Orthonormal eigenvectors ``v_m`` as columns. From :func:`eigen_decompose` they are formed on first
        access (``O(N p M)``): the screening only needs products with them, which :meth:`vectors_dot` and
        :meth:`vectors_sum` compute through ``B`` and ``C`` in ``O(N p)`` without the ``N x M`` array.

    Notes
    -----
    Instances are immutable and compare by identity.
    """

    __slots__ = ("values", "_vectors", "_directions", "_coefficients")

    def __init__(self, values, vectors=None, *, directions=None, coefficients=None):
        if vectors is None and (directions is None or coefficients is None):
            raise InputError("Eigen needs either 'vectors' or both 'directions' and 'coefficients'. Got neither.")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "_vectors", vectors)
        object.__setattr__(self, "_directions", None if vectors is not None else directions)
        object.__setattr__(self, "_coefficients", None if vectors is not None else coefficients)

    def __setattr__(self, name, value):
        raise AttributeError(f"Eigen is immutable; cannot set '{name}'.")

    def __reduce__(self):  # pickling (worker processes) without __setattr__
        return (_rebuild_eigen, (self.values, self._vectors, self._directions, self._coefficients))

    def __repr__(self) -> str:
        return f"Eigen(n_candidates={self.n_candidates}, n_components={self.n_components})"

    @property
    def vectors(self) -> np.ndarray:
        """Eigenvectors as the columns of an (n_candidates, n_components) array (read-only)."""
        if self._vectors is None:
            object.__setattr__(self, "_vectors", _readonly(self._directions @ self._coefficients))
        return self._vectors

    @property
    def n_components(self) -> int:
        """Number ``M`` of eigenpairs kept."""
        return int(self.values.shape[0])

    @property
    def n_candidates(self) -> int:
        """Number ``N`` of rows of the eigenvectors."""
        rows = self._vectors if self._vectors is not None else self._directions
        return int(rows.shape[0])

    def factors(self) -> tuple[np.ndarray, np.ndarray | None, float]:
        """``(R, C, r)`` with ``vectors = R C`` (``C`` None: ``R`` is the vectors) and ``r >= max_i ||R_i||``.

        ``|V_i^T x - V_i^T y| <= r ||C (x - y)||``: how far a product can move, without computing it.
        """
        if self._vectors is not None:
            norms = np.sqrt(np.einsum("ij,ij->i", self._vectors, self._vectors))
            return self._vectors, None, float(norms.max(initial=0.0)) * (1.0 + 1e-12)
        return self._directions, self._coefficients, 1.0 + 1e-12  # unit direction rows

    def vectors_dot(self, x: np.ndarray) -> np.ndarray:
        """``V x`` for ``x`` of shape (n_components,): shape (n_candidates,), ``O(N p)``."""
        if self._vectors is not None:
            return self._vectors @ x
        return self._directions @ (self._coefficients @ x)

    def vectors_sum(self, rows: np.ndarray) -> np.ndarray:
        """``V[rows].sum(axis=0)``, shape (n_components,), ``O(|rows| p)``."""
        if self._vectors is not None:
            return self._vectors[rows].sum(axis=0)
        return self._directions[rows].sum(axis=0) @ self._coefficients


def _rebuild_eigen(values, vectors, directions, coefficients) -> Eigen:
    return Eigen(values, vectors, directions=directions, coefficients=coefficients)


def _readonly(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def compute_geometry(X, x0, *, overwrite_X: bool = False) -> Geometry:
    """Compute the unit directions and distances from ``x0`` to every row of ``X``.

    Parameters
    ----------
    X : array-like of shape (n_candidates, n_features)
        Encoded candidate rows (finite floats). ``n_candidates`` may be 0.
    x0 : array-like of shape (n_features,)
        Encoded applicant.
    overwrite_X : bool
        When ``X`` is a writable float64 ndarray the caller no longer needs (e.g. a fresh gather of the
        candidate rows), compute the directions in its memory instead of a new array: the same values, one
        array of N x p fewer. ``X`` then holds the directions.

    Returns
    -------
    Geometry
        ``directions`` of shape (n_candidates, n_features) and ``distances`` of shape (n_candidates,).

    Raises
    ------
    InputError
        If the shapes do not match, a value is not finite, or a row of ``X`` equals ``x0``
        (its direction is undefined; the caller must exclude such rows first).

    Notes
    -----
    Cost ``O(N p)`` time and memory.

    References
    ----------
    Paper Section 1, "Additional notations", eq. (direction): ``a_i = (x_i - x0) / ||x_i - x0||_2``.

    Examples
    --------
    >>> g = compute_geometry([[3.0, 4.0], [0.0, 2.0]], [0.0, 0.0])
    >>> g.distances.tolist()
    [5.0, 2.0]
    >>> g.directions.tolist()
    [[0.6, 0.8], [0.0, 1.0]]
    """
    X = np.asarray(X, dtype=np.float64)
    x0 = np.asarray(x0, dtype=np.float64)
    if X.ndim != 2:
        raise InputError(f"X must be a 2-D array of shape (n_candidates, n_features). Got {X.ndim} dimension(s) instead.")
    if x0.ndim != 1 or x0.shape[0] != X.shape[1]:
        raise InputError(
            f"x0 must be a 1-D array with one value per column of X ({X.shape[1]}). Got shape {x0.shape} instead."
        )
    if X.shape[1] == 0:
        raise InputError("X must have at least one feature column. Got 0 columns instead.")
    if not np.all(np.isfinite(x0)):
        raise InputError("x0 contains NaN or infinite values; encode the applicant with finite values.")
    in_place = overwrite_X and X.flags.writeable and X.flags.c_contiguous
    # Overwriting X loses the values to check. Unless x0 is below _NO_OVERFLOW, where a finite value of X less
    # x0 cannot overflow: then an entry of X - x0 is NaN or infinite exactly where X's is, and X - x0 is checked
    # in X's stead (the same rows, the same first one named).
    checks_diff = in_place and float(np.max(np.abs(x0), initial=0.0)) < _NO_OVERFLOW
    if in_place and not checks_diff and not np.all(np.isfinite(X)):  # X is about to be overwritten: check it first
        _raise_not_finite(X)
    if in_place:
        diff = X
        diff -= x0
    else:
        diff = X - x0
    distances = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    # x0 is finite, so a NaN or infinite value of X makes its row's distance NaN or infinite: one pass over the
    # distances instead of one over X (the exact check only then, to name the row; a finite overflow passes it).
    checked = diff if in_place else X
    if (not in_place or checks_diff) and not np.all(np.isfinite(distances)) and not np.all(np.isfinite(checked)):
        _raise_not_finite(checked)
    zero = np.flatnonzero(distances == 0.0)
    if zero.size:
        raise InputError(
            f"{zero.size} candidate row(s) equal x0 (first: row {int(zero[0])}); their direction is undefined. "
            "Exclude rows identical to the applicant before selecting prototypes."
        )
    diff /= distances[:, None]
    return Geometry(directions=_readonly(diff), distances=_readonly(distances))


def _raise_not_finite(X: np.ndarray) -> None:
    row = int(np.flatnonzero(~np.all(np.isfinite(X), axis=1))[0])
    raise InputError(f"Row {row} of X contains NaN or infinite values; encode the candidates with finite values.")


def _keep_count(values: np.ndarray, rtol: float) -> int:
    """Number of leading (descending) eigenvalues kept by the squared-mass rule."""
    if values.size == 0 or values[0] <= 0.0:
        return 0
    # Values at the level of rounding noise are zero, whatever rtol says.
    positive = int(np.count_nonzero(values > values[0] * values.size * np.finfo(np.float64).eps))
    squares = values[:positive] ** 2
    # tail[m] = squared mass of values[m:], the mass discarded when keeping the first m values.
    tail = np.concatenate([np.cumsum(squares[::-1])[::-1], [0.0]])
    admissible = np.flatnonzero(tail < rtol * tail[0])
    keep = int(admissible[0]) if admissible.size else positive
    return max(keep, 1)


def eigen_decompose(geometry: Geometry, *, rtol: float = 1e-9, solver: str = "gram") -> Eigen:
    """Top eigenpairs of ``S = A^T A`` without forming the ``N x N`` matrix.

    With ``B`` the ``N x p`` directions matrix (``B = A^T`` in the paper's notation), the non-zero
    eigenvalues of ``S = B B^T`` are the squared singular values ``s_m^2`` of ``B`` and the eigenvectors
    are its left singular vectors. The smallest eigenvalues are discarded while their squared mass
    ``sum sigma_m^2`` stays below ``rtol`` times the total.

    Parameters
    ----------
    geometry : Geometry
        Output of :func:`compute_geometry`.
    rtol : float, default=1e-9
        Relative squared-eigenvalue mass that may be discarded, ``0 <= rtol < 1``.
    solver : {"gram", "svd"}, default="gram"
        ``"gram"``: thin SVD through the ``p x p`` cross-product ``B^T B = W diag(s^2) W^T`` and
        ``v_m = B w_m / s_m`` (one BLAS-3 product, about 10x faster than LAPACK for tall ``B``; the
        eigenvectors of discarded tiny eigenvalues would be the inaccurate ones). ``"svd"``: LAPACK
        thin SVD of ``B``.

    Returns
    -------
    Eigen
        ``values`` of shape (n_components,), descending and positive; ``vectors`` of shape
        (n_candidates, n_components), orthonormal columns.

    Raises
    ------
    InputError
        If ``rtol`` or ``solver`` is invalid.

    Notes
    -----
    Cost ``O(N p^2)`` time and ``O(N p)`` memory; ``M <= min(N, p)``.

    References
    ----------
    Paper Section 3, "Eigen-approximate hierarchy": ``S ~ S_M = sum_{m<=M} sigma_m v_m v_m^T``.

    Examples
    --------
    >>> g = compute_geometry([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]], [0.0, 0.0])
    >>> e = eigen_decompose(g)
    >>> e.values.round(12).tolist()
    [2.0, 1.0]
    """
    if not isinstance(geometry, Geometry):
        raise InputError(f"geometry must be a Geometry from compute_geometry(). Got {type(geometry).__name__} instead.")
    if isinstance(rtol, bool) or not isinstance(rtol, (int, float)) or not 0.0 <= float(rtol) < 1.0:
        raise InputError(f"The 'rtol' option must be a float in [0, 1). Got {rtol!r} instead.")
    if solver not in _EIGEN_SOLVERS:
        raise InputError(f"The 'solver' option must be one of {', '.join(_EIGEN_SOLVERS)}. Got {solver!r} instead.")
    B = geometry.directions
    n_candidates = B.shape[0]
    if n_candidates == 0:
        return Eigen(values=_readonly(np.zeros(0)), vectors=_readonly(np.zeros((0, 0))))
    if solver == "svd":
        U, s, _ = np.linalg.svd(B, full_matrices=False)
        values = s**2
        keep = _keep_count(values, float(rtol))
        vectors = np.ascontiguousarray(U[:, :keep])
        values = values[:keep].copy()
    else:
        w, W = np.linalg.eigh(B.T @ B)
        w, W = w[::-1], W[:, ::-1]
        keep = _keep_count(w, float(rtol))
        values = w[:keep].copy()
        # The N x M vectors B C are formed only if asked for (Eigen.vectors): screening needs products only.
        coefficients = W[:, :keep] / np.sqrt(values)
        return Eigen(values=_readonly(values), directions=B, coefficients=_readonly(coefficients))
    return Eigen(values=_readonly(values), vectors=_readonly(vectors))
