"""Scoring: set metrics, answer extraction, and the file pipeline.

Embedding API (plain lists and numpy arrays in, numpy arrays out):
    score_item, score_batch, score_counts   every metric per item / per batch
    extract_answer, extract_answers         raw model output -> answer set
    score_files, ScoreConfig                JSONL files -> scores, summary, errors
User-defined metrics of (TP, FP, FN, |G|), compiled by Numba: benchmint.metrics.user
(imported on demand, so ``import benchmint.metrics`` does not load Numba).
"""

from benchmint.metrics.batch import METRIC_NAMES, score_batch, score_counts, score_item
from benchmint.metrics.pipeline import ScoreConfig, ScoreResult, score_files
from benchmint.tasks import AnswerError
from benchmint.tasks.extract import extract_answer, extract_answers

__all__ = ["METRIC_NAMES", "AnswerError", "ScoreConfig", "ScoreResult", "extract_answer", "extract_answers",
           "score_batch", "score_counts", "score_files", "score_item"]
