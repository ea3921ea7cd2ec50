"""The immutable-feature policies (``filter``, ``project``, ``auto``) and the user's ranges, by their older names.

They are steps of the candidate stage and live in :mod:`frpd_cli.candidates`
(the policies are described there); the names below are kept so that code
importing them from here keeps working.
"""

from __future__ import annotations

from .candidates import (
    IMMUTABLE_POLICIES,
    CandidateSet,
    candidate_mask,
    candidate_set,
    effective_policy,
    may_project,
    outside_ranges,
    project_rows,
    within_ranges,
)

__all__ = ["IMMUTABLE_POLICIES", "CandidateSet", "candidate_mask", "project_rows", "candidate_set",
           "effective_policy", "may_project", "within_ranges", "outside_ranges"]
