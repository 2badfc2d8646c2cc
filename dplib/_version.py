"""The version of dplib: one place, read by the package, its setup and its reports."""
__version__ = "0.1.0"
