"""Prototype selection on encoded candidates (pure numpy; HiGHS only for large exact problems).

Given the encoded candidate rows ``X`` of shape (N, p) and an applicant ``x0`` of shape (p,),
:func:`compute_geometry` builds the unit directions and distances, :func:`eigen_decompose` the top
eigenpairs of the cosine similarity ``S = A^T A`` (never formed), and :func:`select_prototypes`
chooses ``k`` diverse prototypes with one of :data:`METHODS`.
"""

from frpd_cli.selection.exact import MAX_ENUMERATION
from frpd_cli.selection.geometry import Eigen, Geometry, compute_geometry, eigen_decompose
from frpd_cli.selection.prototypes import (
    EIGEN_METHODS,
    EXACT_MAX_CANDIDATES,
    FULL_ENUMERATION,
    FULL_ENUMERATION_LARGE_K,
    METHODS,
    Selection,
    dpp_log_det,
    quad_objective,
    select_prototypes,
)

__all__ = [
    "Geometry",
    "Eigen",
    "Selection",
    "METHODS",
    "EXACT_MAX_CANDIDATES",
    "MAX_ENUMERATION",
    "EIGEN_METHODS",
    "FULL_ENUMERATION",
    "FULL_ENUMERATION_LARGE_K",
    "compute_geometry",
    "eigen_decompose",
    "select_prototypes",
    "quad_objective",
    "dpp_log_det",
]
