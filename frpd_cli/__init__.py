"""frpd: feasible recourse plans via diverse interpolation."""

__version__ = "0.1.0"

__all__ = ["__version__"]
