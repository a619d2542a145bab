"""The site's own Sphinx extensions (_ext/) that replace MyST-NB internals refuse a MyST-NB they were not written for."""

import pytest
from sphinx.errors import ExtensionError

from tools.built_site import ROOT, load_extension


def test_site_fixes_refuses_another_myst_nb():
    fixes = load_extension("site_fixes")
    fixes.check_myst_nb_version()  # the installed, pinned version
    with pytest.raises(ExtensionError, match="update WRITTEN_FOR_MYST_NB"):
        fixes.check_myst_nb_version("1.5.0")
    pinned = [ln for ln in (ROOT / "requirements-dev.txt").read_text().splitlines() if ln.startswith("myst-nb==")]
    assert pinned == [f"myst-nb=={fixes.WRITTEN_FOR_MYST_NB}"], "the pin and the version the patches were written for"
