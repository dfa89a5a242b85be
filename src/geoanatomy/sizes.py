"""Model sizes: name -> (n_layer, d_model, n_head). Torch-free (read at Snakefile parse time).

Parameter counts with vocab 32, context 64 and tied embeddings (pinned in
tests/test_model.py): L(12 d^2 + 13 d) + 2 d + (V + T) d.
Roughly geometric from the paper's ~405K to its ~151M, with large at ~85M.
"""
SIZES: dict[str, tuple[int, int, int]] = {
    "nano": (2, 128, 4),       # 0.41M  (paper's smallest: ~405K)
    "micro": (3, 192, 6),      # 1.35M
    "small": (6, 256, 8),      # 4.76M
    "medium": (8, 448, 7),     # 19.4M
    "large": (12, 768, 12),    # 85.1M  (paper: ~85M)
    "xlarge": (12, 1024, 16),  # 151.3M (paper: ~151M)
}
