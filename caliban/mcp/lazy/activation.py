"""Which lazily loaded MCP tools are currently on the wire.

With ``tools.lazy_mcp`` on, an MCP tool is offered to the model only after ``ToolSearch`` found
it. The tools found so far form an :class:`McpActivationSet`: an immutable value with a soft cap
and least-recently-used eviction. Every change returns a new value, so

* a sub-agent gets a snapshot simply by sharing the parent's current value;
* the session keeps one reference in an :class:`ActivationCell` and swaps it whole.

Two orders are kept. *Recency* (most recently activated or used first) decides eviction.
*Activation order* (when a name first joined) is the order in which tools are put on the wire:
it does not change when a tool is merely used again, so the tool list sent to the provider
keeps its prefix and prompt caches stay valid.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["DEFAULT_CAP", "ActivationCell", "McpActivationSet"]

DEFAULT_CAP = 24
"""Default soft cap on simultaneously active MCP tools."""

_R = TypeVar("_R")


@dataclass(frozen=True, slots=True, kw_only=True)
class McpActivationSet:
    """An immutable set of active MCP tool names with a soft cap and LRU eviction.

    Build one with :meth:`empty`; every other method returns a new value (or ``self`` when
    nothing changes, so identity comparison is a cheap "did anything change?" test).

    The cap is *soft*: one :meth:`activate` call never evicts a name it activates itself. If a
    single call activates more names than the cap, all of them stay and every older name is
    evicted; the set then shrinks back to the cap as later calls evict the overflow.
    """

    cap: int
    recency: tuple[str, ...] = ()
    """Active names, most recently activated or touched first."""
    activation_order: tuple[str, ...] = ()
    """Active names in the order they first joined (the wire order)."""

    def __post_init__(self) -> None:
        if self.cap < 1:
            raise ValueError(f"activation cap must be at least 1, got {self.cap}")
        if set(self.recency) != set(self.activation_order) or len(self.recency) != len(
            set(self.recency)
        ):
            raise ValueError("recency and activation_order must hold the same distinct names")

    @classmethod
    def empty(cls, cap: int = DEFAULT_CAP) -> McpActivationSet:
        """Return an empty set with the given soft cap."""
        return cls(cap=cap)

    def activate(self, names: Iterable[str]) -> tuple[McpActivationSet, tuple[str, ...]]:
        """Activate ``names`` and return ``(new_set, evicted_names)``.

        Names already active only have their recency refreshed; their place in
        :meth:`in_activation_order` is kept. Within one call the first name given counts as the
        most recent (search results come best first, so the weakest hit would go first).
        When the result exceeds the cap, least-recently-used names are evicted, oldest first,
        but never a name activated by this call (see the class docstring on the soft cap).
        ``evicted_names`` lists evictions oldest first.
        """
        fresh = tuple(dict.fromkeys(names))
        if not fresh:
            return self, ()
        fresh_set = set(fresh)
        older = [name for name in self.recency if name not in fresh_set]
        room = max(self.cap - len(fresh), 0)
        kept_older, evicted = older[:room], tuple(reversed(older[room:]))
        recency = fresh + tuple(kept_older)
        if recency == self.recency:
            return self, ()
        gone = set(evicted)
        order = [name for name in self.activation_order if name not in gone]
        known = set(order)
        order.extend(name for name in fresh if name not in known)
        new = McpActivationSet(cap=self.cap, recency=recency, activation_order=tuple(order))
        return new, evicted

    def touch(self, name: str) -> McpActivationSet:
        """Mark an active tool as just used; return ``self`` if it is not active."""
        if name not in self.recency or self.recency[0] == name:
            return self
        recency = (name, *(n for n in self.recency if n != name))
        return McpActivationSet(
            cap=self.cap, recency=recency, activation_order=self.activation_order
        )

    def without(self, names: Iterable[str]) -> McpActivationSet:
        """Drop ``names`` (e.g. tools whose server went away); unknown names are ignored."""
        drop = set(names).intersection(self.recency)
        if not drop:
            return self
        return McpActivationSet(
            cap=self.cap,
            recency=tuple(n for n in self.recency if n not in drop),
            activation_order=tuple(n for n in self.activation_order if n not in drop),
        )

    def names(self) -> tuple[str, ...]:
        """Active names, most recently activated or touched first."""
        return self.recency

    def in_activation_order(self) -> tuple[str, ...]:
        """Active names in first-activation order: the order to put them on the wire.

        A name that was evicted and activated again goes to the end.
        """
        return self.activation_order

    def __contains__(self, name: object) -> bool:
        return name in self.recency

    def __len__(self) -> int:
        return len(self.recency)

    def __iter__(self) -> Iterator[str]:
        return iter(self.activation_order)


class ActivationCell:
    """The one mutable holder of the current :class:`McpActivationSet`.

    :meth:`update` reads the current value, applies a pure function and stores the result
    without awaiting in between. Inside one asyncio event loop nothing else can run during that
    step, so concurrent tool calls of one turn (``asyncio.gather``) cannot lose each other's
    activations. The cell is not thread-safe: use it from the event loop's thread only.

    A sub-agent gets its own cell started from the parent's current value; the value is
    immutable, so the child's changes never reach the parent.
    """

    __slots__ = ("_value",)

    def __init__(self, value: McpActivationSet) -> None:
        self._value = value

    def get(self) -> McpActivationSet:
        """Return the current value (an immutable snapshot)."""
        return self._value

    def update(self, fn: Callable[[McpActivationSet], tuple[McpActivationSet, _R]]) -> _R:
        """Replace the value with ``fn(value)[0]`` atomically and return ``fn(value)[1]``.

        Shaped for :meth:`McpActivationSet.activate`:
        ``evicted = cell.update(lambda s: s.activate(names))``.
        ``fn`` must be pure and must not touch the cell itself.
        """
        new, result = fn(self._value)
        self._value = new
        return result

    def swap(self, fn: Callable[[McpActivationSet], McpActivationSet]) -> McpActivationSet:
        """Replace the value with ``fn(value)`` atomically and return the new value.

        For the methods that return only a set: ``cell.swap(lambda s: s.touch(name))``.
        """
        self._value = fn(self._value)
        return self._value

    def activate(self, names: Iterable[str]) -> tuple[str, ...]:
        """Activate ``names`` in place; return the names evicted to make room."""
        wanted = tuple(names)
        return self.update(lambda current: current.activate(wanted))
