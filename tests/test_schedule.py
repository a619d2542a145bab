"""The order `make test` hands the test files to its workers (tests/conftest.py): the build first, then the
longest first by tests/durations.json, so that the two workers finish together."""

import conftest


def test_the_build_goes_first_then_the_longest():
    groups = {"test_a.py": 3, "test_build.py": 2, "golden/01_x.ipynb": 40, "test_new.py": 50}
    seconds = {"test_a.py": 200.0, "test_build.py": 60.0, "golden/01_x.ipynb": 9.0}
    # an unmeasured file counts a tenth of a second a test: 50 tests, 5 s
    assert conftest.line_up(groups, seconds) == ["test_build.py", "test_a.py", "golden/01_x.ipynb", "test_new.py"]


def test_every_measured_file_still_exists():
    """A file renamed or deleted leaves its line in tests/durations.json: `pytest --write-durations` rewrites it."""
    gone = [g for g in conftest.measured_seconds() if not (conftest.TESTS / g).exists()]
    assert not gone, f"tests/durations.json names files that are gone: {gone}"


def test_a_golden_is_one_group_and_a_file_another():
    assert conftest.group_of(conftest.TESTS / "golden" / "02_causal_mask.ipynb") == "golden/02_causal_mask.ipynb"
    assert conftest.group_of(conftest.TESTS / "test_tiny.py") == "test_tiny.py"
