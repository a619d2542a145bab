"""The simulated example, as literals. Written by ``python -m tools.make_example`` (seed 2017, 11637 search steps); do not edit by hand."""

# VOCAB[i] is word id i; the raw outputs' columns follow it
VOCAB = ["grips", "arm", "on", "red", "cup", "the", "table", "drops", "lifts", "block", "blue", "moves"]

# raw outputs (logits) at the six positions of the sentence: 6 rows x 12 words
LOGITS = [
    [0.77, 0.66, -1.15, -0.74, -0.52, 0.45, -1.30, -0.08, 1.08, -0.45, 0.23, 0.92],
    [0.25, 3.12, -2.22, 1.57, 2.05, -2.10, 0.23, -1.40, 0.63, -1.02, -1.06, 0.96],
    [0.63, 1.83, 1.56, 1.06, 1.98, 0.20, 0.12, 0.71, 0.59, 0.38, 0.23, 0.82],
    [1.69, 0.49, -2.45, -0.20, 0.64, 1.97, -1.45, 1.37, 2.59, -2.61, 0.19, 0.74],
    [-0.11, -2.88, -1.86, 3.35, -3.51, 0.76, -1.63, -1.40, 0.04, -1.87, 0.91, -2.31],
    [-4.87, -1.44, -3.56, -5.28, -1.21, -1.64, -1.06, -2.57, -3.15, 3.14, -1.80, -1.40],
]

# raw outputs one step further on from position 4: after "lifts" (row 0) and after "the" (row 1)
NEXT_LOGITS = [
    [-0.14, 0.39, 1.12, -0.60, 0.41, 1.11, -0.44, 0.75, -0.18, 0.01, -0.48, -0.07],
    [1.50, -1.25, 0.24, 3.30, 1.21, 0.71, 0.62, -0.28, 0.41, -0.01, -0.63, -0.28],
]

# attention scores of one head over the six positions, before any mask: row = looking, column = looked at
ATTENTION_SCORES = [
    [-0.310, -0.546, -0.431, 0.439, 0.340, 0.203],
    [-0.186, -0.398, -0.097, 0.850, -0.074, 0.370],
    [0.371, -0.082, 0.239, 0.368, -0.109, 0.290],
    [0.108, 0.098, -0.353, 0.216, -0.171, -0.108],
    [-0.157, 0.309, 0.233, -0.390, -0.112, 0.157],
    [-1.234, -0.621, 0.648, 0.481, 0.341, -0.152],
]
