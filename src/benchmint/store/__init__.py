"""Resumable runs: the SQLite ledger and content hashing."""

from benchmint.store.ledger import Ledger, content_key

__all__ = ["Ledger", "content_key"]
