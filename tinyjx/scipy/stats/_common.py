"""Shared by the distribution modules: argument promotion (JAX's promote_args_inexact) and standardizing."""
from __future__ import annotations
from tinyjx.array import Array
from tinyjx.numpy.core import promote_inexact

def promote(*args) -> list[Array]:
  """The arguments as arrays of one inexact dtype (ints and bools become the default float)."""
  return promote_inexact(*args)

def standardized(x, loc, scale) -> tuple[Array, Array]:
  """((x - loc) / scale, scale), promoted together."""
  x, loc, scale = promote(x, loc, scale)
  return (x - loc) / scale, scale
