"""Parquet straight into GPU memory as Arrow, and into host memory where there is no GPU.

    import cuparquet
    t = cuparquet.read_table("lineitem.parquet", columns=["l_orderkey", "l_quantity"],
                             filter=[("l_quantity", ">", 40)], device="auto")
    t.report["loads"][0]["device"]      # which device was chosen, and why
    t.to_pyarrow()                      # a host copy as a pyarrow.Table
    for batch in cuparquet.scan("data/", batch_rows=1 << 20):
        ...                             # batches one by one, each on the device it was read to

Batches and tables speak the Arrow PyCapsule interface: device batches through
``__arrow_c_device_array__`` / ``__arrow_c_device_stream__`` (pylibcudf takes them without a
copy), host batches through ``__arrow_c_array__`` / ``__arrow_c_stream__`` (pyarrow, polars,
duckdb take them without a copy). ``batch.column("x")`` / ``table.column("x")`` hand a
fixed-width column to CuPy and PyTorch (``__cuda_array_interface__``, ``__dlpack__``) or NumPy
in place, its nulls as a separate mask (``.validity``). ``cuparquet.doctor()`` says what this
machine offers and what a read will do with it.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import os
import re
from typing import Any, Iterable, Sequence, Union

from ._cuparquet import (
    Column,
    CuparquetError,
    RecordBatch,
    Scanner,
    Table,
    __version__,
    cuda_devices,
    device_memory,
    doctor,
)
from ._cuparquet import read_table as _read_table
from ._cuparquet import scan as _scan

__all__ = [
    "Column",
    "CuparquetError",
    "RecordBatch",
    "Scanner",
    "Table",
    "__version__",
    "cuda_devices",
    "device_memory",
    "doctor",
    "filter_text",
    "read_table",
    "scan",
]

Source = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]
Filter = Union[str, Sequence[Any]]

_OPS = {"=": "=", "==": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _column(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"filter: a column name must be a non-empty str, not {name!r}")
    if _NAME.fullmatch(name):
        return name
    if "`" in name:
        raise ValueError(f"filter: a column name with a backtick cannot be filtered: {name!r}")
    return f"`{name}`"


def _literal(value: Any) -> str:
    if value is None:
        raise ValueError(
            "filter: None compares as nothing; write ('x', 'is', None) is not supported, "
            "use the text form 'x IS NULL'"
        )
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"filter: {value!r} cannot be compared")
        return repr(value)
    if isinstance(value, _decimal.Decimal):
        return str(value)
    if isinstance(value, _dt.datetime):
        return "'" + value.isoformat() + "'"
    if isinstance(value, _dt.date):
        return "'" + value.isoformat() + "'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise TypeError(f"filter: a literal must be a bool, int, float, Decimal, str, date or datetime, not {value!r}")


def _term(term: Any) -> str:
    if not isinstance(term, (tuple, list)) or len(term) != 3:
        raise TypeError(f"filter: each term is a (column, op, value) tuple, not {term!r}")
    col, op, value = term
    col = _column(col)
    if not isinstance(op, str):
        raise TypeError(f"filter: the operator of {term!r} must be a str")
    op_l = op.strip().lower()
    if op_l in ("in", "not in"):
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise TypeError(f"filter: '{op}' takes a list of values, not {value!r}")
        values = list(value)
        if not values:
            # as pyarrow reads them: x in [] keeps no row, x not in [] every row (nulls too)
            if op_l == "in":
                return f"({col} IS NULL AND {col} IS NOT NULL)"
            return f"({col} IS NULL OR {col} IS NOT NULL)"
        inner = ", ".join(_literal(v) for v in values)
        return f"{col} {'IN' if op_l == 'in' else 'NOT IN'} ({inner})"
    if op_l not in _OPS:
        raise ValueError(
            f"filter: unknown operator {op!r} (=, ==, !=, <, <=, >, >=, in, not in)"
        )
    return f"{col} {_OPS[op_l]} {_literal(value)}"


def filter_text(filter: Filter) -> str:
    """The row-filter text of ``filter``: text as given, or pyarrow's DNF list form.

    ``[("x", ">", 3), ("s", "in", ["a", "b"])]`` is a conjunction (``x > 3 AND s IN ('a',
    'b')``); a list of such lists is a disjunction of conjunctions, as
    ``pyarrow.parquet.read_table(filters=...)`` reads them.
    """
    if isinstance(filter, str):
        return filter
    if not isinstance(filter, (list, tuple)) or not filter:
        raise TypeError(
            "filter: row-filter text, or pyarrow's form: a non-empty list of (column, op, value)"
            " tuples, or a list of such lists"
        )
    if all(isinstance(t, (list, tuple)) and t and isinstance(t[0], (list, tuple)) for t in filter):
        return " OR ".join("(" + " AND ".join(_term(t) for t in conj) + ")" for conj in filter)
    return " AND ".join(_term(t) for t in filter)


def read_table(
    source: Source,
    columns: Sequence[str] | None = None,
    filter: Filter | None = None,
    device: str = "auto",
    batch_rows: int | None = None,
    memory_budget: int | None = None,
    **settings: Any,
) -> Table:
    """Reads ``source`` (a file; a directory of ``*.parquet`` at any depth, hive
    ``key=value/`` directories giving columns, filters on them skipping whole directories; a
    glob such as ``"data/year=*/*.parquet"``; a URL — ``s3://``, ``gs://``, ``az://``,
    ``http(s)://``; ending in ``/``: the objects under it — or a list) whole.

    ``columns``: the columns to read (nested fields as ``"s.b"``); ``filter``: only the rows
    where it is true, as row-filter text (``"x > 3 AND s = 'a'"``) or pyarrow's DNF list
    form (row groups and pages that cannot match are not read); ``device``: ``"auto"``
    (a GPU where there is one), ``"host"``, ``"cuda"`` or ``"cuda:N"``; ``batch_rows``: rows
    per batch (default 1,048,576); ``memory_budget``: device bytes the read may hold.
    ``settings``: ``storage_options`` (a dict of the object_store builders' keys for URL
    sources: ``aws_endpoint``, ``aws_region``, ``aws_allow_http``, ``timeout``, …, over the
    ``AWS_*`` / ``GOOGLE_*`` / ``AZURE_*`` environment), ``remote_concurrency`` (GETs in
    flight), ``row_groups``, ``page_index``, ``string_views``, ``keep_dictionaries``,
    ``nthreads``, ``task_size``, ``direct_io``, ``compat_mode``, ``gds_threshold``,
    ``bounce_buffer_size``, ``max_page_size``, ``tuning``.

    The GIL is released while the file is read and decoded; Ctrl-C stops the wait.
    Raises ``CuparquetError`` naming the file, byte range, row group and column of what went
    wrong.
    """
    return _read_table(
        source,
        columns=list(columns) if columns is not None else None,
        filter=filter_text(filter) if filter is not None else None,
        device=device,
        batch_rows=batch_rows,
        memory_budget=memory_budget,
        **settings,
    )


def scan(
    source: Source,
    columns: Sequence[str] | None = None,
    filter: Filter | None = None,
    device: str = "auto",
    batch_rows: int | None = None,
    memory_budget: int | None = None,
    **settings: Any,
) -> Scanner:
    """The batches of ``source`` one by one, read and decoded ahead of the caller: the
    arguments of :func:`read_table`. Under ``memory_budget``, the batches not yet taken
    hold at most that much device memory."""
    return _scan(
        source,
        columns=list(columns) if columns is not None else None,
        filter=filter_text(filter) if filter is not None else None,
        device=device,
        batch_rows=batch_rows,
        memory_budget=memory_budget,
        **settings,
    )
