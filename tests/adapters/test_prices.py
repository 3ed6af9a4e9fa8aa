"""The one table of model prices (adapters/prices.py): a known model is priced from its list
price, a snapshot by its model's, an unknown model not at all."""

from __future__ import annotations

import pytest

from coding_os.adapters.prices import PRICES, cost, price_of, shown_cost


def test_a_snapshot_id_is_priced_as_its_model_and_an_unknown_model_has_no_price() -> None:
    assert price_of("claude-sonnet-4-20250514") == PRICES["claude-sonnet-4"]
    assert price_of("gpt-4.1-2025-04-14") == PRICES["gpt-4.1"]
    assert price_of("Claude-Opus-5") == PRICES["claude-opus-5"]
    for unknown in ("claude-test", "gpt-5-1-codex-2025-11-13", "claude-sonnet", "", None,
                    "claude-sonnet-4-2025"):
        assert price_of(unknown) is None
        assert cost(unknown, 1000, 1000) is None


def test_a_cost_adds_each_kind_of_token_at_its_own_rate() -> None:
    # Claude Opus 5: $5 input, $25 output, $0.50 cache reads, $6.25 (5 min) / $10 (1 h) writes.
    assert cost("claude-opus-5", 1_000_000, 0) == pytest.approx(5.0)
    assert cost("claude-opus-5", 0, 1_000_000) == pytest.approx(25.0)
    assert cost("claude-opus-5", 0, 0, cache_read=1_000_000) == pytest.approx(0.5)
    assert cost("claude-opus-5", 0, 0, cache_write=1_000_000) == pytest.approx(6.25)
    assert cost("claude-opus-5", 0, 0, cache_write_long=1_000_000) == pytest.approx(10.0)
    # OpenAI before GPT-5.6 bills the tokens it caches as input; GPT-5.6 has a write rate.
    assert cost("gpt-5.3-codex", 0, 0, cache_write=1_000_000) == pytest.approx(1.75)
    assert cost("gpt-5.6-sol", 0, 0, cache_write=1_000_000) == pytest.approx(6.25)
    assert cost("gemini-2.5-pro", 2_000_000, 100_000, cache_read=1_000_000) == \
        pytest.approx(2 * 1.25 + 0.1 * 10 + 0.125)


def test_every_price_of_the_table_is_a_rate_per_million_tokens_cache_reads_cheaper() -> None:
    assert {name.split("-")[0] for name in PRICES} == {"claude", "gpt", "codex", "o3", "o4",
                                                       "gemini"}
    for name, price in PRICES.items():
        assert 0 < price.cache_read < price.input < price.output <= 75, name
        assert price.cache_write is None or price.cache_write >= price.input, name


def test_a_cost_reads_in_dollars_and_cents_and_a_small_one_to_the_hundredth_of_a_cent() -> None:
    assert (shown_cost(8.3712), shown_cost(1234.5), shown_cost(0.13), shown_cost(0.0312),
            shown_cost(0.0), shown_cost(None)) == ("$8.37", "$1,234.50", "$0.13", "$0.0312",
                                                   "$0.00", "")
