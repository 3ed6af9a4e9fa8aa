"""What the agents' models cost: one table of list prices, in US dollars per million tokens.

Every cost cos shows (the web view's tokens and cost per session and per turn, the HTML export's
header) comes from this table and nowhere else. A model that is not in it has no cost: cos
shows its tokens and no price, never one of a model it resembles.

The prices are the providers' standard list prices, checked on 2026-12-06 against
platform.claude.com/docs/en/about-claude/pricing (and each Claude model's overview page),
developers.openai.com/api/docs/pricing and ai.google.dev/gemini-api/docs/pricing. What the
table does not know, and so never applies: the Batch API's discount, Claude's fast mode (a
message with `speed` other than standard is not priced: `usage` of the adapters), regional
inference surcharges, and the long-context tier some models bill a request whose prompt is
over a threshold (cos sees each turn's totals, not each request's prompt): such turns are
priced at the standard tier.

Cache writes: Claude bills a write kept 5 minutes at 1.25 times the input price and one kept
an hour at 2 times; OpenAI's models before GPT-5.6 and Gemini bill the tokens they cache as
plain input (`cache_write` None here).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Price", "PRICES", "CHECKED", "price_of", "cost", "shown_cost"]

CHECKED = "2026-12-06"


@dataclass(frozen=True)
class Price:
    """A model's list price, US dollars per million tokens.

    `input` is a prompt token neither read from nor written to the cache; `cache_write` a token
    written to it (Claude's 5-minute write; None: billed as input), `cache_write_long` one
    written for an hour (Claude; None: as `cache_write`); `output` includes reasoning.
    """

    input: float
    output: float
    cache_read: float
    cache_write: float | None = None
    cache_write_long: float | None = None


def _claude(input: float, output: float, cache_read: float) -> Price:
    """A Claude model's price: its cache writes at 1.25 (5 minutes) and 2 (an hour) times
    its input price, as Anthropic bills every model of the table."""
    return Price(input, output, cache_read, input * 1.25, input * 2)


# Keyed by the model id without a date suffix (`claude-sonnet-4-20250514` is
# `claude-sonnet-4`, `gpt-4.1-2025-04-14` is `gpt-4.1`).
PRICES: dict[str, Price] = {
    # Anthropic (Claude Code)
    "claude-fable-5-1": _claude(10.00, 50.00, 0.25),
    "claude-fable-5": _claude(10.00, 50.00, 1.00),
    "claude-opus-5-5": _claude(4.00, 20.00, 0.20),
    "claude-opus-5": _claude(5.00, 25.00, 0.50),
    "claude-opus-4-8": _claude(5.00, 25.00, 0.50),
    "claude-opus-4-7": _claude(5.00, 25.00, 0.50),
    "claude-opus-4-6": _claude(5.00, 25.00, 0.50),
    "claude-opus-4-5": _claude(5.00, 25.00, 0.50),
    "claude-opus-4-1": _claude(15.00, 75.00, 1.50),
    "claude-opus-4": _claude(15.00, 75.00, 1.50),
    "claude-sonnet-5-5": _claude(2.00, 10.00, 0.10),  # cache reads cut from 0.20 on 2026-10-07
    "claude-sonnet-5": _claude(2.00, 10.00, 0.20),
    "claude-sonnet-4-6": _claude(3.00, 15.00, 0.30),
    "claude-sonnet-4-5": _claude(3.00, 15.00, 0.30),
    "claude-sonnet-4": _claude(3.00, 15.00, 0.30),
    "claude-3-7-sonnet": _claude(3.00, 15.00, 0.30),
    "claude-haiku-4-5": _claude(1.00, 5.00, 0.10),
    "claude-3-5-haiku": Price(0.80, 4.00, 0.08, 1.00, 1.60),
    "claude-3-haiku": Price(0.25, 1.25, 0.03, 0.30, 0.50),
    # OpenAI (Codex)
    "gpt-5.6-sol": Price(5.00, 30.00, 0.50, 6.25),
    "gpt-5.6-terra": Price(2.00, 12.00, 0.20, 2.50),
    "gpt-5.6-luna": Price(0.20, 1.20, 0.02, 0.25),
    "gpt-5.5": Price(5.00, 30.00, 0.50),
    "gpt-5.4": Price(2.50, 15.00, 0.25),
    "gpt-5.4-mini": Price(0.75, 4.50, 0.075),
    "gpt-5.4-nano": Price(0.20, 1.25, 0.02),
    "gpt-5.3-codex": Price(1.75, 14.00, 0.175),
    "gpt-5.2-codex": Price(1.75, 14.00, 0.175),
    "gpt-5.2": Price(1.75, 14.00, 0.175),
    "gpt-5.1-codex-max": Price(1.25, 10.00, 0.125),
    "gpt-5.1-codex-mini": Price(0.25, 2.00, 0.025),
    "gpt-5.1-codex": Price(1.25, 10.00, 0.125),
    "gpt-5.1": Price(1.25, 10.00, 0.125),
    "gpt-5-codex": Price(1.25, 10.00, 0.125),
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "codex-mini-latest": Price(1.50, 6.00, 0.375),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "o3": Price(2.00, 8.00, 0.50),
    "o4-mini": Price(1.10, 4.40, 0.275),
    # Google (Gemini CLI)
    "gemini-3.1-pro-preview": Price(2.00, 12.00, 0.20),
    "gemini-3-pro-preview": Price(2.00, 12.00, 0.20),
    "gemini-3-flash-preview": Price(0.50, 3.00, 0.05),
    "gemini-2.5-pro": Price(1.25, 10.00, 0.125),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.03),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.01),
}

# A snapshot's date at the end of its id: -20250514 (Anthropic), -2025-04-14 (OpenAI).
_DATED = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")


def price_of(model: str | None) -> Price | None:
    """The price of `model` (an id as the agent's log names it), or None when the table does
    not know it."""
    if not model:
        return None
    name = model.strip().lower()
    found = PRICES.get(name)
    if found is None:
        found = PRICES.get(_DATED.sub("", name))
    return found


def cost(model: str | None, fresh_input: int, output: int, cache_read: int = 0,
         cache_write: int = 0, cache_write_long: int = 0) -> float | None:
    """What `model` charged for these tokens, in US dollars: `fresh_input` prompt tokens
    neither read from the cache nor written to it, `cache_read`, `cache_write` (kept 5 minutes,
    or the model's only write) and `cache_write_long` (kept an hour), and `output` (reasoning
    included). None when the table does not know the model."""
    price = price_of(model)
    if price is None:
        return None
    write = price.input if price.cache_write is None else price.cache_write
    write_long = write if price.cache_write_long is None else price.cache_write_long
    dollars = (fresh_input * price.input + output * price.output + cache_read * price.cache_read
               + cache_write * write + cache_write_long * write_long)
    return dollars / 1_000_000


def shown_cost(dollars: float | None) -> str:
    """A cost as a person reads it: `$1.24`, `$0.0310` under ten cents, "" when not known."""
    if dollars is None:
        return ""
    return f"${dollars:,.2f}" if dollars >= 0.1 or dollars == 0 else f"${dollars:.4f}"
