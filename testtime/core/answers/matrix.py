"""A matrix's value at one point of the numeric identity test (`numeric.py`): rows of complex numbers with the
arithmetic defined on them; anything else (a number added to a matrix, shapes that do not combine) is `IllTyped`,
an expression with no value, which equals nothing that has one."""

from __future__ import annotations

from collections.abc import Callable


class IllTyped(Exception):
    """A number added to a matrix, or matrices of shapes that do not combine: no value at all."""


class Matrix:
    """A matrix's value at one point: rows of complex numbers, with the arithmetic that is defined on it."""

    def __init__(self, rows: tuple[tuple[complex, ...], ...]) -> None:
        if len({len(r) for r in rows}) != 1:
            raise IllTyped("ragged matrix")
        self.rows = rows

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.rows), len(self.rows[0])

    def _map(self, f: Callable[[complex], complex]) -> Matrix:
        return Matrix(tuple(tuple(f(x) for x in row) for row in self.rows))

    def _zip(self, other: object, f: Callable[[complex, complex], complex]) -> Matrix:
        if not isinstance(other, Matrix) or other.shape != self.shape:
            raise IllTyped("a matrix combines by + and - only with a matrix of its shape")
        return Matrix(tuple(tuple(map(f, a, b)) for a, b in zip(self.rows, other.rows, strict=True)))

    def __add__(self, other: object) -> Matrix:
        return self._zip(other, lambda a, b: a + b)

    __radd__ = __add__

    def __sub__(self, other: object) -> Matrix:
        return self._zip(other, lambda a, b: a - b)

    def __rsub__(self, other: object) -> Matrix:
        return self._zip(other, lambda a, b: b - a)

    def __neg__(self) -> Matrix:
        return self._map(lambda a: -a)

    def __mul__(self, other: object) -> Matrix:
        if isinstance(other, Matrix):
            if self.shape[1] != other.shape[0]:
                raise IllTyped("matrix product of mismatched shapes")
            columns = list(zip(*other.rows, strict=True))
            return Matrix(
                tuple(tuple(sum(a * b for a, b in zip(r, c, strict=True)) for c in columns) for r in self.rows)
            )
        if isinstance(other, complex | float | int):
            return self._map(lambda a: a * other)
        return NotImplemented

    __rmul__ = __mul__

    def __truediv__(self, other: object) -> Matrix:
        if isinstance(other, Matrix):
            raise IllTyped("division by a matrix")
        return self._map(lambda a: a / other)  # type: ignore[operator]

    def __rtruediv__(self, other: object) -> Matrix:
        raise IllTyped("division by a matrix")

    def __pow__(self, other: object) -> Matrix:
        raise IllTyped("a matrix power")  # integer powers of square matrices: left to math-verify

    def __rpow__(self, other: object) -> Matrix:
        raise IllTyped("a matrix exponent")
