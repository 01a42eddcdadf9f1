"""NLP-evaluation workflows (resampling, leaderboard uncertainty, evaluation-set size)."""
