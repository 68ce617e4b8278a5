"""Tokens, calls and cost per stage and model, a price table, and a budget that is never exceeded.

Prices are USD per million tokens, given by the user as JSON: ``{"model-name": {"input": 0.15, "output": 0.6}}``.

The budget (``max_cost_usd``, ``max_tokens``) is checked before every HTTP request against the request's worst
case: its prompt estimate (``ChatRequest.estimate_prompt_tokens``, raised per model whenever a server reports
more) plus its ``max_tokens``. Requests in flight hold their worst case until they settle. A request that would
fit once those settle waits for them; one that cannot fit even then is refused, and the run stops cleanly with
``stop_reason`` set. A settled request is charged its reported usage; one whose usage is unknown but that the
server may have billed (a timeout, a dropped connection, a reply without usage) is charged its worst case. So
the charged total never passes the budget as long as servers bill no more than they report.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from benchmint.io import InputError

COUNTERS = ("items", "replies", "cached", "failed", "requests", "unknown_usage", "prompt_tokens",
            "completion_tokens", "cached_prompt_tokens", "cached_completion_tokens")


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


class Verdict(Enum):
    GO = "go"
    WAIT = "wait"  # fits once the requests in flight settle
    REFUSE = "refuse"


@dataclass(slots=True)
class Reservation:
    stage: str
    model: str
    prompt_estimate: int
    tokens: int
    cost: float


class Accounting:
    """Counters per (stage, model) and the budget of a run. Engines running in one event loop may share one (a
    single budget for the answering model and its judge)."""

    def __init__(self, prices: PriceTable | None = None, budget: Budget | None = None) -> None:
        self.prices = prices or PriceTable()
        self.budget = budget or Budget()
        self._rows: dict[tuple[str, str], dict] = {}
        self._prompt_factor: dict[str, float] = {}
        self.charged_tokens = 0
        self.charged_cost = 0.0
        self.reserved_tokens = 0
        self.reserved_cost = 0.0
        self.stop_reason: str | None = None

    def check(self, model: str, max_tokens: int | None) -> None:
        """Raise ValueError when the budget cannot bound a request for ``model`` with this ``max_tokens``."""
        if self.budget.max_cost_usd is not None and self.prices.get(model) is None:
            raise ValueError(f"--max-cost needs a price for model {model!r}; the price table has "
                             f"{sorted(self.prices.as_dict()) or 'no models'}")
        if (self.budget.max_cost_usd is not None or self.budget.max_tokens is not None) and max_tokens is None:
            raise ValueError("a budget (--max-cost/--max-tokens) needs every request to set max_tokens, "
                             "the bound of its reply")

    def _row(self, stage: str, model: str) -> dict:
        row = self._rows.get((stage, model))
        if row is None:
            row = self._rows[(stage, model)] = dict.fromkeys(COUNTERS, 0)
        return row

    def worst_case(self, model: str, prompt_estimate: int, max_tokens: int | None) -> tuple[int, float]:
        prompt = int(prompt_estimate * self._prompt_factor.get(model, 1.0)) + 1
        completion = max_tokens or 0
        price = self.prices.get(model)
        return prompt + completion, price.cost(prompt, completion) if price else 0.0

    def reserve(self, stage: str, model: str, prompt_estimate: int, max_tokens: int | None
                ) -> Reservation | Verdict:
        """A reservation for one request, or WAIT (retry after a settle) or REFUSE (stop: the budget is spent)."""
        tokens, cost = self.worst_case(model, prompt_estimate, max_tokens)
        b = self.budget
        over_alone = ((b.max_tokens is not None and self.charged_tokens + tokens > b.max_tokens)
                      or (b.max_cost_usd is not None and self.charged_cost + cost > b.max_cost_usd))
        if over_alone:
            if self.stop_reason is None:
                cost_over = b.max_cost_usd is not None and self.charged_cost + cost > b.max_cost_usd
                self.stop_reason = "max_cost" if cost_over else "max_tokens"
            return Verdict.REFUSE
        if ((b.max_tokens is not None and self.charged_tokens + self.reserved_tokens + tokens > b.max_tokens)
                or (b.max_cost_usd is not None and self.charged_cost + self.reserved_cost + cost > b.max_cost_usd)):
            return Verdict.WAIT
        self.reserved_tokens += tokens
        self.reserved_cost += cost
        return Reservation(stage, model, prompt_estimate, tokens, cost)

    def settle(self, res: Reservation, prompt_tokens: int | None, completion_tokens: int | None,
               maybe_billed: bool) -> None:
        """Release ``res`` and charge the request: its reported usage, else its worst case if it may be billed."""
        self.reserved_tokens -= res.tokens
        self.reserved_cost -= res.cost
        row = self._row(res.stage, res.model)
        if prompt_tokens is not None and completion_tokens is not None:
            row["prompt_tokens"] += prompt_tokens
            row["completion_tokens"] += completion_tokens
            self.charged_tokens += prompt_tokens + completion_tokens
            price = self.prices.get(res.model)
            if price is not None:
                self.charged_cost += price.cost(prompt_tokens, completion_tokens)
            if res.prompt_estimate > 0 and prompt_tokens > res.prompt_estimate:
                factor = prompt_tokens / res.prompt_estimate
                if factor > self._prompt_factor.get(res.model, 1.0):
                    self._prompt_factor[res.model] = factor
        elif maybe_billed:
            row["unknown_usage"] += 1
            self.charged_tokens += res.tokens
            self.charged_cost += res.cost

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
            row["cached_prompt_tokens"] += prompt_tokens or 0
            row["cached_completion_tokens"] += completion_tokens or 0

    def summary(self) -> dict:
        rows: list[dict] = []
        total: dict[str, float | None] = dict.fromkeys(COUNTERS, 0)
        total_cost: float | None = 0.0
        for (stage, model), counts in sorted(self._rows.items()):
            price = self.prices.get(model)
            cost = price.cost(counts["prompt_tokens"], counts["completion_tokens"]) if price else None
            rows.append({"stage": stage, "model": model, **counts,
                         "cost_usd": None if cost is None else round(cost, 6)})
            for name in COUNTERS:
                total[name] = (total[name] or 0) + counts[name]
            total_cost = None if cost is None or total_cost is None else total_cost + cost
        total["cost_usd"] = None if total_cost is None else round(total_cost, 6)
        return {"by_stage_model": rows, "total": total,
                "budget": {"max_cost_usd": self.budget.max_cost_usd, "max_tokens": self.budget.max_tokens,
                           "charged_cost_usd": round(self.charged_cost, 6), "charged_tokens": self.charged_tokens},
                "prices": self.prices.as_dict(), "stop_reason": self.stop_reason}
