"""The package version, in one place: pyproject.toml reads it (``[tool.setuptools.dynamic]``), the package, the
server and the emitter import it from here.

>>> from rtxviz._version import __version__
>>> __version__.count(".")
2
"""

__version__: str = "0.1.0"
