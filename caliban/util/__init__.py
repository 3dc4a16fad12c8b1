"""Small helpers with no home of their own: daemon-thread imports (``background``), atomic
writes and path checks (``fsutil``), sentence helpers (``text``), offline token estimates
(``tokens``)."""
