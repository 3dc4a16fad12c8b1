"""``caliban -p``: the headless run (``run``) and Claude Code's stream-json frames
(``frames``)."""
