"""What a Claude Code user brings along: its settings files (``settings``), its model aliases
(``model_aliases``), and what its flags and settings change before a session opens
(``compat``). Its stream-json frames are :mod:`caliban.headless.frames`."""
