"""Tests for the immutable MCP activation set and its cell."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from caliban.mcp.lazy.activation import DEFAULT_CAP, ActivationCell, McpActivationSet


@pytest.fixture
def anyio_backend() -> str:
    # the agent runs on asyncio; the cell's atomicity argument is about one asyncio loop
    return "asyncio"


def test_empty_set_has_default_cap_and_no_names() -> None:
    s = McpActivationSet.empty()
    assert s.cap == DEFAULT_CAP == 24
    assert len(s) == 0
    assert s.names() == ()
    assert "mcp__a__x" not in s


def test_cap_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        McpActivationSet.empty(0)


def test_value_is_immutable() -> None:
    s = McpActivationSet.empty(3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.cap = 5  # type: ignore[misc]


def test_activate_returns_new_value_and_leaves_old_untouched() -> None:
    s0 = McpActivationSet.empty(3)
    s1, evicted = s0.activate(["a", "b"])
    assert evicted == ()
    assert len(s0) == 0
    assert set(s1) == {"a", "b"}
    assert "a" in s1 and "c" not in s1


def test_activation_is_idempotent() -> None:
    s1, _ = McpActivationSet.empty(3).activate(["a", "b"])
    s2, evicted = s1.activate(["a", "b"])
    assert evicted == ()
    assert s2 is s1
    s3, _ = s2.activate(["a", "a", "b", "a"])
    assert s3.names() == ("a", "b")
    assert len(s3) == 2


def test_duplicate_names_in_one_call_count_once() -> None:
    s, evicted = McpActivationSet.empty(2).activate(["a", "a", "b", "b"])
    assert evicted == ()
    assert s.names() == ("a", "b")


def test_recency_order_most_recent_first() -> None:
    s, _ = McpActivationSet.empty(5).activate(["a"])
    s, _ = s.activate(["b"])
    s, _ = s.activate(["c"])
    assert s.names() == ("c", "b", "a")
    s, _ = s.activate(["a"])  # re-activation refreshes recency
    assert s.names() == ("a", "c", "b")


def test_within_one_call_first_name_is_most_recent() -> None:
    s, _ = McpActivationSet.empty(5).activate(["best", "second", "third"])
    assert s.names() == ("best", "second", "third")


def test_eviction_at_cap_removes_least_recently_used() -> None:
    s, _ = McpActivationSet.empty(3).activate(["a"])
    s, _ = s.activate(["b"])
    s, _ = s.activate(["c"])
    s = s.touch("a")  # a is now the most recent; b is the LRU
    s, evicted = s.activate(["d"])
    assert evicted == ("b",)
    assert set(s) == {"a", "c", "d"}
    assert len(s) == 3


def test_evicted_names_are_reported_oldest_first() -> None:
    s, _ = McpActivationSet.empty(4).activate(["a", "b", "c", "d"])  # d is the oldest
    s, evicted = s.activate(["x", "y", "z"])
    assert evicted == ("d", "c", "b")
    assert s.names() == ("x", "y", "z", "a")


def test_cap_larger_than_one_search_keeps_earlier_results() -> None:
    s, _ = McpActivationSet.empty(24).activate([f"s1_{i}" for i in range(5)])
    s, evicted = s.activate([f"s2_{i}" for i in range(5)])
    assert evicted == ()
    assert len(s) == 10
    assert all(f"s1_{i}" in s for i in range(5))


def test_one_call_activating_more_than_cap_keeps_all_of_them() -> None:
    s, _ = McpActivationSet.empty(3).activate(["old1", "old2"])
    many = [f"n{i}" for i in range(5)]
    s, evicted = s.activate(many)
    assert set(evicted) == {"old1", "old2"}
    assert s.names() == tuple(many)
    assert len(s) == 5  # over the soft cap on purpose
    # the next call shrinks it back to the cap, evicting the oldest of the overflow
    s, evicted = s.activate(["fresh"])
    assert evicted == ("n4", "n3", "n2")
    assert s.names() == ("fresh", "n0", "n1")


def test_reactivating_an_active_name_never_evicts_it() -> None:
    s, _ = McpActivationSet.empty(2).activate(["a", "b"])
    s, evicted = s.activate(["b", "c"])
    assert evicted == ("a",)
    assert set(s) == {"b", "c"}


def test_touch_refreshes_recency_and_ignores_inactive_names() -> None:
    s, _ = McpActivationSet.empty(3).activate(["a", "b", "c"])
    assert s.touch("nope") is s
    assert s.touch("a") is s  # already most recent
    t = s.touch("c")
    assert t.names() == ("c", "a", "b")
    assert t.in_activation_order() == s.in_activation_order()


def test_in_activation_order_is_stable_under_use_and_reactivation() -> None:
    s, _ = McpActivationSet.empty(4).activate(["a", "b"])
    s, _ = s.activate(["c"])
    wire = s.in_activation_order()
    assert wire == ("a", "b", "c")
    s = s.touch("a").touch("b")
    s, _ = s.activate(["c", "a"])
    assert s.in_activation_order() == wire
    assert list(s) == list(wire)


def test_evicted_then_reactivated_name_goes_to_the_end_of_activation_order() -> None:
    s, _ = McpActivationSet.empty(3).activate(["a"])
    s, _ = s.activate(["b"])
    s, _ = s.activate(["c"])
    s, evicted = s.activate(["d"])
    assert evicted == ("a",)
    assert s.in_activation_order() == ("b", "c", "d")
    s, evicted = s.activate(["a"])
    assert evicted == ("b",)
    assert s.in_activation_order() == ("c", "d", "a")


def test_without_drops_names_from_both_orders() -> None:
    s, _ = McpActivationSet.empty(5).activate(["a", "b", "c"])
    t = s.without(["b", "unknown"])
    assert t.names() == ("a", "c")
    assert t.in_activation_order() == ("a", "c")
    assert s.without(["unknown"]) is s
    assert "b" in s  # the original is unchanged


def test_inconsistent_orders_are_rejected() -> None:
    with pytest.raises(ValueError, match="same distinct names"):
        McpActivationSet(cap=3, recency=("a",), activation_order=("b",))
    with pytest.raises(ValueError, match="same distinct names"):
        McpActivationSet(cap=3, recency=("a", "a"), activation_order=("a",))


def test_cell_update_stores_the_new_value_and_returns_the_result() -> None:
    cell = ActivationCell(McpActivationSet.empty(1))
    assert cell.update(lambda s: s.activate(["a"])) == ()
    assert cell.activate(["b"]) == ("a",)
    assert cell.get().names() == ("b",)
    assert cell.swap(lambda s: s.without(["b"])) is cell.get()
    assert len(cell.get()) == 0


def test_child_snapshot_does_not_change_the_parent() -> None:
    parent = ActivationCell(McpActivationSet.empty(5))
    parent.activate(["p1", "p2"])
    child = ActivationCell(parent.get())  # a sub-agent starts from the parent's value
    child.activate(["c1", "c2"])
    child.swap(lambda s: s.without(["p1"]))
    assert parent.get().names() == ("p1", "p2")
    assert set(child.get()) == {"c1", "c2", "p2"}


@pytest.mark.anyio
async def test_concurrent_activations_through_a_cell_lose_nothing() -> None:
    cell = ActivationCell(McpActivationSet.empty(100))

    async def tool_call(i: int) -> tuple[str, ...]:
        # a search that yields to the loop between reading and activating
        await asyncio.sleep(0)
        found = [f"mcp__srv__tool{i}_{j}" for j in range(3)]
        await asyncio.sleep(0)
        return cell.activate(found)

    evictions = await asyncio.gather(*(tool_call(i) for i in range(20)))
    assert all(e == () for e in evictions)
    assert len(cell.get()) == 60
    assert all(f"mcp__srv__tool{i}_{j}" in cell.get() for i in range(20) for j in range(3))


@pytest.mark.anyio
async def test_concurrent_activations_with_eviction_stay_consistent() -> None:
    cell = ActivationCell(McpActivationSet.empty(5))

    async def tool_call(i: int) -> tuple[str, ...]:
        await asyncio.sleep(0)
        return cell.activate([f"t{i}"])

    evictions = await asyncio.gather(*(tool_call(i) for i in range(12)))
    evicted = [name for batch in evictions for name in batch]
    final = cell.get()
    assert len(final) == 5
    # every activated name is either still active or was reported evicted exactly once
    assert sorted(evicted + list(final)) == sorted(f"t{i}" for i in range(12))
