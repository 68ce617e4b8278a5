"""Tokens, calls and cost per stage and model, a price table, and a budget that is never exceeded.

Prices are USD per million tokens, given by the user as JSON: ``{"model-name": {"input": 0.15, "output": 0.6}}``.

The budget (``max_cost_usd``, ``max_tokens``) is a hard bound on what the run is charged, whatever the
concurrency. Before every HTTP request the request's worst case is reserved: its prompt estimate
(``ChatRequest.estimate_prompt_tokens``, raised per model whenever a server reports more) plus its ``max_tokens``.
Requests in flight hold their worst case until they settle; a request that would fit once those settle waits for
them, and one that cannot fit even then is refused and the run stops cleanly with ``stop_reason`` set. Under a
budget the first request of each model goes alone (and its first with images): its reported prompt size
calibrates the estimate of the others.
A request without ``max_tokens`` has no worst case (its reply may run to the model's context length), so a budget
refuses it before the run starts.

A settled request is charged its reported usage when that usage can be true: whole numbers >= 0 and no more
completion tokens than ``max_tokens``. Otherwise it is charged its reservation, the worst case, and counted:
``unknown_usage`` (no usage reported, a timeout or dropped connection the server may have billed, a call in
flight when an earlier run was killed) or ``bad_usage`` (negative, not a whole number, more completion tokens
than asked for). Token and cost figures that include such a call are unknown, and the summary says so (``None``)
rather than print a lower bound as the total. The one way past the budget is a prompt the server counts larger
than its estimate (a template or image tokens the estimate does not know): such a reply is charged what it
reported, counted as ``over_reservation`` with the tokens beyond its worst case as ``unbudgeted_tokens``, and
the estimate is raised for every later request of that model.

With an ``AccountStore`` (``accounting.sqlite`` in the run's output folder) the figures cover every invocation
into that folder, and by default the budget covers what earlier invocations spent too (``budget_scope``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from benchmint.io import InputError

ACCOUNTS_NAME = "accounting.sqlite"
# Counts per (stage, model). The reported_* figures hold believable reported usage only.
COUNTERS = ("items", "replies", "cached", "failed", "requests", "unknown_usage", "bad_usage", "over_reservation",
            "reported_prompt_tokens", "reported_completion_tokens", "cached_prompt_tokens",
            "cached_completion_tokens", "charged_tokens", "unbudgeted_tokens")
FIGURES = (*COUNTERS, "charged_cost_usd")
SCOPES = ("run", "invocation")


@dataclass(frozen=True)
class Price:
    """USD per million prompt (input) and completion (output) tokens."""

    input: float
    output: float

    def __post_init__(self) -> None:
        for name in ("input", "output"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise ValueError(f"price {name} must be a number >= 0 (USD per million tokens), got {value!r}")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


class PriceTable:
    def __init__(self, prices: Mapping[str, Price | Mapping[str, float]] | None = None) -> None:
        self._prices: dict[str, Price] = {}
        for model, price in (prices or {}).items():
            if isinstance(price, Price):
                self._prices[model] = price
                continue
            if not isinstance(price, Mapping) or set(price) != {"input", "output"}:
                raise ValueError(f"price of {model!r} must be an object with exactly 'input' and 'output' "
                                 f"(USD per million tokens), got {price!r}")
            self._prices[model] = Price(price["input"], price["output"])

    @classmethod
    def load(cls, path: str | os.PathLike) -> PriceTable:
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"price table not found: {p}") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"cannot read price table {p}: {exc}") from None
        if not isinstance(data, dict):
            raise InputError(f"price table {p} must be a JSON object of model -> {{input, output}}")
        try:
            return cls(data)
        except ValueError as exc:
            raise InputError(f"price table {p}: {exc}") from None

    def get(self, model: str) -> Price | None:
        return self._prices.get(model)

    def as_dict(self) -> dict:
        return {m: {"input": p.input, "output": p.output} for m, p in sorted(self._prices.items())}


@dataclass(frozen=True)
class Budget:
    """Stop before the run's charged cost (USD) or tokens (prompt + completion) would pass these."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.max_cost_usd is not None and not self.max_cost_usd >= 0:
            raise ValueError(f"max_cost_usd must be >= 0, got {self.max_cost_usd!r}")
        if self.max_tokens is not None and (not isinstance(self.max_tokens, int) or self.max_tokens < 0):
            raise ValueError(f"max_tokens must be an integer >= 0, got {self.max_tokens!r}")

    @property
    def active(self) -> bool:
        return self.max_cost_usd is not None or self.max_tokens is not None


def budget_problem(budget: Budget, prices: PriceTable, model: str, max_tokens: int | None,
                   source: str = "the request", whole: bool = True, fix: str = "") -> str | None:
    """Why ``budget`` cannot bound requests for ``model`` whose reply bound is ``max_tokens``, or None.

    ``source`` names where the requests' max_tokens comes from and ``fix`` how to change it, for the message
    (e.g. a benchmark's protocol and the option that replaces it); ``whole``: also when one request's reply bound
    alone passes the whole budget.
    """
    if budget.max_cost_usd is not None and prices.get(model) is None:
        return (f"--max-cost needs a price for model {model!r}; the price table has "
                f"{sorted(prices.as_dict()) or 'no models'}")
    if not budget.active:
        return None
    if max_tokens is None:
        return (f"a budget (--max-cost/--max-tokens) needs a bound on every reply, and {source} sets no max_tokens: "
                "one reply may run to the model's whole context length, so no request has a known worst case; "
                f"give the requests a max_tokens{fix}")
    if not whole:
        return None
    if budget.max_tokens is not None and max_tokens >= budget.max_tokens:
        return (f"one request's worst case (max_tokens {max_tokens:,} from {source}, plus its prompt) exceeds the "
                f"whole token budget (--max-tokens {budget.max_tokens:,}): no request could be sent; give a budget "
                f"well above {max_tokens:,} tokens or a smaller max_tokens{fix}")
    price = prices.get(model)
    if budget.max_cost_usd is not None and price is not None and price.cost(1, max_tokens) > budget.max_cost_usd:
        return (f"one request's worst case (max_tokens {max_tokens:,} from {source}, plus its prompt, "
                f"${price.cost(1, max_tokens):.4f} at {model!r}'s prices) exceeds the whole cost budget "
                f"(--max-cost {budget.max_cost_usd:g}): no request could be sent; give a larger budget or a smaller "
                f"max_tokens{fix}")
    return None


def usage_problem(prompt_tokens, completion_tokens, max_tokens: int | None) -> str | None:
    """Why a reported usage cannot be believed (``"unknown_usage"`` or ``"bad_usage"``), or None."""
    if prompt_tokens is None or completion_tokens is None:
        return "unknown_usage"
    for value in (prompt_tokens, completion_tokens):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return "bad_usage"
    if max_tokens is not None and completion_tokens > max_tokens:
        return "bad_usage"
    return None


class Verdict(Enum):
    GO = "go"
    WAIT = "wait"  # fits once the requests in flight settle
    REFUSE = "refuse"


@dataclass(slots=True)
class Reservation:
    stage: str
    model: str
    prompt_estimate: int
    max_tokens: int | None
    tokens: int
    cost: float
    images: bool = False
    probe: bool = False  # the model's first request under a budget: it calibrates the prompt estimate
    id: str = ""


class AccountStore:
    """What every invocation into one folder was charged, kept in SQLite, and the reservations in flight.

    Each change is added to what is stored (deltas), in one transaction with the reservation it settles; a
    reservation left by a killed process is charged its worst case when the next invocation opens the store.
    """

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS counters (stage TEXT NOT NULL, model TEXT NOT NULL, name TEXT NOT NULL,
                                         value REAL NOT NULL, PRIMARY KEY (stage, model, name));
    CREATE TABLE IF NOT EXISTS pending (id TEXT PRIMARY KEY, pid INTEGER NOT NULL, stage TEXT NOT NULL,
                                        model TEXT NOT NULL, tokens INTEGER NOT NULL, cost REAL NOT NULL);
    CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
    """
    FORMAT = "benchmint-accounting-1"

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(self.SCHEMA)
            stored = self._db.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"cannot use {self.path} as the run's accounting: {exc}") from None
        if stored is None:
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (self.FORMAT,))
        elif stored[0] != self.FORMAT:
            raise ValueError(f"{self.path} is not benchmint accounting of this version ({stored[0]!r})")

    def open_invocation(self) -> tuple[dict[tuple[str, str], dict], int]:
        """Charge the reservations of killed processes, count this invocation; the stored rows and invocations."""
        with self._tx():
            for rid, pid, stage, model, tokens, cost in self._db.execute("SELECT * FROM pending").fetchall():
                if _alive(pid):
                    continue
                self._add(stage, model, {"unknown_usage": 1, "charged_tokens": tokens, "charged_cost_usd": cost})
                self._db.execute("DELETE FROM pending WHERE id = ?", (rid,))
            row = self._db.execute("SELECT value FROM meta WHERE name = 'invocations'").fetchone()
            invocations = (int(row[0]) if row else 0) + 1
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('invocations', ?)", (str(invocations),))
        rows: dict[tuple[str, str], dict] = {}
        for stage, model, name, value in self._db.execute("SELECT stage, model, name, value FROM counters"):
            if name in FIGURES:
                rows.setdefault((stage, model), _zero())[name] = value if name == "charged_cost_usd" else int(value)
        return rows, invocations

    def hold(self, res: Reservation) -> None:
        with self._tx():
            self._db.execute("INSERT INTO pending VALUES (?, ?, ?, ?, ?, ?)",
                             (res.id, os.getpid(), res.stage, res.model, res.tokens, res.cost))

    def write(self, deltas: dict[tuple[str, str], dict], released: str | None = None) -> None:
        with self._tx():
            for (stage, model), delta in deltas.items():
                self._add(stage, model, delta)
            if released is not None:
                self._db.execute("DELETE FROM pending WHERE id = ?", (released,))

    def _add(self, stage: str, model: str, delta: dict) -> None:
        self._db.executemany(
            "INSERT INTO counters VALUES (?, ?, ?, ?) ON CONFLICT (stage, model, name) "
            "DO UPDATE SET value = value + excluded.value",
            [(stage, model, name, value) for name, value in delta.items() if value])

    @contextlib.contextmanager
    def _tx(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def close(self) -> None:
        self._db.close()


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # this process has just opened the store: any reservation of its pid is a dead one's
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _zero() -> dict:
    row: dict = dict.fromkeys(COUNTERS, 0)
    row["charged_cost_usd"] = 0.0
    return row


class Accounting:
    """Counters per (stage, model) and the budget of a run. Engines running in one event loop may share one (a
    single budget for the answering model and its judge).

    ``store``: an ``AccountStore`` to add this invocation to (then the summary covers every invocation kept
    there); ``budget_scope``: ``"run"`` (the budget covers what earlier invocations were charged too) or
    ``"invocation"`` (this invocation alone).
    """

    def __init__(self, prices: PriceTable | None = None, budget: Budget | None = None, *,
                 store: AccountStore | None = None, budget_scope: str = "run") -> None:
        if budget_scope not in SCOPES:
            raise ValueError(f"budget_scope must be one of {', '.join(SCOPES)}, got {budget_scope!r}")
        self.prices = prices or PriceTable()
        self.budget = budget or Budget()
        self.budget_scope = budget_scope
        self.store = store
        self._rows: dict[tuple[str, str], dict] = {}  # this invocation
        self._written: dict[tuple[str, str], dict] = {}  # the part of _rows already added to the store
        self._before: dict[tuple[str, str], dict] = {}  # earlier invocations
        self.invocations = 1
        if store is not None:
            self._before, self.invocations = store.open_invocation()
        # By (model, whether the prompt has images): how much larger servers count prompts than estimated.
        self._prompt_factor: dict[tuple[str, bool], float] = {}
        self._calibrated: set[tuple[str, bool]] = set()
        self._probing: dict[tuple[str, bool], int] = {}
        self.charged_tokens = 0  # this invocation
        self.charged_cost = 0.0
        self.earlier_tokens = sum(r["charged_tokens"] for r in self._before.values())
        self.earlier_cost = sum(r["charged_cost_usd"] for r in self._before.values())
        self.reserved_tokens = 0
        self.reserved_cost = 0.0
        self.stop_reason: str | None = None
        self.stop_detail: str | None = None

    # ---- the budget
    def check(self, model: str, max_tokens: int | None, source: str = "the request") -> None:
        """Raise ValueError when the budget cannot bound a request for ``model`` with this ``max_tokens`` (a
        request that alone passes the whole budget is refused when it comes, saying so)."""
        problem = budget_problem(self.budget, self.prices, model, max_tokens, source, whole=False)
        if problem is not None:
            raise ValueError(problem)

    def spent(self) -> tuple[int, float]:
        """Tokens and cost the budget counts as spent: this invocation's, and earlier ones' unless told not to."""
        if self.budget_scope == "run":
            return self.charged_tokens + self.earlier_tokens, self.charged_cost + self.earlier_cost
        return self.charged_tokens, self.charged_cost

    def _row(self, stage: str, model: str) -> dict:
        row = self._rows.get((stage, model))
        if row is None:
            row = self._rows[(stage, model)] = _zero()
        return row

    def worst_case(self, model: str, prompt_estimate: int, max_tokens: int | None,
                   images: bool = False) -> tuple[int, float]:
        prompt = self._prompt_reserve((model, images), prompt_estimate)
        completion = max_tokens or 0
        price = self.prices.get(model)
        return prompt + completion, price.cost(prompt, completion) if price else 0.0

    def _prompt_reserve(self, shape: tuple[str, bool], prompt_estimate: int) -> int:
        return int(prompt_estimate * self._prompt_factor.get(shape, 1.0)) + 1

    def reserve(self, stage: str, model: str, prompt_estimate: int, max_tokens: int | None,
                images: bool = False) -> Reservation | Verdict:
        """A reservation for one request, or WAIT (retry after a settle) or REFUSE (stop: the budget is spent).

        ``images``: the prompt has images (their token counts are calibrated apart from text's)."""
        tokens, cost = self.worst_case(model, prompt_estimate, max_tokens, images)
        b = self.budget
        spent_tokens, spent_cost = self.spent()
        token_over = b.max_tokens is not None and spent_tokens + tokens > b.max_tokens
        cost_over = b.max_cost_usd is not None and spent_cost + cost > b.max_cost_usd
        if token_over or cost_over:
            if self.stop_reason is None:
                self.stop_reason = "max_cost" if cost_over else "max_tokens"
                self.stop_detail = self._refusal(tokens, cost, cost_over)
            return Verdict.REFUSE
        if ((b.max_tokens is not None and spent_tokens + self.reserved_tokens + tokens > b.max_tokens)
                or (b.max_cost_usd is not None and spent_cost + self.reserved_cost + cost > b.max_cost_usd)):
            return Verdict.WAIT
        shape = (model, images)
        probe = b.active and shape not in self._calibrated
        if probe and self._probing.get(shape):
            return Verdict.WAIT  # the model's first request is out: its reported prompt size calibrates this one
        self.reserved_tokens += tokens
        self.reserved_cost += cost
        res = Reservation(stage, model, prompt_estimate, max_tokens, tokens, cost, images, probe, uuid.uuid4().hex)
        if probe:
            self._probing[shape] = self._probing.get(shape, 0) + 1
        if self.store is not None and b.active:
            self.store.hold(res)
        return res

    def _refusal(self, tokens: int, cost: float, cost_over: bool) -> str:
        b = self.budget
        spent_tokens, spent_cost = self.spent()
        if cost_over and b.max_cost_usd is not None:
            need, limit, spent = f"${cost:.4f}", f"--max-cost {b.max_cost_usd:g}", f"${spent_cost:.4f}"
            whole = cost > b.max_cost_usd
        else:
            assert b.max_tokens is not None  # the token budget refused it
            need, limit, spent = f"{tokens:,} tokens", f"--max-tokens {b.max_tokens:,}", f"{spent_tokens:,} tokens"
            whole = tokens > b.max_tokens
        if whole:
            return f"its worst case ({need}) exceeds the whole budget ({limit})"
        text = f"its worst case ({need}) does not fit in what is left of the budget ({limit}; {spent} charged"
        if self.budget_scope == "run" and self.invocations > 1:
            text += (f" over {self.invocations} invocations into this folder; --budget-per-invocation counts this "
                     "one alone")
        return text + ")"

    def settle(self, res: Reservation, prompt_tokens, completion_tokens, maybe_billed: bool) -> tuple[int, int]:
        """Release ``res`` and charge the request (see the module docstring).

        Returns (tokens charged to the budget, tokens the server says it used: what a tokens-per-minute limit
        counts; the reservation when that is not known).
        """
        self.reserved_tokens -= res.tokens
        self.reserved_cost -= res.cost
        shape = (res.model, res.images)
        if res.probe:
            self._probing[shape] -= 1
        row = self._row(res.stage, res.model)
        problem = usage_problem(prompt_tokens, completion_tokens, res.max_tokens)
        if problem is None:
            used = prompt_tokens + completion_tokens
            self._calibrated.add(shape)
            row["reported_prompt_tokens"] += prompt_tokens
            row["reported_completion_tokens"] += completion_tokens
            price = self.prices.get(res.model)
            cost = price.cost(prompt_tokens, completion_tokens) if price is not None else 0.0
            # Believable usage is charged in full, even past the reservation (a prompt larger than estimated):
            # what the server bills. It is counted, and the estimate is raised below.
            charged, charged_cost = used, cost
            if used > res.tokens:
                row["over_reservation"] += 1
                row["unbudgeted_tokens"] += used - res.tokens
            if res.prompt_estimate > 0 and prompt_tokens > res.prompt_estimate:
                factor = prompt_tokens / res.prompt_estimate
                if factor > self._prompt_factor.get(shape, 1.0):
                    self._prompt_factor[shape] = factor
        elif maybe_billed:
            self._calibrated.add(shape)  # nothing to learn, but the next calls need not wait for it
            row[problem] += 1
            charged, charged_cost, used = res.tokens, res.cost, res.tokens
        else:
            charged, charged_cost, used = 0, 0.0, 0
        row["charged_tokens"] += charged
        row["charged_cost_usd"] += charged_cost
        self.charged_tokens += charged
        self.charged_cost += charged_cost
        if self.store is not None:
            # The charge and the release of its reservation in one transaction, with the row's other new counts.
            self.store.write(self._unwritten([(res.stage, res.model)]), res.id if self.budget.active else None)
        return charged, used

    def _unwritten(self, keys) -> dict[tuple[str, str], dict]:
        """What the rows of ``keys`` hold beyond what was written to the store, marked as written."""
        deltas = {}
        for key in keys:
            row, done = self._rows[key], self._written.setdefault(key, _zero())
            delta = {k: row[k] - done[k] for k in FIGURES if row[k] != done[k]}
            if delta:
                deltas[key] = delta
                done.update(row)
        return deltas

    def flush(self) -> None:
        """Add what the store does not hold yet (counts of cached items, ...)."""
        if self.store is not None:
            deltas = self._unwritten(list(self._rows))
            if deltas:
                self.store.write(deltas)

    def close(self) -> None:
        if self.store is not None:
            self.flush()
            self.store.close()
            self.store = None

    # ---- counts
    def count(self, stage: str, model: str, name: str, n: int = 1) -> None:
        self._row(stage, model)[name] += n

    def count_item(self, stage: str, model: str, ok: bool, cached: bool = False, prompt_tokens: int | None = None,
                   completion_tokens: int | None = None) -> None:
        """One item delivered: a reply (``cached`` with the usage the cache recorded) or a failure."""
        row = self._row(stage, model)
        row["items"] += 1
        if not ok:
            row["failed"] += 1
            return
        row["replies"] += 1
        if cached:
            row["cached"] += 1
            if usage_problem(prompt_tokens, completion_tokens, None) is None:
                row["cached_prompt_tokens"] += prompt_tokens
                row["cached_completion_tokens"] += completion_tokens

    # ---- the summary
    def _shaped(self, counts: dict, price: Price | None) -> dict:
        """Counts with the figures a reader wants; a figure that is not known is None."""
        known = counts["unknown_usage"] == 0 and counts["bad_usage"] == 0
        p, c = counts["reported_prompt_tokens"], counts["reported_completion_tokens"]
        cost = price.cost(p, c) if price is not None else None
        return {**{k: counts[k] for k in COUNTERS}, "charged_cost_usd": round(counts["charged_cost_usd"], 6),
                "usage_known": known, "prompt_tokens": p if known else None,
                "completion_tokens": c if known else None,
                "cost_usd": round(cost, 6) if cost is not None and known else None,
                "reported_cost_usd": round(cost, 6) if cost is not None else None}

    def _table(self, rows: dict[tuple[str, str], dict]) -> tuple[list[dict], dict]:
        shaped: list[dict] = []
        total = _zero()
        for (stage, model), counts in sorted(rows.items()):
            shaped.append({"stage": stage, "model": model, **self._shaped(counts, self.prices.get(model))})
            for name in FIGURES:
                total[name] += counts[name]
        out = self._shaped(total, None)
        costs = [r["reported_cost_usd"] for r in shaped]
        out["reported_cost_usd"] = None if any(c is None for c in costs) else round(sum(costs), 6)
        out["cost_usd"] = out["reported_cost_usd"] if out["usage_known"] else None
        return shaped, out

    def summary(self) -> dict:
        merged: dict[tuple[str, str], dict] = {}
        for source in (self._before, self._rows):
            for key, counts in source.items():
                row = merged.setdefault(key, _zero())
                for name in FIGURES:
                    row[name] += counts[name]
        rows, total = self._table(merged)
        _, this = self._table(self._rows)
        spent_tokens, spent_cost = self.spent()
        return {"by_stage_model": rows, "total": total, "this_invocation": this, "invocations": self.invocations,
                "budget": {"max_cost_usd": self.budget.max_cost_usd, "max_tokens": self.budget.max_tokens,
                           "covers": self.budget_scope,
                           "charged_cost_usd": round(spent_cost, 6), "charged_tokens": spent_tokens},
                "prices": self.prices.as_dict(), "stop_reason": self.stop_reason, "stop_detail": self.stop_detail}


def describe(summary: dict) -> str:
    """One line for people: calls, tokens and cost of the run, 'unknown' where a figure is not known."""
    t = summary["total"]
    n = summary.get("invocations", 1)
    text = (f"calls{f' over {n} invocations' if n > 1 else ''}: {t['requests']} requests, {t['cached']} replies "
            f"from the cache, {t['failed']} failed; ")
    if t["usage_known"]:
        text += f"tokens {t['prompt_tokens']:,} in / {t['completion_tokens']:,} out"
    else:
        calls = t["unknown_usage"] + t["bad_usage"]
        text += (f"tokens unknown ({calls} call{'s' if calls != 1 else ''} without believable usage; at least "
                 f"{t['reported_prompt_tokens']:,} in / {t['reported_completion_tokens']:,} out)")
    if t["cost_usd"] is not None:
        text += f"; cost ${t['cost_usd']:.4f}"
    elif t["reported_cost_usd"] is not None:
        text += f"; cost unknown (at least ${t['reported_cost_usd']:.4f})"
    else:
        text += "; cost unknown (no price for every model: --prices)"
    b = summary["budget"]
    if b["max_cost_usd"] is not None or b["max_tokens"] is not None:
        text += f"; charged to the budget {b['charged_tokens']:,} tokens"
        if b["max_cost_usd"] is not None:
            text += f", ${b['charged_cost_usd']:.4f}"
    if t["over_reservation"]:
        n_over = t["over_reservation"]
        text += (f"; {n_over} repl{'ies' if n_over != 1 else 'y'} reported more than {'their' if n_over != 1 else 'its'} "
                 "worst case "
                 f"({t['unbudgeted_tokens']:,} tokens beyond it)")
    if summary.get("stop_reason"):
        text += f"; stopped by the budget ({summary['stop_reason']}: {summary.get('stop_detail')})"
    return text
