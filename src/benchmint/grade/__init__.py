"""Open answers graded: final answers read by rules, a symbolic screen that is sure or silent, then a judge."""
