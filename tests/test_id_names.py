"""Which column names read like an applicant's identifier: the hint that suggests --id-column for an ignored
column of the applicants file names only those."""

from __future__ import annotations

import pytest

from frpd_cli.cli._hints import ignored_columns_warning
from frpd_cli.schema import looks_like_id_name


@pytest.mark.parametrize("name", ["id", "ID", "Id", "applicant_id", "APPLICANT_ID", "customerId", "loanID", "uuid",
                                  "row-guid", "record_key", "id_number", "identifier", "ids"])
def test_identifier_names(name):
    assert looks_like_id_name(name)


@pytest.mark.parametrize("name", ["paid", "valid", "humid", "rapid", "PAID", "idle", "age", "monkey", "kidney",
                                  "amount_paid", "ideal"])
def test_names_that_only_end_or_start_like_one_are_not(name):
    assert not looks_like_id_name(name)


def test_the_hint_names_an_identifier_column_not_a_word_ending_in_id():
    message = ignored_columns_warning(["amount_paid", "customerId"], "'applicants.csv'", None)
    assert "Hint: 'customerId' looks like the applicants' identifier" in message
    assert "Hint" not in ignored_columns_warning(["paid"], "'applicants.csv'", None)
    assert "Hint" not in ignored_columns_warning(["customerId"], "'applicants.csv'", "customerId")
