"""Vendor-neutral pieces of the simulated GPU libraries (NVML and AMD SMI).

``simcore.h`` holds the C machinery both libraries share (state mapping, call counters,
hang/lost handling, the futex event ring, the control setters); ``build`` compiles a
library against it and caches the result; ``tables`` reads the X-macro tables of a C
source, so scenario parsers need no compiled library.
"""
