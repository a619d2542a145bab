"""The authors' side of the course: everything that builds, checks or grades it, and nothing a learner runs.

Run its commands from the repository root as modules (`python -m tools.built_site`,
`python -m tools.grading.grade`, or through the Makefile); tests/ imports it, it imports `book` (the learner package) and never tests/. The modules by job:

- the website and the goldens: `built_site` (the one build command), `make_golden`, `pdf`, `bench`;
- text against output: `notebooks` (reading chapters and goldens), `format_code`, and the package
  `prose/`: `prose_numbers` and `prose_constants` (the rule that every number the prose states is printed
  nearby), `reading` (reading measures of a page);
- the example's data: `make_example` (writes book/example_data.py);
- the package `exercises/`: `make_exercises` (the builder) and `master` (the one reader of a master);
- the package `grading/`: `grade`, `grade_runner` (runs inside the sandbox, imports nothing of this
  package), `judge`, `sandbox` with `seccomp`, `feedback`, `release`, and the runners of trusted notebooks
  for the tests, `run_variants` and `run_public_checks`.
"""
