"""Vendor-neutral pieces of the simulated GPU libraries (NVML and AMD SMI).

``simcore.h`` holds the C machinery both libraries share (state mapping, call counters,
hang/lost handling, the futex event ring, the control setters); ``compiler`` compiles a
library against it and caches the result; ``control_binding`` is the ctypes side of the control
functions every library exports; ``tables`` reads the X-macro tables of a C source, so scenario
parsers need no compiled library.
"""
