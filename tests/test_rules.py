import pytest

from loadlint.testing import iter_cases, run_case


@pytest.mark.parametrize("case", list(iter_cases()), ids=str)
def test_rule_example(case):
    problems = run_case(case)
    assert not problems, "\n".join(problems)
