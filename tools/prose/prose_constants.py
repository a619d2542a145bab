"""Defining constants of each chapter: numbers the prose states as definitions, not as results.

Each entry is an exact phrase of one line of the chapter's prose and the reason its number is a
definition. A number is exempt from the prose check only inside that phrase, so a changed phrase
("add up to 2") is checked like any other number. `tests/test_prose.py` prints this list, and fails on a
phrase the chapter no longer contains.
"""

DEFINING = {
    "01_next_token_prediction": [
        ("to 1. Write", "chances add up to 1: what a distribution is"),
        ("probability of 1 costs nothing", "-ln 1 = 0, from the definition of the loss"),
    ],
    "02_causal_mask": [
        ("still sums to 1", "a row of softmax weights sums to 1 by construction"),
        ("4 to 6", "positions of the six-token example sentence that row 3 must not see"),
        ("positions 1 to 6", "the positions of the six-token example sentence"),
    ],
    "04_kv_cache": [
        ("step 3 pushes", "the step of the loop the section follows, named in the section before"),
        ("$2 \\times n_\\text{layers}", "keys and values: two tensors, the factor of the formula"),
    ],
    "05_sampling": [
        ("position 4", "the example position the chapter studies (counted from 0 in code, as 3)"),
    ],
    "05_sampling_lab": [
        ("4-grams", "the name of the repetition measure: runs of four tokens"),
    ],
    "07_where_next": [
        ("Llama 2 models", "the name of a model family, not a figure"),
    ],
    "08_using_pytorch": [
        ("position 4", "the example position the chapter studies (counted from 0 in code, as 3)"),
    ],
    "08_using_pytorch_lab": [
        ("position 4", "the example position the chapter studies (counted from 0 in code, as 3)"),
    ],
}
