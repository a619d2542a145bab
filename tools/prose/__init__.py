"""The prose check: every number a page states is printed nearby; reading measures of a page."""
