"""The small fields of many result rows, kept column by column.

A results.jsonl row minus its big fields (prompt, completion, answer, info) is a dozen small values;
100,000 of them as dicts cost seconds to build and ~300 MB. `RowColumns` keeps one list per field
(and, for the dict-valued metrics, timing and token_usage, one list per inner key), which
`row_index` writes to and reads from disk as typed arrays. `SmallRow` reads one row back.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

# The big fields of a row, read from results.jsonl only when the row is opened.
HEAVY_KEYS = ("prompt", "completion", "answer", "info")
# Small dict-valued fields kept as one column per inner key, so that loading builds no dicts.
SECTIONS = ("metrics", "timing", "token_usage")


class _Absent:
    """A key the row does not have (distinct from a key holding null)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


class _Section:
    """In a section's top-level column: this row's value is a dict, spread over the sub-columns."""

    def __repr__(self) -> str:
        return "SECTION"


SECTION: Any = _Section()


class RowColumns:
    """The small fields of rows 0..count-1. `top[key][i]` is row i's value of `key` (ABSENT when the
    row lacks it, SECTION when it is a dict held in `subs[key][inner_key][i]`)."""

    def __init__(self, count: int = 0, top: dict[str, list[Any]] | None = None,
                 subs: dict[str, dict[str, list[Any]]] | None = None) -> None:
        self.count = count
        self.top: dict[str, list[Any]] = top if top is not None else {}
        self.subs: dict[str, dict[str, list[Any]]] = subs if subs is not None else {}

    def __len__(self) -> int:
        return self.count

    def _column(self, columns: dict[str, list[Any]], key: str) -> list[Any]:
        column = columns.get(key)
        if column is None:
            column = columns[key] = [ABSENT] * self.count
        return column

    def append(self, row: Mapping[str, Any]) -> None:
        """Add one results.jsonl row (its big fields are left out)."""
        i = self.count
        for key, value in row.items():
            if key in HEAVY_KEYS:
                continue
            if key in SECTIONS and isinstance(value, dict):
                subs = self.subs.setdefault(key, {})
                for inner, inner_value in value.items():
                    self._column(subs, str(inner)).append(inner_value)
                value = SECTION
            self._column(self.top, key).append(value)
        self.count = i + 1
        for columns in (self.top, *self.subs.values()):
            for column in columns.values():
                if len(column) == i:
                    column.append(ABSENT)

    def value(self, i: int, key: str) -> Any:
        """Row `i`'s value of `key` as the row had it (a section as a new dict); ABSENT when missing."""
        column = self.top.get(key)
        if column is None:
            return ABSENT
        value = column[i]
        if value is SECTION:
            return {inner: values[i] for inner, values in self.subs.get(key, {}).items() if values[i] is not ABSENT}
        return value

    def as_dict(self, i: int) -> dict[str, Any]:
        """Row `i`'s small fields as a plain dict (what `slim_row` of the parsed line gives)."""
        return {key: self.value(i, key) for key, column in self.top.items() if column[i] is not ABSENT}

    def row(self, i: int) -> SmallRow:
        return SmallRow(self, i)


class _ColumnMapping(Mapping[str, Any]):
    """A read-only view of one row in columns: subclasses give `get` and `__iter__` (keys whose value is
    not ABSENT); indexing and length follow from them."""

    __slots__ = ()

    def get(self, key: str, default: Any = None) -> Any:
        raise NotImplementedError

    def __getitem__(self, key: str) -> Any:
        value = self.get(key, ABSENT)
        if value is ABSENT:
            raise KeyError(key)
        return value

    def __len__(self) -> int:
        return sum(1 for _ in self)


class SmallRow(_ColumnMapping):
    """Row `i`'s small fields as a read-only mapping over the columns, built in no time.

    A section (metrics, timing, token_usage) comes back as a read-only `SectionView` mapping, not a
    dict; `RowColumns.as_dict` gives plain dicts for code that needs them."""

    __slots__ = ("_columns", "_i")

    def __init__(self, columns: RowColumns, i: int) -> None:
        self._columns, self._i = columns, i

    def get(self, key: str, default: Any = None) -> Any:
        column = self._columns.top.get(key)
        if column is None:
            return default
        value = column[self._i]
        if value is ABSENT:
            return default
        if value is SECTION:
            return SectionView(self._columns.subs.get(key, {}), self._i)
        return value

    def __iter__(self) -> Iterator[str]:
        return (k for k, column in self._columns.top.items() if column[self._i] is not ABSENT)

    def __repr__(self) -> str:
        return f"SmallRow({self._columns.as_dict(self._i)!r})"


class SectionView(_ColumnMapping):
    """One row's metrics (or timing, token_usage) read from the sub-columns."""

    __slots__ = ("_subs", "_i")

    def __init__(self, subs: dict[str, list[Any]], i: int) -> None:
        self._subs, self._i = subs, i

    def get(self, key: str, default: Any = None) -> Any:
        values = self._subs.get(key)
        if values is None or values[self._i] is ABSENT:
            return default
        return values[self._i]

    def __iter__(self) -> Iterator[str]:
        return (k for k, values in self._subs.items() if values[self._i] is not ABSENT)

