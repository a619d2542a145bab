"""Shared fixtures: the built website. The build test runs first, so a full run builds the book once."""
import pytest

import built_site


def pytest_collection_modifyitems(items):
    # test_build.py builds _build/html; the tests that read the site come after it and reuse it
    items.sort(key=lambda item: item.path.name != "test_build.py")


@pytest.fixture(scope="session")
def site():
    """The folder of the built website, built first if it is missing or stale."""
    ok, message = built_site.ensure_built()
    if not ok:
        pytest.fail(f"the book does not build:\n{message}")
    return built_site.HTML


@pytest.fixture(scope="session")
def site_url(site):
    with built_site.serve(site) as url:
        yield url
