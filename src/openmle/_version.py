"""The package version, single-sourced for hatchling and ``openmle.__version__``."""

__version__ = "0.1.0.dev0"
