"""snodo's built-in plugins, registered through the same ``snodo`` entry points as anyone's.

They import nothing from snodo but :mod:`snodo.api`, so they double as the reference for
third-party authors and cannot lean on internals the public interface does not offer.
"""
