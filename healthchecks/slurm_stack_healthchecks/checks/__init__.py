"""The built-in checks; importing this package registers them (see :mod:`..registry`)."""

from . import dcgm, disk, gpu, gpu_xid, jail, munge

__all__ = ["dcgm", "disk", "gpu", "gpu_xid", "jail", "munge"]
