"""Grading a class: the sandboxed grader, its runner and judge, feedback, the student release."""
