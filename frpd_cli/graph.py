"""The actionability graph: build it, attach an applicant, find shortest paths.

Nodes are the training rows in the encoded space. A directed edge ``u -> v``
exists when the move from row ``u`` to row ``v`` is actionable (the rule of
:func:`frpd_cli.constraints.actionable_mask`) and short (``v`` is among the
nearest actionable targets of ``u``, or within a radius). Sequential recourses
are shortest paths on this graph from the applicant to the prototypes
(Section 4 and the appendix "Sequential Recourse" of the paper; the graph
follows FACE, Poyiadzi et al. 2020).

The graph is built once per training set and never modified: an applicant
``x0`` is attached on the fly (:func:`attach_source`) and
:func:`shortest_paths` runs Dijkstra on an ``(N + 1)``-node view.
"""

from __future__ import annotations

import math
import numbers
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp

# scipy.spatial and scipy.sparse.csgraph are imported where they are used (start-up time of the CLI).
from frpd_cli.constraints import ConstraintCodes, actionable_mask, actionable_pairs
from frpd_cli.exceptions import ArtifactError, InputError

__all__ = [
    "Graph",
    "ZERO_LENGTH_WEIGHT",
    "build_graph",
    "default_neighbors",
    "APPROXIMATE_MIN_ROWS",
    "approximate_search_available",
    "default_candidates",
    "resolve_search",
    "graph_statistics",
    "graph_to_arrays",
    "graph_from_arrays",
    "attach_source",
    "shortest_paths",
    "extract_path",
    "path_cost",
    "to_networkx",
]

#: Weight stored for an edge of Euclidean length zero (duplicate rows).
#: scipy.sparse drops explicit zeros and csgraph reads a zero entry as "no
#: edge", so such edges carry this tiny positive weight instead. It is far below
#: the rounding error of any real length (``0.1 + 1e-300 == 0.1``), so path
#: costs are unchanged whenever a path has one positive-length edge.
ZERO_LENGTH_WEIGHT = 1e-300

_WEIGHTS = ("euclidean", "density")
_ALGORITHMS = ("auto", "kd_tree", "brute")
_DEFAULT_CHUNK_SIZE = 1 << 22  # distance entries held at once (32 MiB of float64)
_TREE_MAX_WIDTH = 16  # kd-trees degrade above ~10 intrinsic dimensions
_TREE_MIN_GROUP = 2048  # below this group size brute force is as fast
_KDE_CUTOFF = 4.0  # kernel truncated at 4 bandwidths (dropped terms < e^-8 each)
_REL_MARGIN = 1e-9  # relative safety margin when comparing kd-tree and exact lengths
_FORMAT_VERSION = 1
_SEARCHES = ("auto", "exact", "approximate")
#: ``search="auto"`` is approximate from this many rows on (docs/scale.md, "Graphs of a million rows").
APPROXIMATE_MIN_ROWS = 50_000
_ANN_LINKS = 32  # HNSW links per node (faiss's M)
_ANN_EF_CONSTRUCTION = 80
_ANN_EF_SEARCH = 64  # at least; raised to the number of candidates asked
#: Scales of the one-hot columns in the spaces the approximate search indexes (per number of changed categories):
#: at full scale the nearest points change few categories, scaled down the ones that change more come forward.
_ANN_CATEGORY_SCALES = (1.0, 0.1, 0.001)


@dataclass(frozen=True, eq=False)
class Graph:
    """An actionability graph over the training rows.

    Parameters
    ----------
    adjacency : scipy.sparse.csr_matrix of shape (n_nodes, n_nodes), float64
        ``adjacency[u, v] > 0`` is the weight of the directed edge ``u -> v``;
        a structural zero means "no edge". Indices are sorted within each row
        and there are no duplicate entries. Edges of length zero carry
        :data:`ZERO_LENGTH_WEIGHT`.
    n_neighbors : int or None
        Number of nearest positive-length actionable targets per node, or
        ``None`` for a radius graph.
    radius : float or None
        Radius of a radius graph, or ``None`` for a nearest-neighbour graph.
    max_step : float or None
        Longest Euclidean edge kept, or ``None`` for no cap.
    weight : {"euclidean", "density"}
        How edge weights were computed (see :func:`build_graph`).
    directed : bool
        ``True`` when the rows have monotone features, so that actionability is
        not symmetric. When ``False`` the adjacency is symmetric.
    bandwidth : float or None
        Kernel bandwidth of the density weights, ``None`` for Euclidean weights.
    category_blocks : ndarray of int64, shape (n_blocks, 2), or None
        ``[start, stop)`` encoded columns of each one-hot (categorical) feature
        when the neighbour count applies per number of changed categories (see
        :func:`build_graph`), ``None`` for plain nearest neighbours.
    hubs : ndarray of bool, shape (n_nodes,), or None
        Rows every node (and every attached applicant) also links to: its
        ``hub_neighbors`` nearest actionable hubs (see :func:`build_graph`);
        ``None`` without hub edges.
    hub_neighbors : int or None
        Number of nearest hubs per node, ``None`` without hub edges.
    """

    adjacency: sp.csr_matrix
    n_neighbors: int | None
    radius: float | None
    max_step: float | None
    weight: str
    directed: bool
    bandwidth: float | None = None
    category_blocks: np.ndarray | None = None
    hubs: np.ndarray | None = None
    hub_neighbors: int | None = None

    @property
    def n_nodes(self) -> int:
        """Number of nodes (training rows)."""
        return int(self.adjacency.shape[0])

    @property
    def n_edges(self) -> int:
        """Number of directed edges (an undirected edge counts twice)."""
        return int(self.adjacency.nnz)


# --------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------


def _type_name(value) -> str:
    return type(value).__name__


def _check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InputError(f"The '{name}' option must be an int >= {minimum}. Got {value!r} instead.")
    return int(value)


def _check_positive(name: str, value, *, allow_none: bool = True) -> float | None:
    if value is None and allow_none:
        return None
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, numbers.Real)
        or not math.isfinite(float(value))
        or float(value) <= 0
    ):
        raise InputError(
            f"The '{name}' option must be a finite number > 0{' or None' if allow_none else ''}. "
            f"Got {value!r} instead."
        )
    return float(value)


def _check_matrix(X, name: str = "X") -> np.ndarray:
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"'{name}' must be a numeric array of shape (n_rows, n_features). {exc}") from None
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise InputError(
            f"'{name}' must be a 2-D array with at least one row and one column. Got shape {X.shape} instead."
        )
    if not np.all(np.isfinite(X)):
        raise InputError(f"'{name}' contains NaN or infinite values; encode and impute the data first.")
    return np.ascontiguousarray(X)


def _check_blocks(blocks, X: np.ndarray, name: str = "X") -> np.ndarray | None:
    """``category_blocks`` as an int64 (n_blocks, 2) array of disjoint ``[start, stop)`` ranges of one-hot columns."""
    if blocks is None:
        return None
    try:
        arr = np.asarray(blocks, dtype=np.int64).reshape(-1, 2) if len(blocks) else np.zeros((0, 2), np.int64)
    except (TypeError, ValueError):
        raise InputError("The 'category_blocks' option must be a sequence of (start, stop) column ranges, one per "
                         f"categorical feature. Got {blocks!r} instead.") from None
    p = X.shape[1]
    if np.any(arr[:, 0] < 0) or np.any(arr[:, 1] > p) or np.any(arr[:, 1] <= arr[:, 0]):
        raise InputError(f"The 'category_blocks' ranges must lie in [0, {p}] with start < stop. Got "
                         f"{arr.tolist()!r} instead.")
    order = np.argsort(arr[:, 0], kind="stable")
    if np.any(arr[order][1:, 0] < arr[order][:-1, 1]):
        raise InputError(f"The 'category_blocks' ranges must not overlap. Got {arr.tolist()!r} instead.")
    for a, b in arr:
        part = X[:, a:b]
        bad = np.flatnonzero(~(np.all((part == 0) | (part == 1), axis=1) & (part.sum(axis=1) == 1)))
        if bad.size:
            raise InputError(f"Columns {a}:{b} of '{name}' are declared a one-hot block, but row {int(bad[0])} "
                             f"holds {part[bad[0]].tolist()!r}; each row needs exactly one 1 and otherwise 0 there.")
    return arr


def _check_codes(codes, n_rows: int, name: str = "codes") -> ConstraintCodes:
    if not isinstance(codes, ConstraintCodes):
        raise InputError(f"'{name}' must be a ConstraintCodes. Got {_type_name(codes)} instead.")
    imm = np.asarray(codes.immutable, dtype=np.float64)
    mono = np.asarray(codes.monotone, dtype=np.float64)
    direction = np.asarray(codes.direction)
    if imm.ndim != 2 or imm.shape[0] != n_rows:
        raise InputError(
            f"'{name}.immutable' must have shape ({n_rows}, n_immutable), one row per data row. "
            f"Got shape {imm.shape} instead."
        )
    if mono.ndim != 2 or mono.shape[0] != n_rows:
        raise InputError(
            f"'{name}.monotone' must have shape ({n_rows}, n_monotone), one row per data row. "
            f"Got shape {mono.shape} instead."
        )
    if direction.shape != (mono.shape[1],) or not np.all(np.isin(direction, (-1, 1))):
        raise InputError(
            f"'{name}.direction' must hold one +1 or -1 per monotone column ({mono.shape[1]}). "
            f"Got {direction.tolist()!r} instead."
        )
    if not (np.all(np.isfinite(imm)) and np.all(np.isfinite(mono))):
        raise InputError(f"'{name}' contains NaN or infinite codes; every constrained value must be known.")
    return ConstraintCodes(
        immutable=imm + 0.0,  # turns -0.0 into 0.0 so that grouping by bytes agrees with ==
        monotone=mono,
        direction=direction.astype(np.int8),
        immutable_names=codes.immutable_names,
        monotone_names=codes.monotone_names,
    )


# --------------------------------------------------------------------------
# neighbour search
# --------------------------------------------------------------------------


def _lengths(XT: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Euclidean lengths of the moves ``src -> dst``; ``XT`` is ``X.T`` (contiguous).

    Summed column by column so that a pair gets bit-identical lengths whatever
    the batch it is computed in (reductions may round differently by alignment).
    """
    out = np.zeros(src.shape[0])
    for col in XT:
        diff = col[dst] - col[src]
        out += diff * diff
    return np.sqrt(out, out=out)


def _monotone_ok(mono: np.ndarray, direction: np.ndarray, src, dst) -> np.ndarray:
    """Monotone part of the actionability rule for pairs ``src -> dst`` of one immutable group.

    ``src`` and ``dst`` broadcast against each other. Rows of a group share
    their immutable codes, so :func:`~frpd_cli.constraints.actionable_pairs` on
    the monotone codes alone is the whole rule.
    """
    local = ConstraintCodes(immutable=np.zeros((mono.shape[0], 0)), monotone=mono, direction=direction)
    return actionable_pairs(local, src, dst)


def _groups(immutable: np.ndarray) -> list[np.ndarray]:
    """Row indices of each immutable group, ascending within a group."""
    n = immutable.shape[0]
    if immutable.shape[1] == 0:
        return [np.arange(n)]
    _, inverse = np.unique(immutable, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).ravel()
    order = np.argsort(inverse, kind="stable")
    return np.split(order, np.cumsum(np.bincount(inverse))[:-1])


def _bridges(X, codes, src, dst, chunk_size):
    """Edges ``(src, dst, length)`` that join the connected components of each immutable group.

    Only for graphs without monotone columns (actionability is symmetric there). Borůvka rounds: every component but
    the largest of its group gets an edge to its nearest row (Euclidean, ties by index) in another component of the
    group, the components are recomputed, and so on until the group is one component. Each added edge is an edge of
    the group's Euclidean minimum spanning forest over the components, so the bridges are as short as joining the
    components can be. Cost per round ``O(n_small * n_group * p)`` where ``n_small`` counts the rows outside the
    largest component (nothing when the group is already connected), in chunks of ``chunk_size`` distances.
    """
    from scipy.sparse.csgraph import connected_components

    N = X.shape[0]
    out_src, out_dst = [], []
    adjacency = sp.csr_matrix((np.ones(src.size, dtype=np.int8), (src, dst)), shape=(N, N))
    for rows in _groups(codes.immutable):
        if rows.size < 2:
            continue
        sub = adjacency[rows][:, rows]
        Xg = X[rows]
        sq = np.einsum("ij,ij->i", Xg, Xg)
        extra = []
        while True:
            if extra:
                a, b = np.array(extra).T
                sub = sub + sp.csr_matrix((np.ones(a.size, dtype=np.int8), (a, b)), shape=sub.shape)
            n_comp, label = connected_components(sub, directed=False)
            if n_comp <= 1:
                break
            largest = int(np.argmax(np.bincount(label)))
            new = []
            for c in range(n_comp):
                if c == largest:
                    continue
                inside = np.flatnonzero(label == c)
                outside = np.flatnonzero(label != c)
                best = (np.inf, -1, -1)
                step = max(1, chunk_size // max(1, outside.size))
                for start in range(0, inside.size, step):
                    part = inside[start:start + step]
                    D = sq[part][:, None] + sq[outside][None, :] - 2.0 * (Xg[part] @ Xg[outside].T)
                    flat = int(np.argmin(D))
                    i, j = divmod(flat, outside.size)
                    if D[i, j] < best[0]:
                        best = (float(D[i, j]), int(part[i]), int(outside[j]))
                new.append((best[1], best[2]))
            extra = new
            for a, b in new:
                out_src.append(rows[a])
                out_dst.append(rows[b])
    if not out_src:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    s_, d_ = np.asarray(out_src, dtype=np.int64), np.asarray(out_dst, dtype=np.int64)
    return s_, d_, np.sqrt(np.sum((X[s_] - X[d_]) ** 2, axis=1))


def _select_nearest(src, dst, length, n_neighbors):
    """Keep every zero-length pair and the ``n_neighbors`` nearest positive ones per source.

    Returns the kept ``(src, dst, length)`` sorted by ``(src, length, dst)``,
    and for each kept pair its rank among the positive lengths of its source
    (``-1`` for zero-length pairs).
    """
    order = np.lexsort((dst, length, src))
    src, dst, length = src[order], dst[order], length[order]
    positive = length > 0
    idx = np.flatnonzero(positive)
    ps = src[idx]
    rank = np.full(src.shape[0], -1, dtype=np.int64)
    if ps.size:
        pos = np.arange(ps.size)
        start = np.r_[True, ps[1:] != ps[:-1]]
        rank[idx] = pos - np.maximum.accumulate(np.where(start, pos, 0))
    keep = rank < n_neighbors
    return src[keep], dst[keep], length[keep], rank[keep]


def _change_counts(Cs: np.ndarray, Ct: np.ndarray, n_blocks: int) -> np.ndarray:
    """Categorical features changed between one-hot rows ``Cs`` (sources) and ``Ct`` (targets), int64 (S x T).

    One-hot rows agree on a feature exactly when their blocks share their one 1,
    so the count is ``n_blocks - Cs @ Ct.T`` (exact: sums of 0/1 products).
    """
    agree = Cs @ Ct.T
    agree -= n_blocks + 0.5  # -(changes + 0.5): truncation below rounds exactly
    np.negative(agree, out=agree)
    return agree.astype(np.int16 if n_blocks < 2**15 else np.int64)


def _shell_keys(src: np.ndarray, changes: np.ndarray, n_shells: int) -> np.ndarray:
    """One key per (source, number of changed categories): neighbours are counted per key."""
    return src * n_shells + changes


def _search_brute(Xg, XTg, mono, direction, n_neighbors, radius, chunk_size, report, sources=None, Cg=None,
                  n_blocks=0, targets=None):
    """Exact search in one group by chunked brute force (local indices).

    ``sources`` (ascending local indices) restricts the rows searched from;
    default all rows of the group. ``targets`` (ascending local indices)
    restricts the rows searched for (the hub edges: the group's favourable
    rows); default all rows of the group. ``Cg`` (the group's one-hot columns,
    with ``n_blocks`` categorical features) makes the nearest-neighbour count
    apply per number of changed categorical features.
    """
    if Cg is not None and radius is None:
        return _search_brute_shells(Xg, XTg, mono, direction, n_neighbors, chunk_size, report, Cg, n_blocks)
    G, p = Xg.shape
    sources = np.arange(G) if sources is None else sources
    sq = np.einsum("ij,ij->i", Xg, Xg)
    sq_max = sq.max()
    eps = np.finfo(np.float64).eps
    every = targets is None
    targets, Xt, sq_t = (np.arange(G), Xg, sq) if every else (targets, Xg[targets], sq[targets])
    T = targets.size
    block = max(1, chunk_size // T)
    out = []
    for start in range(0, sources.size, block):
        rows = sources[start : start + block]
        B = rows.size
        D = sq[rows, None] + sq_t[None, :] - 2.0 * (Xg[rows] @ Xt.T)  # approximate squared lengths
        ok = _monotone_ok(mono, direction, rows[:, None], targets[None, :])
        if every:
            ok[np.arange(B), rows] = False
        else:
            ok &= rows[:, None] != targets[None, :]
        # |approx - exact| <= tol: a generous bound on the rounding of the expansion
        tol = (8.0 * (p + 2) * eps) * (sq[rows] + sq_max)
        if radius is not None:
            cand = ok & (D <= radius * radius + 2.0 * tol[:, None])
        else:
            # possible duplicates do not count towards n_neighbors; take the
            # (n + c_max)-th smallest approximate value as a safe threshold
            c_max = int((ok & (D <= tol[:, None])).sum(axis=1).max())
            kth = min(T - 1, n_neighbors + c_max - 1)
            D[~ok] = np.inf
            thr = np.partition(D, kth, axis=1)[:, kth]
            cand = ok & (D <= thr[:, None] + 2.0 * tol[:, None])
        bi, tj = np.nonzero(cand)
        src, dst = rows[bi], targets[tj]
        length = _lengths(XTg, src, dst)
        if radius is not None:
            keep = length <= radius
            out.append((src[keep], dst[keep], length[keep]))
        else:
            s, d, l, _ = _select_nearest(src, dst, length, n_neighbors)
            out.append((s, d, l))
        report(B)
    return out


def _search_brute_shells(Xg, XTg, mono, direction, n_neighbors, chunk_size, report, Cg, n_blocks):
    """Brute-force search keeping the ``n_neighbors`` nearest targets per number of changed categories."""
    G, p = Xg.shape
    n_shells = n_blocks + 1
    sq = np.einsum("ij,ij->i", Xg, Xg)
    sq_max = sq.max()
    eps = np.finfo(np.float64).eps
    block = max(1, chunk_size // G)
    out = []
    for start in range(0, G, block):
        rows = np.arange(start, min(G, start + block))
        B = rows.size
        D = sq[rows, None] + sq[None, :] - 2.0 * (Xg[rows] @ Xg.T)
        ok = _monotone_ok(mono, direction, rows[:, None], np.arange(G)[None, :])
        ok[np.arange(B), rows] = False
        tol = (8.0 * (p + 2) * eps) * (sq[rows] + sq_max)
        changes = _change_counts(Cg[rows], Cg, n_blocks)
        D[~ok] = np.inf
        cand = np.zeros((B, G), dtype=bool)
        Dc = np.empty_like(D)
        present = np.flatnonzero(np.bincount(changes.ravel(), minlength=n_shells))
        for c in present:
            in_c = changes == c
            Dc.fill(np.inf)
            np.copyto(Dc, D, where=in_c)
            # duplicates (length 0) only occur without changes; they do not count
            c_max = int((Dc <= tol[:, None]).sum(axis=1).max()) if c == 0 else 0
            kth = min(G - 1, n_neighbors + c_max - 1)
            Dc.partition(kth, axis=1)  # in place: D itself still holds the values
            # a shell with fewer than kth + 1 targets gives thr = inf: keep its finite entries only
            thr = np.minimum(Dc[:, kth] + 2.0 * tol, np.finfo(np.float64).max)
            cand |= in_c & (D <= thr[:, None])
        bi, gj = np.nonzero(cand)
        src, dst = rows[bi], gj
        length = _lengths(XTg, src, dst)
        keys = _shell_keys(src, changes[bi, gj], n_shells)
        k, d, l, _ = _select_nearest(keys, dst, length, n_neighbors)
        out.append((k // n_shells, d, l))
        report(B)
    return out


def _search_tree(Xg, XTg, mono, direction, n_neighbors, radius, chunk_size, report):
    """Exact search in one group with a kd-tree, growing k until complete (local indices)."""
    G = Xg.shape[0]
    from scipy.spatial import cKDTree

    tree = cKDTree(Xg)
    out = []
    if radius is not None:
        block = max(1, chunk_size // 64)
        r_query = radius * (1.0 + _REL_MARGIN)
        for start in range(0, G, block):
            rows = np.arange(start, min(G, start + block))
            hits = tree.query_ball_point(Xg[rows], r_query)
            counts = np.fromiter((len(h) for h in hits), dtype=np.int64, count=rows.size)
            dst = np.concatenate([np.asarray(h, dtype=np.int64) for h in hits]) if counts.sum() else np.empty(0, np.int64)
            src = np.repeat(rows, counts)
            ok = (dst != src) & _monotone_ok(mono, direction, src, dst)
            src, dst = src[ok], dst[ok]
            length = _lengths(XTg, src, dst)
            keep = length <= radius
            out.append((src[keep], dst[keep], length[keep]))
            report(rows.size)
        return out

    k = min(G, (n_neighbors + 1) * (2 if mono.shape[1] else 1))
    pending = np.arange(G)
    while pending.size:
        if k > G // 4:
            # few targets left to find among many rows (e.g. rows at the top of
            # an increasing-only code): a blocked scan beats a k ~ G tree query
            out += _search_brute(Xg, XTg, mono, direction, n_neighbors, None, chunk_size, report, pending)
            break
        block = max(1, chunk_size // k)
        unfinished = []
        for start in range(0, pending.size, block):
            rows = pending[start : start + block]
            dist, nbr = tree.query(Xg[rows], k=k)
            dist, nbr = dist.reshape(rows.size, k), nbr.reshape(rows.size, k)
            src = np.repeat(rows, k)
            dst = nbr.ravel()
            ok = (dst != src) & _monotone_ok(mono, direction, src, dst)
            src, dst = src[ok], dst[ok]
            length = _lengths(XTg, src, dst)
            s, d, l, rank = _select_nearest(src, dst, length, n_neighbors)
            # complete when the n-th positive length is strictly below the
            # farthest returned distance: every closer row was returned
            local = np.searchsorted(rows, s)  # rows ascend: pending keeps its order
            nth = np.full(rows.size, np.inf)
            at_n = rank == n_neighbors - 1
            nth[local[at_n]] = l[at_n]
            done = nth < dist[:, -1] * (1.0 - _REL_MARGIN)
            finished = done[local]
            s, d, l = s[finished], d[finished], l[finished]
            out.append((s, d, l))
            unfinished.append(rows[~done])
            report(int(done.sum()))
        pending = np.concatenate(unfinished) if unfinished else np.empty(0, np.int64)
        k *= 2
    return out


def _segments(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(item, position)`` of every entry of the segments ``[starts[i], starts[i] + counts[i])``, in order."""
    item = np.repeat(np.arange(counts.size), counts)
    offset = np.arange(item.size) - np.repeat(np.cumsum(counts) - counts, counts)
    return item, np.repeat(starts, counts) + offset


def _duplicates(Xg, mono, direction, is_target):
    """Edges ``(src, dst, 0.0)`` from every row to every other actionable target row with the same encoded values."""
    _, cls = np.unique(Xg, axis=0, return_inverse=True)
    cls = np.asarray(cls).ravel()
    t_rows = np.flatnonzero(is_target)
    t_rows = t_rows[np.argsort(cls[t_rows], kind="stable")]
    t_size = np.bincount(cls[t_rows], minlength=int(cls.max()) + 1)
    src, pos = _segments((np.cumsum(t_size) - t_size)[cls], t_size[cls])
    dst = t_rows[pos]
    ok = dst != src
    src, dst = src[ok], dst[ok]
    ok = _monotone_ok(mono, direction, src, dst)
    return src[ok], dst[ok], np.zeros(int(ok.sum()))


@contextmanager
def _one_thread():
    """faiss's OpenMP threads set to one for the duration, restored afterwards."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def _ann_index(points: np.ndarray, seed: int):
    """A faiss HNSW index over ``points`` (float32), with levels drawn from ``seed``.

    Build it single-threaded (:func:`_one_thread`): faiss inserts in parallel otherwise, in an order that varies
    from run to run.
    """
    import faiss

    index = faiss.IndexHNSWFlat(points.shape[1], _ANN_LINKS)
    index.hnsw.efConstruction = _ANN_EF_CONSTRUCTION
    index.hnsw.rng = faiss.RandomGenerator(int(seed) % (1 << 31))
    index.add(np.ascontiguousarray(points, dtype=np.float32))
    return index


def _search_approximate(Xg, mono, direction, n_neighbors, n_candidates, seed, chunk_size, report, onehot=None,
                        n_blocks=0, targets=None):
    """Approximate search in one group (local indices): the rule of :func:`_search_brute` on ANN candidates.

    Identical rows (same encoded values and monotone codes) form one class: the duplicate edges (every pair of
    rows of a class) are exact, and a faiss HNSW index over the distinct target points proposes each class its
    ``n_candidates`` nearest distinct targets. Among the actionable candidates the selection is exact: lengths
    summed column by column as everywhere in the graph, the ``n_neighbors`` nearest target rows per source (per
    number of changed categories with ``Cg``), ties by the lower row index; a class of ``m`` identical target
    rows counts ``m`` times. Only a true neighbour the index did not propose can be missed. ``targets``
    (ascending local indices): the rows searched for (hub edges); default every row.
    """
    G = Xg.shape[0]
    _, first, cls = np.unique(np.hstack([Xg, mono]), axis=0, return_index=True, return_inverse=True)
    cls = np.asarray(cls).ravel()
    U = first.size
    is_target = np.ones(G, dtype=bool)
    if targets is not None:
        is_target[:] = False
        is_target[targets] = True
    order = np.argsort(cls, kind="stable")  # rows by class, ascending within a class
    size = np.bincount(cls, minlength=U)
    start = np.cumsum(size) - size
    t_rows = order[is_target[order]]  # target rows by class, ascending within a class
    t_size = np.bincount(cls[t_rows], minlength=U)
    t_start = np.cumsum(t_size) - t_size
    out = [_duplicates(Xg, mono, direction, is_target)]
    t_classes = np.flatnonzero(t_size)
    if t_classes.size == 0:
        report(G)
        return out
    Xu = Xg[first]
    XTu = np.ascontiguousarray(Xu.T)
    mono_u = mono[first]
    Cu = None if onehot is None else np.ascontiguousarray(Xu[:, onehot])
    n_shells = n_blocks + 1 if onehot is not None else 1
    k = min(t_classes.size, n_candidates + 1)  # + 1: a class finds itself
    spaces = []  # (points of the space, its index), one per scale of the one-hot columns
    if k < t_classes.size:
        for scale in (_ANN_CATEGORY_SCALES if onehot is not None else (1.0,)):
            Xs = Xu.astype(np.float32)
            if scale != 1.0:
                Xs[:, onehot] *= np.float32(scale)
            with _one_thread():
                index = _ann_index(Xs[t_classes], seed)
            index.hnsw.efSearch = max(k, _ANN_EF_SEARCH)
            spaces.append((Xs, index))
    block = max(1, chunk_size // (k * max(1, len(spaces))))
    for lo in range(0, U, block):
        rows = np.arange(lo, min(U, lo + block))
        if not spaces:
            found = np.broadcast_to(np.arange(k), (rows.size, k)).ravel()
            s = np.repeat(rows, k)
        else:
            found = []
            for Xs, index in spaces:
                with _one_thread():
                    found.append(index.search(np.ascontiguousarray(Xs[rows]), k)[1])
            found = np.hstack(found)
            pair = np.unique(np.repeat(rows, found.shape[1]) * (t_classes.size + 1) + (found.ravel() + 1))
            s, found = pair // (t_classes.size + 1), pair % (t_classes.size + 1) - 1
        t = t_classes[np.maximum(found, 0)]
        ok = (found >= 0) & (t != s)
        s, t = s[ok], t[ok]
        ok = _monotone_ok(mono_u, direction, s, t)
        s, t = s[ok], t[ok]
        length = _lengths(XTu, s, t)
        ok = length > 0  # zero lengths are the duplicates' edges
        s, t, length = s[ok], t[ok], length[ok]
        if Cu is not None:
            changes = n_blocks - np.einsum("ij,ij->i", Cu[s], Cu[t]).round().astype(np.int64)
            key = _shell_keys(s, changes, n_shells)
        else:
            key = s
        # the fewest candidates that hold n_neighbors target rows per key (all of those at the boundary length)
        first_row = t_rows[t_start[t]]
        o = np.lexsort((first_row, length, key))
        key, t, length = key[o], t[o], length[o]
        weight = np.minimum(t_size[t], n_neighbors)
        new = np.r_[True, key[1:] != key[:-1]]
        total = np.cumsum(weight)
        before = total - weight - np.repeat(total[new] - weight[new], np.diff(np.r_[np.flatnonzero(new), key.size]))
        needed = before < n_neighbors
        seg = np.cumsum(new) - 1
        boundary = np.full(int(new.sum()), -np.inf)
        np.maximum.at(boundary, seg[needed], length[needed])
        needed |= length == boundary[seg]
        key, t, length = key[needed], t[needed], length[needed]
        item, pos = _segments(t_start[t], np.minimum(t_size[t], n_neighbors))
        k_, d_, l_, _ = _select_nearest(key[item], t_rows[pos], length[item], n_neighbors)
        src_class = k_ // n_shells
        item, pos = _segments(start[src_class], size[src_class])
        out.append((order[pos], d_[item], l_[item]))
        report(int(size[rows].sum()))
    return out


def _hub_edges(X, codes, hubs, n_neighbors, chunk_size, approximate=None):
    """Edges ``(src, dst, length)`` from every row to its ``n_neighbors`` nearest actionable hub rows.

    Within each immutable group, by the chunked brute force of :func:`_search_brute` with the group's hubs as
    the only targets: every actionable hub at distance 0 (a duplicate) and the ``n_neighbors`` nearest at
    positive distance, ties by row index (the rule of :func:`_select_nearest`, lengths summed column by column
    as everywhere in the graph). ``O(N * n_hubs * p)``. ``approximate`` (``(n_candidates, seed)``): the
    candidates come from :func:`_search_approximate` instead.
    """
    parts = []
    for rows in _groups(codes.immutable):
        targets = np.flatnonzero(hubs[rows])
        if targets.size == 0:
            continue
        Xg = X[rows]
        if approximate is not None:
            found = _search_approximate(Xg, codes.monotone[rows], codes.direction, n_neighbors, *approximate,
                                        chunk_size, lambda n_rows: None, targets=targets)
        else:
            found = _search_brute(Xg, np.ascontiguousarray(Xg.T), codes.monotone[rows], codes.direction,
                                  n_neighbors, None, chunk_size, lambda n_rows: None, targets=targets)
        parts.extend((rows[s], rows[d], l) for s, d, l in found)
    if not parts:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)
    return (np.concatenate([q[0] for q in parts]).astype(np.int64),
            np.concatenate([q[1] for q in parts]).astype(np.int64), np.concatenate([q[2] for q in parts]))


def _neighbours(X, codes, n_neighbors, radius, algorithm, chunk_size, progress, blocks=None, approximate=None):
    """Edges ``(src, dst, length)`` (global indices) of the nearest/radius rule.

    ``blocks`` (``[start, stop)`` column ranges of the one-hot features): the
    nearest-neighbour count applies per number of changed categories.
    ``approximate`` (``(n_candidates, seed)``, nearest-neighbour graphs only):
    the candidates come from :func:`_search_approximate`.
    """
    N, p = X.shape
    shells = blocks is not None and radius is None
    onehot = np.concatenate([np.arange(a, b) for a, b in blocks]) if shells and len(blocks) else None
    done = [0]

    def report(n_rows):
        done[0] += n_rows
        if progress is not None and n_rows:
            progress(done[0], N)

    parts = []
    for rows in _groups(codes.immutable):
        G = rows.size
        if G < 2:
            report(G)
            continue
        Xg = X[rows]
        XTg = np.ascontiguousarray(Xg.T)
        mono = codes.monotone[rows]
        if approximate is not None:
            found = _search_approximate(Xg, mono, codes.direction, n_neighbors, *approximate, chunk_size, report,
                                        onehot=onehot, n_blocks=0 if onehot is None else len(blocks))
        elif onehot is not None:
            Cg = np.ascontiguousarray(Xg[:, onehot])
            found = _search_brute(Xg, XTg, mono, codes.direction, n_neighbors, None, chunk_size, report, Cg=Cg,
                                  n_blocks=len(blocks))
        else:
            use_tree = algorithm == "kd_tree" or (
                algorithm == "auto" and p <= _TREE_MAX_WIDTH and G >= _TREE_MIN_GROUP
            )
            search = _search_tree if use_tree else _search_brute
            found = search(Xg, XTg, mono, codes.direction, n_neighbors, radius, chunk_size, report)
        for s, d, l in found:
            parts.append((rows[s], rows[d], l))
    if not parts:
        empty = np.empty(0, np.int64)
        return empty, empty, np.empty(0)
    src = np.concatenate([q[0] for q in parts]).astype(np.int64)
    dst = np.concatenate([q[1] for q in parts]).astype(np.int64)
    length = np.concatenate([q[2] for q in parts])
    return src, dst, length


# --------------------------------------------------------------------------
# density weights
# --------------------------------------------------------------------------


def _kde_tree(X, midpoints, bandwidth, chunk=4096):
    """Truncated Gaussian KDE of the rows of ``X`` at ``midpoints`` (kd-tree).

    Duplicate rows and duplicate midpoints are evaluated once (tabular data
    repeats a lot: Adult's 410k edge midpoints hold 157k distinct points, its
    32.5k rows 22k distinct ones).
    """
    points, counts = np.unique(X, axis=0, return_counts=True)
    mids, inverse = np.unique(midpoints, axis=0, return_inverse=True)
    from scipy.spatial import cKDTree

    tree = cKDTree(points)
    cutoff = _KDE_CUTOFF * bandwidth
    out = np.empty(mids.shape[0])
    for start in range(0, mids.shape[0], chunk):
        M = mids[start : start + chunk]
        pairs = cKDTree(M).sparse_distance_matrix(tree, cutoff, output_type="ndarray")
        vals = counts[pairs["j"]] * np.exp(-0.5 * (pairs["v"] / bandwidth) ** 2)
        out[start : start + M.shape[0]] = np.bincount(pairs["i"], weights=vals, minlength=M.shape[0])
    return out[np.asarray(inverse).ravel()] / X.shape[0]


def _kde_brute(X, midpoints, bandwidth):
    """Same estimate as :func:`_kde_tree` by brute force (few midpoints)."""
    cutoff = _KDE_CUTOFF * bandwidth
    out = np.empty(midpoints.shape[0])
    XT = np.ascontiguousarray(X.T)
    for i, m in enumerate(midpoints):
        sq = np.zeros(X.shape[0])
        for j, col in enumerate(XT):
            diff = col - m[j]
            sq += diff * diff
        d = np.sqrt(sq)
        near = d <= cutoff
        out[i] = np.exp(-0.5 * (d[near] / bandwidth) ** 2).sum()
    return out / X.shape[0]


def _density_weights(length, density, bandwidth, n_rows):
    """``length / f`` with ``f`` floored by the two endpoints' own kernel terms."""
    floor = (2.0 / n_rows) * np.exp(-0.125 * (length / bandwidth) ** 2)
    f = np.maximum(np.maximum(density, floor), np.finfo(np.float64).tiny)
    return length / f


def _weights(X, src, dst, length, weight, bandwidth, *, brute_kde=False):
    if weight == "euclidean":
        w = length.copy()
    else:
        mid = 0.5 * (X[src] + X[dst])
        kde = _kde_brute if brute_kde else _kde_tree
        w = _density_weights(length, kde(X, mid, bandwidth), bandwidth, X.shape[0])
    return np.maximum(w, ZERO_LENGTH_WEIGHT)


# --------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------


def default_neighbors(n_rows: int) -> int:
    """The default neighbour count of a graph over ``n_rows`` rows: ``sqrt(n_rows) / 8`` within [10, 20].

    10 up to 6,400 rows, 20 from 25,600 rows. Measured on Adult (26,048 training rows, one-hot categories,
    neighbours per number of changed categories): 10 -> 20 neighbours lowers the mean FACE path cost from 1.38
    to 1.35 and QUAD's from 2.03 to 1.94, for 1.9x the edges (docs/benchmarks.md). Small data sets reach most
    rows with 10 already.
    """
    n_rows = _check_int("n_rows", n_rows, 0)
    return int(min(20, max(10, round(math.sqrt(n_rows) / 8))))


def build_graph(
    X,
    codes,
    *,
    n_neighbors=10,
    radius=None,
    max_step=None,
    weight="euclidean",
    bandwidth=None,
    algorithm="auto",
    chunk_size=_DEFAULT_CHUNK_SIZE,
    progress: Callable[[int, int], None] | None = None,
    category_blocks=None,
    connect: bool = False,
    hubs=None,
    hub_neighbors=None,
    search="auto",
    candidates=None,
    seed=0,
) -> Graph:
    """Build the actionability graph of the training rows.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_features)
        Encoded training rows (min-max scaled, one-hot), float64, finite.
    codes : ConstraintCodes
        Constraint codes of the same rows.
    n_neighbors : int, default=10
        Number of nearest actionable targets of positive length per node
        (ignored when ``radius`` is given).
    radius : float or None, default=None
        When given, a radius graph: every actionable target within Euclidean
        distance ``radius`` (inclusive).
    max_step : float or None, default=None
        Drop edges longer than ``max_step`` (applied after the selection, which
        is the same as selecting among the targets within ``max_step``).
    weight : {"euclidean", "density"}, default="euclidean"
        Edge weight; see Notes.
    bandwidth : float or None, default=None
        Kernel bandwidth of ``weight="density"``; default: the median positive
        Euclidean edge length of the graph (1.0 if there is none). Only valid
        with ``weight="density"``.
    algorithm : {"auto", "kd_tree", "brute"}, default="auto"
        Neighbour search. Both give the same graph. ``"auto"`` uses a kd-tree
        for an immutable group of at least 2048 rows when ``n_features <= 16``,
        and chunked brute force otherwise.
    chunk_size : int, default=4194304
        Most distance entries (source rows x candidate rows) held at once;
        bounds the working memory of the search to a few times
        ``8 * chunk_size`` bytes.
    progress : callable or None
        Called as ``progress(done, total)`` with the number of rows whose
        neighbours are final and ``total = n_rows``.
    category_blocks : sequence of (int, int) or None, default=None
        ``[start, stop)`` encoded columns of each categorical (one-hot)
        feature. When given (and ``radius`` is not), ``n_neighbors`` counts per
        number of changed categorical features: see Notes. Every row must be
        one-hot in each block.
    connect : bool, default=False
        Join the connected components of each immutable group by their
        shortest edges (see Notes), so that every row reaches every row of its
        group. Only without monotone columns (an ``InputError`` otherwise).
    hubs : array-like of bool, shape (n_rows,), or None, default=None
        Rows that every row also links to (typically the rows the model
        predicts favourable): see Notes. Needs ``hub_neighbors``.
    hub_neighbors : int or None, default=None
        With ``hubs``: each row's edges to its ``hub_neighbors`` nearest
        actionable hub rows are added (an applicant attached by
        :func:`attach_source` gets them too).
    search : {"auto", "exact", "approximate"}, default="auto"
        How the nearest targets are found (the edges and their lengths follow
        the same rule either way: see Notes). ``"auto"``: approximate from
        :data:`APPROXIMATE_MIN_ROWS` rows on when faiss is installed and the
        graph is a nearest-neighbour graph, exact otherwise.
    candidates : int or None, default=None
        Approximate search: distinct nearest points the index proposes per
        distinct row; default :func:`default_candidates`.
    seed : int, default=0
        Approximate search: seed of the index's random levels.

    Returns
    -------
    graph : Graph

    Raises
    ------
    InputError
        If an argument has the wrong shape, type or value.

    Notes
    -----
    **Edge rule.** Rows are partitioned by their immutable codes and edges stay
    within a part. Inside a part, ``v != u`` is an actionable target of ``u``
    when ``direction * (monotone[v] - monotone[u]) >= 0`` for every monotone
    column (the rule of :func:`~frpd_cli.constraints.actionable_mask`). With
    ``radius=None``, ``u -> v`` is an edge when ``v`` is

    * an actionable target at Euclidean distance exactly 0 (a duplicate row:
      every such target, they do not count towards ``n_neighbors``), or
    * one of the ``n_neighbors`` actionable targets nearest to ``u`` among those
      at positive distance, ties broken by the lower row index.

    Duplicates are kept apart from the count because a block of more than
    ``n_neighbors`` identical rows (common in tabular data: 30% of Adult's rows
    repeat another one) would otherwise point only at itself and become a dead
    end. With ``radius`` set, ``u -> v`` for every actionable target within
    ``radius``. ``max_step`` then drops edges longer than ``max_step``.

    **Neighbours per number of changed categories** (``category_blocks``). On
    one-hot data the nearest targets of a row almost never change a category:
    a move that changes ``c`` categories is at least ``sqrt(2c)`` long, so the
    ``n_neighbors`` nearest rows all share the row's categories (on Adult, 99.9%
    of the 10 nearest change at most one). A path then changes one category
    per move and pays ``c * sqrt(2)`` where one move pays ``sqrt(2c)``. With
    ``category_blocks``, the targets of ``u`` are split by the number
    ``c = 0, 1, ..., n_blocks`` of categorical features they change, and
    ``u -> v`` is an edge when ``v`` is among the ``n_neighbors`` nearest
    positive-length targets of its own ``c`` (ties by row index; duplicates as
    above, they change nothing). A row gets up to ``n_neighbors`` edges per
    number of changes, so a path can change several categories in one move.

    When there are no monotone columns actionability is symmetric and the graph
    is made undirected (``directed=False``): ``u -> v`` and ``v -> u`` are both
    stored when either row selected the other. With monotone columns the graph
    is directed and holds exactly the selected edges.

    **Connecting the groups** (``connect=True``). A nearest-neighbour (or
    radius) graph often falls apart into islands: on SBA's default graph, 14 of
    200 denied applicants reach fewer than 3 favourable rows although their
    immutable group holds more. With ``connect``, Borůvka rounds add, for every
    component but the largest of a group, the edge to its nearest row in another
    component of the group, until each group is connected. These are edges of
    the group's Euclidean minimum spanning forest over the components: the
    shortest possible bridges. They are added after ``max_step`` (a bridge may
    be longer). Cost: nothing beyond one component labelling when a group is
    already connected; otherwise ``O(n_small * n_group * p)`` per round, where
    ``n_small`` counts the rows outside the largest component.

    **Hub edges** (``hubs``, ``hub_neighbors``). The nearest rows of an
    applicant are mostly rows the model turns down as well, so a path to the
    favourable rows detours through them. With the favourable rows as hubs,
    every row also gets an edge to each of its ``hub_neighbors`` nearest
    actionable hubs at positive distance (and to every hub duplicate of it),
    ties by row index, under the same edge rule; ``max_step`` applies to these
    edges too. A path cost is at least the straight-line distance to its end
    row, and with hub edges an applicant's ``hub_neighbors`` nearest
    favourable rows are one straight move away: FACE's cost then equals that
    floor whenever those rows are distinct (measured on Adult:
    docs/benchmarks.md, "What any actionability graph can give"). Cost:
    ``O(N * n_hubs * p)`` over the immutable groups.

    **Search.** With ``category_blocks`` the search is brute force (below),
    with the change counts ``n_blocks - C_u . C_v`` of the one-hot columns
    ``C``. Otherwise a kd-tree query asks for ``k`` neighbours (starting at
    ``n_neighbors + 1``, doubled when there are monotone columns); the rows
    whose selection is not provably complete (the monotone filter discarded too
    many, or ties/duplicates reach the farthest returned distance) are queried
    again with ``k`` doubled; once ``k`` exceeds a quarter of their part, the
    remaining rows are searched by brute force instead. Brute force computes
    squared distances by ``|a|^2 + |b|^2 - 2 a.b`` in blocks, keeps a superset of
    the answer with a rounding margin, and both searches rank the candidates by
    lengths summed column by column, so their graphs are identical.

    **Approximate search** (``search="approximate"``, nearest-neighbour
    graphs). Within each immutable group, identical rows form one class and
    get every duplicate edge exactly; a faiss HNSW index over the group's
    distinct points (built single-threaded, levels drawn from ``seed``, so
    the graph is the same at every run) proposes each distinct row its
    ``candidates`` nearest distinct points, and the rule above is applied to
    the proposed targets with the same exact lengths, monotone filter, counts
    per number of changed categories and tie-breaking. Every edge is one the
    exact rule allows and has its exact length; an edge is missing only when
    the index did not propose a true neighbour (the recall, measured in
    docs/scale.md). Hub edges use the same search; ``connect`` stays exact.

    **Weights.** ``"euclidean"``: ``w(u, v) = ||x_u - x_v||``. ``"density"``
    (FACE's kernel-density weight): ``w(u, v) = ||x_u - x_v|| / f((x_u + x_v) / 2)``
    with ``f(m) = (1/N) sum_i exp(-||m - x_i||^2 / (2 h^2))`` (an unnormalised
    Gaussian KDE in ``(0, 1]``), truncated at ``4 h`` (each dropped term
    ``< e^-8``) and floored by the two endpoints' own terms
    ``(2/N) exp(-||x_u - x_v||^2 / (8 h^2))``. Low-density moves cost more.
    Edges of length 0 get :data:`ZERO_LENGTH_WEIGHT` so they are not dropped.

    **Cost.** kd-tree: ``O(N log N)`` build plus ``O(N k log N)`` queries,
    good up to ~10 intrinsic dimensions. Brute force: ``O(sum_g N_g^2 p)`` time
    over immutable groups ``g``, memory bounded by ``chunk_size``. Density
    weights add a truncated KDE at ``E`` midpoints, ``O(E x rows within 4h)``.

    References
    ----------
    Nguyen et al., "Feasible Recourse Plan via Diverse Interpolation",
    AISTATS 2023, Section 4 (graph interpolation). Poyiadzi et al., "FACE:
    Feasible and Actionable Counterfactual Explanations", AIES 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from frpd_cli.constraints import ConstraintCodes
    >>> X = np.array([[0.0], [0.1], [0.3], [1.0]])
    >>> codes = ConstraintCodes(immutable=np.zeros((4, 0)), monotone=X.copy(),
    ...                         direction=np.array([1], dtype=np.int8))
    >>> g = build_graph(X, codes, n_neighbors=1)
    >>> g.directed, g.adjacency.nonzero()[1].tolist()
    (True, [1, 2, 3])
    """
    X = _check_matrix(X)
    N = X.shape[0]
    codes = _check_codes(codes, N)
    radius = _check_positive("radius", radius)
    if radius is None:
        n_neighbors = _check_int("n_neighbors", n_neighbors, 1)
    max_step = _check_positive("max_step", max_step)
    if weight not in _WEIGHTS:
        raise InputError(f"The 'weight' option must be one of {', '.join(_WEIGHTS)}. Got {weight!r} instead.")
    bandwidth = _check_positive("bandwidth", bandwidth)
    if bandwidth is not None and weight != "density":
        raise InputError(
            f"The 'bandwidth' option only applies to weight='density'. Got bandwidth={bandwidth!r} "
            f"with weight={weight!r}; drop it or use weight='density'."
        )
    if algorithm not in _ALGORITHMS:
        raise InputError(
            f"The 'algorithm' option must be one of {', '.join(_ALGORITHMS)}. Got {algorithm!r} instead."
        )
    chunk_size = _check_int("chunk_size", chunk_size, 1)
    if progress is not None and not callable(progress):
        raise InputError(f"The 'progress' option must be a callable or None. Got {_type_name(progress)} instead.")
    blocks = _check_blocks(category_blocks, X)
    if radius is not None:
        blocks = None  # a radius graph takes every target within the radius, whatever it changes
    hubs, hub_neighbors = _check_hubs(hubs, hub_neighbors, N)
    approximate = _check_search(search, candidates, seed, radius, N, n_neighbors)

    src, dst, length = _neighbours(X, codes, n_neighbors, radius, algorithm, chunk_size, progress, blocks,
                                   approximate)
    if hubs is not None:
        h_src, h_dst, h_len = _hub_edges(X, codes, hubs, hub_neighbors, chunk_size, approximate)
        src, dst, length = np.concatenate([src, h_src]), np.concatenate([dst, h_dst]), np.concatenate([length, h_len])
    if max_step is not None:
        keep = length <= max_step
        src, dst, length = src[keep], dst[keep], length[keep]
    directed = codes.monotone.shape[1] > 0
    if connect:
        if directed:
            raise InputError("The 'connect' option needs a graph without monotone (increasing/decreasing) "
                             "features: with them a move is one-way and the groups cannot be joined both ways. "
                             "Drop 'connect', or the monotone declarations.")
        b_src, b_dst, b_len = _bridges(X, codes, src, dst, chunk_size)
        src, dst, length = np.concatenate([src, b_src]), np.concatenate([dst, b_dst]), np.concatenate([length, b_len])
    key = src * N + dst
    if not directed:
        key = np.concatenate([key, dst * N + src])
        length = np.concatenate([length, length])  # (a - b)^2 == (b - a)^2 exactly
    key, first = np.unique(key, return_index=True)  # sorted by (src, dst), no duplicates
    src, dst, length = key // N, key % N, length[first]
    if weight == "density" and bandwidth is None:
        positive = length[length > 0]
        bandwidth = float(np.median(positive)) if positive.size else 1.0
    data = _weights(X, src, dst, length, weight, bandwidth)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=N))])
    adjacency = sp.csr_matrix((data, dst, indptr), shape=(N, N))
    return Graph(
        adjacency=adjacency,
        n_neighbors=None if radius is not None else n_neighbors,
        radius=radius,
        max_step=max_step,
        weight=weight,
        directed=directed,
        bandwidth=bandwidth if weight == "density" else None,
        category_blocks=blocks,
        hubs=hubs,
        hub_neighbors=hub_neighbors,
    )


def approximate_search_available() -> bool:
    """Whether the approximate neighbour search can run (faiss is installed: ``pip install frpd-cli[ann]``)."""
    import importlib.util

    return importlib.util.find_spec("faiss") is not None


def default_candidates(n_neighbors: int) -> int:
    """Distinct points the approximate search proposes per distinct row by default: ``4 * n_neighbors``, at least 128.

    Measured on Adult resampled to 100,000 rows (20 neighbours per number of changed categories): 128 candidates
    recall 96.9% of the exact edges in 55 s of CPU (exact: 196 s); at 50,000 rows 320 candidates recall 99.3% but
    take 82 s, more than the exact search's 50 s (docs/scale.md).
    """
    return max(128, 4 * int(n_neighbors))


def resolve_search(search: str, n_rows: int, radius=None) -> str:
    """The search ``search="auto"`` stands for: approximate for a nearest-neighbour graph of at least
    :data:`APPROXIMATE_MIN_ROWS` rows when faiss is installed, else exact; other values unchanged."""
    if search != "auto":
        return search
    return "approximate" if (radius is None and n_rows >= APPROXIMATE_MIN_ROWS
                             and approximate_search_available()) else "exact"


def _check_search(search, candidates, seed, radius, n_rows, n_neighbors):
    """``(candidates, seed)`` when the search is approximate, else None."""
    if search not in _SEARCHES:
        raise InputError(f"The 'search' option must be one of {', '.join(_SEARCHES)}. Got {search!r} instead.")
    if search == "approximate" and radius is not None:
        raise InputError("The approximate search finds nearest neighbours; a radius graph (radius="
                         f"{radius!r}) is built by the exact search. Drop the radius or use search='exact'.")
    if candidates is not None:
        candidates = _check_int("candidates", candidates, 1)
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise InputError(f"The 'seed' option must be an int. Got {seed!r} instead.")
    if resolve_search(search, n_rows, radius) == "exact":
        return None
    if not approximate_search_available():
        raise InputError("The approximate neighbour search needs faiss, which is not installed. Install it with "
                         "pip install 'frpd-cli[ann]' (or pip install faiss-cpu), or use the exact search.")
    return (default_candidates(n_neighbors) if candidates is None else candidates), int(seed)


def _check_hubs(hubs, hub_neighbors, n_rows: int):
    """``(hubs, hub_neighbors)`` validated: both None, or a boolean mask of ``n_rows`` and a count >= 1."""
    if hubs is None and hub_neighbors is None:
        return None, None
    if hubs is None or hub_neighbors is None:
        raise InputError("The 'hubs' and 'hub_neighbors' options go together: give both (the hub rows and how "
                         f"many of the nearest each row links to) or neither. Got hubs={_type_name(hubs)}, "
                         f"hub_neighbors={hub_neighbors!r}.")
    hub_neighbors = _check_int("hub_neighbors", hub_neighbors, 1)
    mask = np.asarray(hubs)
    if mask.shape != (n_rows,) or mask.dtype.kind != "b":
        raise InputError(f"The 'hubs' option must be a boolean mask of the {n_rows} rows. Got {mask.dtype} "
                         f"{mask.shape} instead.")
    return mask.copy(), hub_neighbors


def graph_statistics(graph: Graph) -> dict:
    """Summary numbers of a graph.

    Parameters
    ----------
    graph : Graph

    Returns
    -------
    stats : dict
        ``nodes``, ``edges`` (directed edges stored), ``directed``,
        ``weak_components`` (weakly connected components), ``largest_component``
        (nodes in the largest one), ``median_out_degree``, ``sinks`` (nodes
        without out-edges) and ``isolated_nodes`` (no edge in or out), as
        Python scalars.

    Notes
    -----
    ``O(N + E)``.
    """
    A = _check_graph(graph).adjacency
    out_deg = np.diff(A.indptr)
    in_deg = np.bincount(A.indices, minlength=A.shape[0])
    from scipy.sparse import csgraph

    n_comp, labels = csgraph.connected_components(A, directed=True, connection="weak")
    sizes = np.bincount(labels) if labels.size else np.zeros(1, np.int64)
    return {
        "nodes": int(A.shape[0]),
        "edges": int(A.nnz),
        "directed": bool(graph.directed),
        "weak_components": int(n_comp),
        "largest_component": int(sizes.max()),
        "median_out_degree": float(np.median(out_deg)) if out_deg.size else 0.0,
        "sinks": int(np.sum(out_deg == 0)),
        "isolated_nodes": int(np.sum((out_deg == 0) & (in_deg == 0))),
    }


def graph_to_arrays(graph: Graph) -> dict[str, np.ndarray]:
    """Everything needed to rebuild ``graph``, as plain arrays for :func:`numpy.savez`.

    Parameters
    ----------
    graph : Graph

    Returns
    -------
    arrays : dict of str to ndarray
        ``indptr`` (int64, N+1), ``indices`` (int64, E), ``data`` (float64, E),
        ``n_nodes`` (int64 scalar), ``n_neighbors`` (int64 scalar, -1 for a
        radius graph), ``radius``, ``max_step``, ``bandwidth`` (float64 scalars,
        NaN for None), ``weight`` (unicode scalar), ``directed`` (bool scalar),
        ``category_blocks`` (int64, (n_blocks, 2)) and ``per_change`` (bool
        scalar: the neighbour count applies per number of changed categories),
        with hub edges ``hubs`` (bool, N) and ``hub_neighbors`` (int64 scalar),
        ``graph_format_version`` (int64 scalar). No object arrays, so the file
        loads with ``allow_pickle=False``.
    """
    A = _check_graph(graph).adjacency

    def opt(value):
        return np.array(np.nan if value is None else value, dtype=np.float64)

    return {
        "graph_format_version": np.array(_FORMAT_VERSION, dtype=np.int64),
        "n_nodes": np.array(A.shape[0], dtype=np.int64),
        "indptr": A.indptr.astype(np.int64),
        "indices": A.indices.astype(np.int64),
        "data": A.data.astype(np.float64),
        "n_neighbors": np.array(-1 if graph.n_neighbors is None else graph.n_neighbors, dtype=np.int64),
        "radius": opt(graph.radius),
        "max_step": opt(graph.max_step),
        "bandwidth": opt(graph.bandwidth),
        "weight": np.array(graph.weight, dtype=np.str_),
        "directed": np.array(bool(graph.directed)),
        "category_blocks": (np.zeros((0, 2), np.int64) if graph.category_blocks is None
                            else np.asarray(graph.category_blocks, dtype=np.int64).reshape(-1, 2)),
        "per_change": np.array(graph.category_blocks is not None),
        **({} if graph.hubs is None else {"hubs": np.asarray(graph.hubs, dtype=bool),
                                          "hub_neighbors": np.array(graph.hub_neighbors, dtype=np.int64)}),
    }


def graph_from_arrays(arrays) -> Graph:
    """Rebuild a :class:`Graph` from :func:`graph_to_arrays` output (or a loaded ``.npz``).

    Parameters
    ----------
    arrays : mapping of str to ndarray

    Returns
    -------
    graph : Graph

    Raises
    ------
    ArtifactError
        If a key is missing or an array has the wrong shape, type or value.

    Notes
    -----
    Validation is ``O(N + E)``.
    """
    needed = (
        "graph_format_version", "n_nodes", "indptr", "indices", "data", "n_neighbors",
        "radius", "max_step", "bandwidth", "weight", "directed",
    )
    try:
        missing = [k for k in needed if k not in arrays]
    except TypeError:
        raise ArtifactError(f"Graph arrays must be a mapping of names to arrays. Got {_type_name(arrays)}.") from None
    if missing:
        raise ArtifactError(
            f"The graph arrays lack {', '.join(missing)}; the file is not a graph saved by this version of frpd. "
            "Rebuild the graph."
        )
    a = {k: np.asarray(arrays[k]) for k in needed}

    def scalar(name, kind):
        v = a[name]
        if v.shape != () or v.dtype.kind not in kind:
            raise ArtifactError(f"Graph array '{name}' must be a scalar of kind {kind!r}. Got {v.dtype} {v.shape}.")
        return v[()]

    version = int(scalar("graph_format_version", "iu"))
    if version != _FORMAT_VERSION:
        raise ArtifactError(
            f"Graph format version {version} is not supported (expected {_FORMAT_VERSION}). Rebuild the graph."
        )
    N = int(scalar("n_nodes", "iu"))
    indptr, indices, data = a["indptr"], a["indices"], a["data"]
    if N < 0 or indptr.ndim != 1 or indptr.shape[0] != N + 1 or indptr.dtype.kind not in "iu":
        raise ArtifactError(f"Graph array 'indptr' must be integers of shape ({N + 1},). Got {indptr.dtype} {indptr.shape}.")
    if indices.ndim != 1 or indices.dtype.kind not in "iu" or data.ndim != 1 or data.dtype.kind != "f":
        raise ArtifactError("Graph arrays 'indices' (integers) and 'data' (floats) must be 1-D.")
    E = indices.shape[0]
    if data.shape[0] != E or indptr[0] != 0 or indptr[-1] != E or np.any(np.diff(indptr) < 0):
        raise ArtifactError(
            f"Graph arrays are inconsistent: indptr must start at 0, not decrease and end at "
            f"len(indices) == len(data); got indptr[-1]={int(indptr[-1])}, {E} indices, {data.shape[0]} weights."
        )
    rows = np.repeat(np.arange(N), np.diff(indptr))
    outside = np.flatnonzero((indices < 0) | (indices >= N))
    if outside.size:
        e = int(outside[0])
        raise ArtifactError(f"Graph array 'indices' holds node id {int(indices[e])} at position {e} (an edge of node "
                            f"{int(rows[e])}), outside [0, {N}).")
    bad = np.flatnonzero(~np.isfinite(data) | ~(data > 0))
    if bad.size:
        e = int(bad[0])
        raise ArtifactError(f"Graph array 'data' must hold finite positive edge weights; it holds {float(data[e])!r} "
                            f"at position {e} (edge {int(rows[e])} -> {int(indices[e])}).")
    if np.any((rows[1:] == rows[:-1]) & (indices[1:] <= indices[:-1])):
        raise ArtifactError("Graph array 'indices' must be strictly increasing within each row.")
    weight = str(scalar("weight", "U"))
    if weight not in _WEIGHTS:
        raise ArtifactError(f"Graph weight must be one of {', '.join(_WEIGHTS)}. Got {weight!r}.")
    directed = bool(scalar("directed", "b"))
    n_neighbors = int(scalar("n_neighbors", "iu"))

    def opt(name):
        v = float(scalar(name, "f"))
        if math.isnan(v):
            return None
        if not (math.isfinite(v) and v > 0):
            raise ArtifactError(f"Graph parameter '{name}' must be positive or NaN. Got {v}.")
        return v

    radius, max_step, bandwidth = opt("radius"), opt("max_step"), opt("bandwidth")
    if (radius is None) == (n_neighbors < 1) or (radius is not None and n_neighbors != -1):
        raise ArtifactError(
            f"Graph parameters must give either n_neighbors >= 1 or a radius. "
            f"Got n_neighbors={n_neighbors}, radius={radius}."
        )
    if (bandwidth is not None) != (weight == "density"):
        raise ArtifactError(f"Graph bandwidth must be set exactly for density weights. Got {bandwidth} with {weight!r}.")
    adjacency = sp.csr_matrix(
        (data.astype(np.float64), indices.astype(np.int64), indptr.astype(np.int64)), shape=(N, N)
    )
    if not directed and (adjacency != adjacency.T).nnz:
        raise ArtifactError("Graph is marked undirected but its adjacency is not symmetric.")
    blocks = None
    if "per_change" in arrays:  # graphs saved before the per-change rule have neither array
        per_change = np.asarray(arrays["per_change"])
        raw_blocks = np.asarray(arrays.get("category_blocks", np.zeros((0, 2), np.int64)))
        if per_change.shape != () or per_change.dtype.kind != "b":
            raise ArtifactError(f"Graph array 'per_change' must be a boolean scalar. Got {per_change.dtype} "
                                f"{per_change.shape}.")
        if raw_blocks.ndim != 2 or raw_blocks.shape[1] != 2 or raw_blocks.dtype.kind not in "iu" or (
                raw_blocks.size and (raw_blocks.min() < 0 or np.any(raw_blocks[:, 1] <= raw_blocks[:, 0]))):
            raise ArtifactError(f"Graph array 'category_blocks' must hold (start, stop) column ranges with "
                                f"0 <= start < stop. Got {raw_blocks.dtype} {raw_blocks.shape}.")
        if bool(per_change[()]):
            if radius is not None:
                raise ArtifactError("Graph parameters must not combine a radius with per-change neighbours.")
            blocks = raw_blocks.astype(np.int64)
    hubs = hub_neighbors = None
    if "hubs" in arrays or "hub_neighbors" in arrays:  # graphs without hub edges have neither array
        if "hubs" not in arrays or "hub_neighbors" not in arrays:
            raise ArtifactError("Graph arrays 'hubs' and 'hub_neighbors' go together; one is missing. Rebuild the graph.")
        hubs, count = np.asarray(arrays["hubs"]), np.asarray(arrays["hub_neighbors"])
        if hubs.shape != (N,) or hubs.dtype.kind != "b":
            raise ArtifactError(f"Graph array 'hubs' must be {N} booleans. Got {hubs.dtype} {hubs.shape}.")
        if count.shape != () or count.dtype.kind not in "iu" or int(count) < 1:
            raise ArtifactError(f"Graph array 'hub_neighbors' must be an integer scalar >= 1. Got {count.dtype} "
                                f"{count.shape}.")
        hubs, hub_neighbors = hubs.astype(bool), int(count)
    return Graph(
        adjacency=adjacency,
        n_neighbors=None if radius is not None else n_neighbors,
        radius=radius,
        max_step=max_step,
        weight=weight,
        directed=directed,
        bandwidth=bandwidth,
        category_blocks=blocks,
        hubs=hubs,
        hub_neighbors=hub_neighbors,
    )


def _check_graph(graph) -> Graph:
    if not isinstance(graph, Graph):
        raise InputError(f"'graph' must be a Graph. Got {_type_name(graph)} instead.")
    return graph


def attach_source(graph: Graph, X, codes, x0, codes0) -> tuple[np.ndarray, np.ndarray]:
    """Out-edges of an applicant ``x0`` into the graph, under the graph's own rules.

    Parameters
    ----------
    graph : Graph
        Built from ``X`` and ``codes``; not modified.
    X : ndarray of shape (n_nodes, n_features)
        The encoded training rows the graph was built from.
    codes : ConstraintCodes
        Their constraint codes.
    x0 : ndarray of shape (n_features,) or (1, n_features)
        The encoded applicant.
    codes0 : ConstraintCodes
        The applicant's codes (one row).

    Returns
    -------
    neighbors : ndarray of int64, shape (n_out,)
        Row indices of ``x0``'s out-neighbours, nearest first (ties by index).
    weights : ndarray of float64, shape (n_out,)
        Edge weights, computed as in :func:`build_graph` with the graph's
        ``weight`` and ``bandwidth`` (zero lengths get :data:`ZERO_LENGTH_WEIGHT`).

    Raises
    ------
    InputError
        If shapes disagree with the graph.

    Notes
    -----
    Targets are the rows ``i`` with ``actionable_mask(codes0, codes)[i]``; the
    selection (every duplicate of ``x0`` plus the ``n_neighbors`` nearest at
    positive distance, per number of changed categories when the graph has
    ``category_blocks``, or every target within ``radius``; with hub edges
    also the ``hub_neighbors`` nearest hubs; then ``max_step``) is that of
    :func:`build_graph`. Only out-edges of ``x0`` are produced: in an
    undirected graph, rows that would have selected ``x0`` do not add edges.
    Brute force, ``O(N p)`` per applicant (plus ``O(n_out N p)`` for density
    weights).
    """
    graph = _check_graph(graph)
    X = _check_matrix(X)
    N, p = X.shape
    if N != graph.n_nodes:
        raise InputError(f"'X' must have the graph's {graph.n_nodes} rows. Got {N} rows instead.")
    codes = _check_codes(codes, N)
    x0 = np.asarray(x0, dtype=np.float64)
    if x0.ndim == 2 and x0.shape[0] == 1:
        x0 = x0[0]
    if x0.shape != (p,) or not np.all(np.isfinite(x0)):
        raise InputError(f"'x0' must be one finite encoded row of {p} values. Got shape {x0.shape} instead.")
    codes0 = _check_codes(codes0, 1, "codes0")
    if codes0.immutable.shape[1] != codes.immutable.shape[1] or codes0.monotone.shape[1] != codes.monotone.shape[1]:
        raise InputError(
            f"'codes0' must have the same constrained columns as 'codes' "
            f"({codes.immutable.shape[1]} immutable, {codes.monotone.shape[1]} monotone). "
            f"Got {codes0.immutable.shape[1]} and {codes0.monotone.shape[1]} instead."
        )
    targets = np.flatnonzero(actionable_mask(codes0, codes)).astype(np.int64)
    XT = np.ascontiguousarray(np.vstack([X, x0[None, :]]).T)
    src = np.full(targets.size, N, dtype=np.int64)
    length = _lengths(XT, src, targets)
    if graph.hubs is not None:  # the applicant's nearest hubs, as every node has them
        at = graph.hubs[targets]
        _, hub_nbr, hub_len, _ = _select_nearest(src[at], targets[at], length[at], graph.hub_neighbors)
    else:
        hub_nbr, hub_len = np.empty(0, np.int64), np.empty(0)
    blocks = graph.category_blocks
    if blocks is not None and blocks.size and int(blocks.max()) > p:
        raise InputError(f"The graph's category blocks reach column {int(blocks.max())}, beyond the {p} columns of 'X'.")
    if graph.radius is not None:
        keep = length <= graph.radius
        order = np.lexsort((targets[keep], length[keep]))
        nbr, length = targets[keep][order], length[keep][order]
    elif blocks is not None:
        onehot = np.concatenate([np.arange(a, b) for a, b in blocks]) if len(blocks) else np.zeros(0, np.int64)
        changes = _change_counts(X[targets][:, onehot], x0[onehot][None, :], len(blocks))[:, 0]
        keys = _shell_keys(src, changes, len(blocks) + 1)
        _, nbr, length, _ = _select_nearest(keys, targets, length, graph.n_neighbors)
        order = np.lexsort((nbr, length))
        nbr, length = nbr[order], length[order]
    else:
        _, nbr, length, _ = _select_nearest(src, targets, length, graph.n_neighbors)
    if hub_nbr.size:
        nbr, first = np.unique(np.concatenate([nbr, hub_nbr]), return_index=True)
        length = np.concatenate([length, hub_len])[first]
        order = np.lexsort((nbr, length))
        nbr, length = nbr[order], length[order]
    if graph.max_step is not None:
        keep = length <= graph.max_step
        nbr, length = nbr[keep], length[keep]
    if graph.weight == "density":
        mid = 0.5 * (X[nbr] + x0[None, :])
        w = _density_weights(length, _kde_brute(X, mid, graph.bandwidth), graph.bandwidth, N)
        w = np.maximum(w, ZERO_LENGTH_WEIGHT)
    else:
        w = np.maximum(length, ZERO_LENGTH_WEIGHT)
    return nbr, w


def _check_source_edges(graph, neighbors, weights):
    N = graph.n_nodes
    neighbors = np.asarray(neighbors)
    weights = np.asarray(weights, dtype=np.float64) if np.size(weights) else np.empty(0)
    if neighbors.size == 0:
        neighbors = neighbors.astype(np.int64)
    if neighbors.ndim != 1 or neighbors.dtype.kind not in "iu":
        raise InputError(f"'neighbors' must be a 1-D array of node indices. Got {neighbors.dtype} {neighbors.shape}.")
    if weights.shape != neighbors.shape:
        raise InputError(f"'weights' must have the shape of 'neighbors' {neighbors.shape}. Got {weights.shape} instead.")
    if neighbors.size and (neighbors.min() < 0 or neighbors.max() >= N):
        raise InputError(f"'neighbors' must be node indices in [0, {N}). Got values outside that range.")
    if np.unique(neighbors).size != neighbors.size:
        raise InputError("'neighbors' must not repeat a node.")
    if not np.all(np.isfinite(weights)) or np.any(weights <= 0):
        raise InputError(
            "'weights' must be finite and > 0 (zero-length edges carry ZERO_LENGTH_WEIGHT); use attach_source's output."
        )
    return neighbors.astype(np.int64), weights


def shortest_paths(graph: Graph, neighbors, weights, *, limit=np.inf) -> tuple[np.ndarray, np.ndarray]:
    """Dijkstra from an attached applicant ``x0`` to every node.

    Parameters
    ----------
    graph : Graph
    neighbors, weights : ndarray of shape (n_out,)
        ``x0``'s out-edges, as returned by :func:`attach_source`.
    limit : float, default=inf
        Stop exploring beyond this path cost; nodes farther away get ``inf``.

    Returns
    -------
    dist : ndarray of float64, shape (n_nodes,)
        Shortest path cost from ``x0`` (``inf`` if unreachable within ``limit``).
    predecessor : ndarray of int64, shape (n_nodes,)
        The node before each node on its shortest path. ``-1`` means "reached
        directly from ``x0``" when ``dist`` is finite and "unreachable" when it is
        ``inf``; always check ``dist`` first.

    Notes
    -----
    The stored graph is not modified: an ``(N + 1)``-node CSR view is assembled
    by appending ``x0``'s row to the CSR arrays (``O(N + E)`` copying), then
    :func:`scipy.sparse.csgraph.dijkstra` runs in ``O((N + E) log N)``.

    Examples
    --------
    >>> import numpy as np
    >>> from frpd_cli.constraints import ConstraintCodes
    >>> X = np.array([[0.0], [0.1], [0.3]])
    >>> codes = ConstraintCodes(np.zeros((3, 0)), np.zeros((3, 0)), np.zeros(0, np.int8))
    >>> g = build_graph(X, codes, n_neighbors=1)
    >>> nbr, w = attach_source(g, X, codes, np.array([-0.1]), codes.row(0))
    >>> dist, pred = shortest_paths(g, nbr, w)
    >>> np.round(dist, 3).tolist(), extract_path(pred, 2)
    ([0.1, 0.2, 0.4], [0, 1, 2])
    """
    graph = _check_graph(graph)
    neighbors, weights = _check_source_edges(graph, neighbors, weights)
    try:
        limit = float(limit)
    except (TypeError, ValueError):
        raise InputError(f"The 'limit' option must be a number >= 0. Got {limit!r} instead.") from None
    if math.isnan(limit) or limit < 0:
        raise InputError(f"The 'limit' option must be a number >= 0. Got {limit!r} instead.")
    A = graph.adjacency
    N = A.shape[0]
    order = np.argsort(neighbors)
    itype = np.int32 if A.nnz + neighbors.size < np.iinfo(np.int32).max and N < np.iinfo(np.int32).max else np.int64
    indptr = np.concatenate([A.indptr.astype(itype, copy=False), np.array([A.nnz + neighbors.size], itype)])
    indices = np.concatenate([A.indices.astype(itype, copy=False), neighbors[order].astype(itype)])
    data = np.concatenate([A.data, weights[order]])
    view = sp.csr_matrix((data, indices, indptr), shape=(N + 1, N + 1))
    from scipy.sparse import csgraph

    dist, pred = csgraph.dijkstra(view, directed=True, indices=N, return_predecessors=True, limit=limit)
    pred = pred[:N].astype(np.int64)
    pred[(pred == N) | (pred < 0)] = -1
    return dist[:N], pred


def extract_path(predecessors, target) -> list[int]:
    """Nodes of the shortest path to ``target``, from the first node after ``x0`` to ``target``.

    Parameters
    ----------
    predecessors : ndarray of int, shape (n_nodes,)
        As returned by :func:`shortest_paths`.
    target : int
        A node with a finite distance (check ``dist[target]`` first: an
        unreachable node has predecessor ``-1`` too and gives ``[target]``).

    Returns
    -------
    path : list of int

    Raises
    ------
    InputError
        If ``target`` is out of range or the predecessors loop.
    """
    pred = np.asarray(predecessors)
    N = pred.shape[0]
    if isinstance(target, (bool, np.bool_)) or not isinstance(target, numbers.Integral) or not 0 <= target < N:
        raise InputError(f"'target' must be a node index in [0, {N}). Got {target!r} instead.")
    path = [int(target)]
    node = int(target)
    while pred[node] >= 0:
        node = int(pred[node])
        path.append(node)
        if len(path) > N:
            raise InputError("'predecessors' contains a cycle; pass the array returned by shortest_paths.")
    path.reverse()
    return path


def path_cost(graph: Graph, neighbors, weights, path) -> float:
    """Sum of the edge weights along ``x0 -> path[0] -> ... -> path[-1]``.

    Parameters
    ----------
    graph : Graph
    neighbors, weights : ndarray of shape (n_out,)
        ``x0``'s out-edges (:func:`attach_source`).
    path : sequence of int
        Nodes after ``x0``; empty gives 0.0.

    Returns
    -------
    cost : float

    Raises
    ------
    InputError
        If a step of the path is not an edge.
    """
    graph = _check_graph(graph)
    neighbors, weights = _check_source_edges(graph, neighbors, weights)
    path = [int(v) for v in path]
    if not path:
        return 0.0
    hit = np.flatnonzero(neighbors == path[0])
    if hit.size == 0:
        raise InputError(f"Node {path[0]} is not an out-neighbour of x0.")
    cost = float(weights[hit[0]])
    A = graph.adjacency
    for u, v in zip(path[:-1], path[1:]):
        row = A.indices[A.indptr[u] : A.indptr[u + 1]]
        j = np.flatnonzero(row == v)
        if j.size == 0:
            raise InputError(f"The path uses {u} -> {v}, which is not an edge of the graph.")
        cost += float(A.data[A.indptr[u] + j[0]])
    return cost


def to_networkx(graph: Graph):
    """The graph as a :class:`networkx.DiGraph` with ``weight`` edge attributes.

    Graph parameters that are not None go into ``G.graph`` (GraphML-friendly).
    ``O(N + E)`` Python objects: meant for export and small-graph checks.
    """
    import networkx as nx

    graph = _check_graph(graph)
    A = graph.adjacency
    G = nx.DiGraph()
    G.add_nodes_from(range(A.shape[0]))
    src = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    G.add_weighted_edges_from(zip(src.tolist(), A.indices.tolist(), A.data.tolist()))
    params = {
        "n_neighbors": graph.n_neighbors,
        "radius": graph.radius,
        "max_step": graph.max_step,
        "weight": graph.weight,
        "directed": graph.directed,
        "bandwidth": graph.bandwidth,
        "per_change": graph.category_blocks is not None,
    }
    G.graph.update({k: v for k, v in params.items() if v is not None})
    return G
