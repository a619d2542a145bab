"""The exercise builder: reads the masters in solutions/ and writes exercises/ and autograder/."""
