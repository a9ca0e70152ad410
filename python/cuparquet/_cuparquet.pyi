"""Type stubs of the extension module (the package `cuparquet` re-exports and wraps it)."""

import os
from typing import Any, Iterator, Sequence

__version__: str

class CuparquetError(Exception):
    """A file that cannot be read or decoded, a device that failed: the message names the
    file (or URL), the byte range, the row group and the column."""

class Column:
    """One fixed-width column in place, for array libraries: ``cupy.asarray(col)``,
    ``torch.from_dlpack(col)`` on a device column, ``numpy.asarray(col)`` on a host one.
    Dates, times and timestamps are their integer storage. Nulls are not marked in the values:
    ``validity`` is a separate mask."""

    @property
    def name(self) -> str: ...
    @property
    def dtype(self) -> str:
        """NumPy's type string: ``"<i8"``, ``"<f4"``, ``"|b1"`` …"""
    @property
    def arrow_type(self) -> str: ...
    @property
    def device(self) -> str:
        """``"host"`` or ``"cuda:N"``."""
    @property
    def null_count(self) -> int: ...
    @property
    def data_ptr(self) -> int:
        """The address of element 0 (device or host)."""
    @property
    def validity(self) -> Column | None:
        """``None`` without nulls, else one ``bool`` per row (``True``: a value) where the
        column lives."""
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """Device columns only (``AttributeError`` on the host)."""
    @property
    def __array_interface__(self) -> dict[str, Any]:
        """Host columns only (``AttributeError`` on a device)."""
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> object: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...
    def to_pyarrow(self) -> Any:
        """A host copy as a ``pyarrow.Array``, nulls as nulls."""
    def __len__(self) -> int: ...

class RecordBatch:
    """One batch: its columns in device memory (a device read) or host memory."""

    @property
    def num_rows(self) -> int: ...
    @property
    def num_columns(self) -> int: ...
    @property
    def device(self) -> str:
        """``"host"`` or ``"cuda:N"``."""
    @property
    def file(self) -> str:
        """The file it was read from."""
    @property
    def rows(self) -> list[tuple[int, int, int]]:
        """``(row_group, start, end)`` of each piece of a row group it holds."""
    @property
    def schema(self) -> Any:
        """Its schema (``__arrow_c_schema__``; ``pyarrow.schema(batch.schema)``)."""
    def to_pyarrow(self) -> Any:
        """A host copy as a ``pyarrow.RecordBatch``."""
    def column(self, key: str | int) -> Column:
        """A fixed-width column in place (no copy), for CuPy, PyTorch or NumPy."""
    def __len__(self) -> int: ...
    def __arrow_c_schema__(self) -> object: ...
    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]:
        """Host batches only: a device batch raises ``ValueError`` saying how to get a copy."""
    def __arrow_c_device_array__(
        self, requested_schema: object | None = None, **kwargs: Any
    ) -> tuple[object, object]: ...

class Table:
    """A scan loaded whole: its batches, their schema, the report."""

    @property
    def num_rows(self) -> int: ...
    @property
    def num_columns(self) -> int: ...
    @property
    def column_names(self) -> list[str]: ...
    @property
    def device(self) -> str: ...
    @property
    def batches(self) -> list[RecordBatch]: ...
    @property
    def schema(self) -> Any: ...
    @property
    def report(self) -> dict[str, Any]:
        """Per file: the device chosen and why, bytes per I/O path, where each field was
        decoded, the times."""
    def to_pyarrow(self) -> Any:
        """A host copy as a ``pyarrow.Table``."""
    def column(self, key: str | int) -> Column:
        """A fixed-width column: in place for one batch; the batches' columns copied into one
        buffer where they live for several."""
    def __len__(self) -> int: ...
    def __arrow_c_schema__(self) -> object: ...
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...
    def __arrow_c_device_stream__(
        self, requested_schema: object | None = None, **kwargs: Any
    ) -> object: ...

class Scanner:
    """The batches of a scan, read ahead of the caller."""

    @property
    def schema(self) -> Any: ...
    def __iter__(self) -> Iterator[RecordBatch]: ...
    def __next__(self) -> RecordBatch: ...
    def close(self) -> None: ...
    def __arrow_c_schema__(self) -> object: ...
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...
    def __arrow_c_device_stream__(
        self, requested_schema: object | None = None, **kwargs: Any
    ) -> object: ...

def read_table(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    columns: Sequence[str] | None = None,
    filter: str | None = None,
    device: str = "auto",
    batch_rows: int | None = None,
    memory_budget: int | None = None,
    **settings: Any,
) -> Table: ...
def scan(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    columns: Sequence[str] | None = None,
    filter: str | None = None,
    device: str = "auto",
    batch_rows: int | None = None,
    memory_budget: int | None = None,
    **settings: Any,
) -> Scanner: ...
def cuda_devices() -> dict[str, Any]: ...
def doctor(path: str | os.PathLike[str] = ".", bench: bool = False) -> dict[str, Any]:
    """The checks of ``cuparquet doctor``: ``{"ok": bool, "checks": [{"status", "name",
    "detail", "fix"}, ...]}``."""
def device_memory() -> dict[str, dict[str, int]]:
    """Per device: ``live_bytes``, ``peak_live_bytes`` and ``pinned_bytes`` cuparquet holds."""
